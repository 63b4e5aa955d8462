"""Differential test: our consumer pipeline against the official TypeScript client.

Thousands of generated streams (valid runs and mutated ones: dropped,
duplicated, swapped events, wrong owners, conflicting chunks, unknown types,
properties and union members, malformed fields, legacy nulls, truncation) go
through ``agui_pipes.Consumer`` and, batched, through ``@ag-ui/client``
1.0.0 (tests/harness). For every stream:

* the verdicts agree — both accept, or both reject — except that a stream we
  reject *only* as truncated is one the reference accepts (it cannot detect
  truncation; PROTOCOL.md §4), and
* on accepted streams the final messages and state are equal (JSON equality)
  and the application receives the same sequence of event types;
* on rejected streams the reasons agree: our message contains the reference
  client's (verification and chunk errors), or — for a malformed field, which
  the reference reports as validator issues — our ``DecodeError.path`` is the
  path of one of its issues.

Each batch is built from a hypothesis-drawn seed (a ``random.Random`` drives
the stream generator, tests/_wire_streams.py), so a failure report names the
seed and the offending stream in full.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from agui_pipes import Consumer, DecodeError, ProtocolViolation, VerificationError
from agui_pipes.verify import Rule
from tests._wire_streams import mutate, valid_stream

# Crosses the wire entry points: CI runs it again with AGUI_PIPES_FAST_PATH=0 (`-m wire`).
pytestmark = pytest.mark.wire

BATCHES = 6
PER_BATCH = 400  # 2,400 streams in all


def ours(stream: list[dict[str, Any]]) -> dict[str, Any]:
    consumer = Consumer(allow_truncated=True)
    delivered: list[str] = []
    try:
        for item in stream:
            delivered.extend(event.type.value for event in consumer.push(item))
        truncated = consumer.verifier.run_open
        result = consumer.finish()
    except ProtocolViolation as error:
        return {"outcome": "failed", "error": str(error), "exception": error}
    return {
        "outcome": "completed",
        "truncated": truncated,
        "messages": result.messages,
        "state": result.state,
        "delivered": delivered,
    }


def _empty_stream(mine: dict[str, Any]) -> bool:
    """Ours rejected the stream because it ended before its first event."""
    error = mine.get("exception")
    return (
        isinstance(error, VerificationError)
        and error.rule is Rule.FIRST_EVENT
        and error.event is None
    )


def _json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def build_batch(rng: random.Random) -> list[tuple[list[dict[str, Any]], list[str]]]:
    batch: list[tuple[list[dict[str, Any]], list[str]]] = []
    for _ in range(PER_BATCH):
        stream = valid_stream(rng)
        if rng.random() < 0.4:
            batch.append((stream, []))
        else:
            batch.append(mutate(rng, stream))
    return batch


def compare(stream: list[dict[str, Any]], theirs: dict[str, Any]) -> tuple[str, str | None]:
    """('agree-accept' | 'agree-reject' | 'truncated', None) or ('disagree', reason)."""
    mine = ours(stream)
    if _empty_stream(mine) and theirs["outcome"] == "completed" and not theirs["events"]:
        return "empty", None  # the second deliberate difference (docs/consumer.md)
    if theirs["outcome"] == "failed":
        if mine["outcome"] != "failed":
            return "disagree", f"reference rejected ({theirs['error']}), we accepted"
        reason = _same_reason(mine["exception"], theirs["error"])
        return ("agree-reject", None) if reason is None else ("disagree", reason)
    if mine["outcome"] == "failed":
        return "disagree", f"we rejected ({mine['error']}), reference accepted"
    if _json(mine["messages"]) != _json(theirs["messages"]):
        return "disagree", (
            f"messages differ:\n ours:   {_json(mine['messages'])}\n theirs: "
            f"{_json(theirs['messages'])}"
        )
    if mine["delivered"] != [e["type"] for e in theirs["events"]]:
        return "disagree", (
            f"delivered events differ:\n ours:   {mine['delivered']}\n theirs: "
            f"{[e['type'] for e in theirs['events']]}"
        )
    if _json(mine["state"]) != _json(theirs["state"]):
        return "disagree", (
            f"state differs:\n ours:   {_json(mine['state'])}\n theirs: {_json(theirs['state'])}"
        )
    return ("truncated" if mine["truncated"] else "agree-accept"), None


def _same_reason(error: ProtocolViolation, theirs: str) -> str | None:
    if theirs.startswith("["):  # the reference's validator issues (a malformed field)
        paths = [".".join(str(p) for p in issue["path"]) for issue in json.loads(theirs)]
        if isinstance(error, DecodeError) and error.path in paths:
            return None
        return f"reference rejected a malformed field at {paths}, we said: {error}"
    if theirs in str(error):
        return None
    return f"reasons differ:\n ours:   {error}\n theirs: {theirs}"


TOTALS: Counter[str] = Counter()


@pytest.mark.node
@settings(
    max_examples=BATCHES,
    deadline=None,
    derandomize=True,
    database=None,
    phases=[Phase.generate],
    suppress_health_check=list(HealthCheck),
)
@given(seed=st.integers(min_value=0, max_value=2**32 - 1))
def test_verdicts_messages_and_state_agree(
    seed: int, ts_oracle: Callable[..., list[dict[str, Any]]]
) -> None:
    batch = build_batch(random.Random(seed))
    results = ts_oracle([stream for stream, _ in batch])
    problems: list[str] = []
    for (stream, mutations), theirs in zip(batch, results, strict=True):
        verdict, reason = compare(stream, dict(theirs))
        TOTALS[verdict] += 1
        if verdict == "disagree":
            problems.append(
                f"seed={seed} mutations={mutations}: {reason}\n stream: {_json(stream)}"
            )
    assert not problems, (
        f"{len(problems)} of {len(batch)} streams disagree with @ag-ui/client; first:\n"
        + "\n\n".join(problems[:3])
    )


@pytest.mark.node
def test_enough_streams_were_compared_and_both_verdicts_occur() -> None:
    # Runs after the property above (same module, definition order).
    if not TOTALS:
        pytest.skip("the differential property did not run")
    assert sum(TOTALS.values()) >= 2000
    assert TOTALS["disagree"] == 0
    assert TOTALS["agree-accept"] >= 300
    assert TOTALS["agree-reject"] >= 300
    assert TOTALS["truncated"] >= 20


@pytest.mark.node
def test_an_empty_stream_is_the_other_tolerated_difference(
    ts_oracle: Callable[..., list[dict[str, Any]]],
) -> None:
    # The reference completes an empty stream with nothing in it; we reject it
    # (there is no run, so no outcome to report).
    (theirs,) = ts_oracle([[]])
    assert theirs["outcome"] == "completed"
    assert compare([], dict(theirs)) == ("empty", None)
    assert ours([])["outcome"] == "failed"


def test_truncation_is_a_tolerated_difference() -> None:
    stream = valid_stream(random.Random(7))
    cut = stream[:-1]
    with pytest.raises(VerificationError) as info:
        consumer = Consumer()
        consumer.push_many(cut)
        consumer.finish()
    assert info.value.rule is Rule.TRUNCATED
    assert ours(cut)["outcome"] == "completed"


# -- the same comparison over agui_pipes.testing.strategies streams ---------------
# The shared strategies (written independently of tests/_wire_streams.py) give a
# second, differently-shaped population: valid streams with every knob on, and a
# wire-level mutation of each.

STRATEGY_BATCHES = 12
STRATEGY_PER_BATCH = 8


def _strategy_streams() -> st.SearchStrategy[list[list[Any]]]:
    from agui_pipes.testing.strategies import streams

    return st.lists(
        streams(max_runs=2, reopen=True, leading_run_error=True, late_run_error=True),
        min_size=STRATEGY_PER_BATCH,
        max_size=STRATEGY_PER_BATCH,
    )


@pytest.mark.node
@settings(
    max_examples=STRATEGY_BATCHES,
    deadline=None,
    derandomize=True,
    database=None,
    phases=[Phase.generate],
    suppress_health_check=list(HealthCheck),
)
@given(batch=_strategy_streams(), seed=st.integers(min_value=0, max_value=2**32 - 1))
def test_shared_strategy_streams_agree(
    batch: list[list[Any]], seed: int, ts_oracle: Callable[..., list[dict[str, Any]]]
) -> None:
    rng = random.Random(seed)
    wire = [[e.model_dump(by_alias=True, mode="json") for e in events] for events in batch]
    cases = [(stream, []) for stream in wire] + [mutate(rng, stream) for stream in wire]
    results = ts_oracle([stream for stream, _ in cases])
    problems = []
    for (stream, mutations), theirs in zip(cases, results, strict=True):
        verdict, reason = compare(stream, dict(theirs))
        TOTALS[verdict] += 1
        if not mutations:
            # Every valid strategy stream is accepted by both sides.
            assert verdict == "agree-accept", f"{reason}\n stream: {_json(stream)}"
        if verdict == "disagree":
            problems.append(
                f"seed={seed} mutations={mutations}: {reason}\n stream: {_json(stream)}"
            )
    assert not problems, "\n\n".join(problems[:3])
