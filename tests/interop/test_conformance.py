"""The AG-UI 1.0 client conformance corpus (vendored in tests/conformance/, see its README).

Every case is replayed through the full consumer pipeline (decode, chunk
expansion, consumer-profile verification, fold) and every expectation the
corpus README defines is checked: the outcome, ``errorContains``,
``messages``/``messageCount``/``state`` (subset match), ``eventTypes``/
``eventTypesAbsent``/``eventPaths``/``eventAbsentPaths`` on the delivered
events, ``runError``, and warnings (``noWarnings`` exactly; the TS client's
warning substrings where they name a path or type, since our wording differs).

The ``era-*`` cases describe talking to peers of older protocol versions.
They run through ``compat`` in the consumer pipeline, as the TS client runs
them through its compatibility boundary and version shims: the consumer gets
``Compat(direction="up", peer=<client.maxProtocolVersion>)`` (the case's
peer ceiling; none means a current peer), and the outgoing request is what
``compat.request_for`` builds for that peer from the case's ``input``, checked
against ``request`` / ``requestAbsentPaths`` (for every case that has them).
Warnings are the consumer's and the request shim's together. Every other case
also runs through ``compat`` for a current peer, which must change nothing.

Deliberate deviation, documented in the corpus README:

* ``truncated-run-reported-as-completed`` is inverted: we report truncation.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agui_pipes import Consumer, ProtocolViolation
from agui_pipes.codecs import DecodeWarning
from agui_pipes.transformers.compat import Compat, request_for

# Crosses the wire entry points: CI runs it again with AGUI_PIPES_FAST_PATH=0 (`-m wire`).
pytestmark = pytest.mark.wire

CORPUS = Path(__file__).parents[1] / "conformance" / "streams"
CASES = sorted(CORPUS.glob("*.json"))
INVERTED = {"truncated-run-reported-as-completed"}


def test_corpus_is_complete() -> None:
    manifest = (CORPUS / "MANIFEST.txt").read_text().split()
    assert sorted(manifest) == sorted(p.name for p in CASES)
    assert len(CASES) >= 56
    assert (CORPUS.parent / "LICENSE").is_file()
    assert (CORPUS.parent / "README.md").is_file()


def subset_match(expected: Any, actual: Any, where: str = "$") -> None:
    """The corpus README's rule: arrays same length element-wise, objects by named keys."""
    if isinstance(expected, list):
        assert isinstance(actual, list), f"{where}: expected an array, got {actual!r}"
        assert len(actual) == len(expected), (
            f"{where}: expected {len(expected)} items, got {len(actual)}: {actual!r}"
        )
        for i, (e, a) in enumerate(zip(expected, actual, strict=True)):
            subset_match(e, a, f"{where}[{i}]")
    elif isinstance(expected, dict):
        assert isinstance(actual, dict), f"{where}: expected an object, got {actual!r}"
        for key, value in expected.items():
            assert key in actual, f"{where}: missing key {key!r} in {actual!r}"
            subset_match(value, actual[key], f"{where}.{key}")
    else:
        assert expected == actual and type(expected) is type(actual), (
            f"{where}: expected {expected!r}, got {actual!r}"
        )


def lookup(node: Any, dotted: str) -> tuple[bool, Any]:
    for part in dotted.split("."):
        if isinstance(node, list):
            if not part.isdigit() or int(part) >= len(node):
                return False, None
            node = node[int(part)]
        elif isinstance(node, dict):
            if part not in node:
                return False, None
            node = node[part]
        else:
            return False, None
    return True, node


Replay = tuple[str, str | None, list[dict[str, Any]], Any, list[str]]


def replay(stream: list[Any], compat: Compat | bool | None = None) -> Replay:
    consumer = Consumer(compat=compat)
    delivered: list[dict[str, Any]] = []
    try:
        for item in stream:
            for event in consumer.push(item):
                delivered.append(event.model_dump(by_alias=True, mode="json"))
        result = consumer.finish()
    except ProtocolViolation as error:
        return "failed", str(error), delivered, None, [str(w) for w in consumer.warnings]
    return "completed", None, delivered, result, [str(w) for w in result.warnings]


