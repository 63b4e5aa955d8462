"""The chain-file subcommands: check, list, schema (exit codes and pointed messages)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agui_pipes._cli import main
from agui_pipes.config import Registry, chain_schema

INVALID = {
    "unknown type": ("transformers:\n  - type: tool_result_to_stat\n", ":2:11:", "did you mean"),
    "unknown option": ("transformers:\n  - verify: {profle: x}\n", ":2:14:", "`profile`"),
    "wrong type": ("transformers:\n  - filter_tool_calls: {deny: x}\n", ":2:31:", "valid list"),
    "allow and deny": (
        "transformers:\n  - filter_tool_calls: {allow: [a], deny: [b]}\n",
        ":2:5:",
        "exactly one of `allow` or `deny`",
    ),
    "bad pointer": (
        "transformers:\n  - tool_result_to_state: {tool: t, mode: at, pointer: x}\n",
        ":2:56:",
        "not a JSON Pointer",
    ),
    "malformed yaml": ("transformers: [\n", ":2:1:", "malformed YAML"),
    "unsafe tag": (
        "transformers:\n  - !!python/object/apply:os.system [true]\n",
        ":2:5:",
        "is not allowed",
    ),
}


@pytest.mark.parametrize("case", sorted(INVALID))
def test_check_reports_invalid_chains_with_exit_2(
    case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text, position, fragment = INVALID[case]
    path = tmp_path / "chain.yaml"
    path.write_text(text)
    assert main(["check", str(path)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert f"{path}{position}" in captured.err
    assert fragment in captured.err
    assert "Traceback" not in captured.err


@pytest.mark.parametrize("case", sorted(INVALID))
def test_run_refuses_invalid_chains_with_exit_2(
    case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text, position, fragment = INVALID[case]
    path = tmp_path / "chain.yaml"
    path.write_text(text)
    events = tmp_path / "events.ndjson"
    events.write_text('{"type":"RUN_STARTED","threadId":"t","runId":"r"}\n')
    assert main(["run", "--config", str(path), str(events)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""  # nothing runs with an invalid chain
    assert f"{path}{position}" in captured.err
    assert fragment in captured.err


def test_check_missing_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "absent.yaml"
    assert main(["check", str(missing)]) == 2
    err = capsys.readouterr().err
    assert f"{missing}: config file not found" in err


def test_check_import_reference_needs_the_flag(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "chain.yaml"
    path.write_text("transformers:\n  - type: agui_pipes._pipeline.transformer:StreamTransformer\n")
    assert main(["check", str(path)]) == 2
    assert "--allow-imports" in capsys.readouterr().err
    assert main(["check", "--allow-imports", str(path)]) == 0
    assert "ok, 1 transformer: agui_pipes._pipeline.transformer:StreamTransformer" in (
        capsys.readouterr().out
    )


def test_check_accepts_an_empty_chain(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "chain.yaml"
    path.write_text("version: 1\ntransformers: []\n")
    assert main(["check", str(path)]) == 0
    assert "ok, 0 transformers" in capsys.readouterr().out


def test_list_shows_names_summaries_and_options(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    for spec in Registry(plugins=False).specs():
        assert f"\n{spec.name}\n" in f"\n{out}"
        assert spec.summary in out
    assert '- mode: "snapshot" | "delta" | "at" (default "snapshot")' in out
    assert "- tool: string (required)" in out


def test_list_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["list", "--json"]) == 0
    listed = {entry["name"]: entry for entry in json.loads(capsys.readouterr().out)}
    redact = {o["name"]: o for o in listed["redact"]["options"]}
    assert redact["replacement"]["default"] == "[REDACTED]"
    assert redact["patterns"]["required"] is True


def test_schema_prints_the_chain_schema(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["schema"]) == 0
    assert json.loads(capsys.readouterr().out) == chain_schema()