def peer_of(case: dict[str, Any]) -> str | None:
    """The case's peer ceiling (the TS client's ``maxProtocolVersion``); None: current."""
    version = case.get("client", {}).get("maxProtocolVersion")
    assert version is None or isinstance(version, str)
    return version


def request_of(case: dict[str, Any], warnings: list[DecodeWarning]) -> dict[str, Any]:
    """The request the client sends for this case: its ``input`` for the case's peer."""
    started = next(
        (
            item
            for item in case["stream"]
            if isinstance(item, dict) and item.get("type") == "RUN_STARTED"
        ),
        {"threadId": "t", "runId": "r"},
    )
    run_input = {
        "threadId": started.get("threadId", "t"),
        "runId": started.get("runId", "r"),
        "messages": case.get("input", {}).get("messages", []),
    }
    return request_for(peer_of(case), run_input, warnings=warnings)


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_case(path: Path) -> None:
    case = json.loads(path.read_text())
    assert case["name"] == path.stem
    era = case["name"].startswith("era-")
    check_case(case, Compat(peer=peer_of(case)) if era else None)


# The reference client's boundary translates these whatever the producer's version:
# with no configuration at all, the consumer must agree with the case.
ALWAYS_ON = ["era-0-0-45-thinking-translated", "era-0-0-47-upgrades-binary-content"]


@pytest.mark.parametrize("name", ALWAYS_ON)
def test_the_always_on_boundary_needs_no_configuration(name: str) -> None:
    check_case(json.loads((CORPUS / f"{name}.json").read_text()), None)


def check_case(case: dict[str, Any], compat: Compat | None) -> None:
    """Replay one case through ``Consumer(compat=compat)`` and check every expectation."""
    expect = case["expect"]
    request_warnings: list[DecodeWarning] = []
    request = request_of(case, request_warnings)
    outcome, error, delivered, result, warnings = replay(case["stream"], compat)
    warnings = [str(w) for w in request_warnings] + warnings

    expected_outcome = expect["outcome"]
    if case["name"] in INVERTED:
        expected_outcome = "failed"
    assert outcome == expected_outcome, f"{case['description']}\nerror: {error}"
    if case["name"] in INVERTED:
        assert error is not None
        assert "truncated" in error
    if expect.get("errorContains"):
        assert error is not None
        assert expect["errorContains"] in error

    if "request" in expect:
        subset_match(expect["request"], request, "request")
    for dotted in expect.get("requestAbsentPaths", ()):
        assert not lookup(request, dotted)[0], f"request {dotted} should be absent"

    if "eventTypes" in expect:
        assert [e["type"] for e in delivered] == expect["eventTypes"]
    for absent in expect.get("eventTypesAbsent", ()):
        assert absent not in {e["type"] for e in delivered}
    for dotted, value in expect.get("eventPaths", {}).items():
        found, actual = lookup(delivered, dotted)
        assert found, f"no delivered value at {dotted}"
        subset_match(value, actual, dotted)
    for dotted in expect.get("eventAbsentPaths", ()):
        assert not lookup(delivered, dotted)[0], f"{dotted} should be absent"

    if outcome == "completed":
        assert result is not None
        if "messageCount" in expect:
            assert len(result.messages) == expect["messageCount"], result.messages
        if "messages" in expect:
            subset_match(expect["messages"], result.messages, "messages")
        if "state" in expect:
            subset_match(expect["state"], result.state, "state")
        if "runError" in expect:
            assert result.run_error is not None
            if isinstance(expect["runError"], str):
                assert expect["runError"] in result.run_error["message"]
        else:
            assert result.run_error is None

    if expect.get("noWarnings"):
        assert warnings == []
    for fragment in expect.get("warnings", ()):
        assert any(fragment in w for w in warnings), (fragment, warnings)


NON_ERA = [p for p in CASES if not p.stem.startswith("era-")]


@pytest.mark.parametrize("path", NON_ERA, ids=[p.stem for p in NON_ERA])
def test_compat_for_a_current_peer_changes_nothing(path: Path) -> None:
    """Compat up for a 1.0 producer is the identity on every 1.0 case (valid or not),
    and so is the strict view (``compat=False``): a 1.0 stream never engages the boundary."""
    stream = json.loads(path.read_text())["stream"]
    assert replay(stream, Compat()) == replay(stream) == replay(stream, False)
