"""Deterministic generator of realistic AG-UI streams for the benchmarks.

    python benchmarks/streams.py --events 150000 --out benchmarks/out/stream-150k.ndjson

A stream is a sequence of runs shaped like real agent traffic: reasoning in
many small deltas inside a step, a long assistant answer streamed token by
token, parallel tool calls (one of them an ``internal_*`` tool a gateway would
hide, one an ``update_items`` tool whose result is a JSON Patch), state
deltas, a subagent with a nested subagent, and some chunk-form messages. The
same ``(events, seed)`` always gives the same bytes, so figures from two
machines or two commits compare like for like.

Events are produced as wire dicts and written line by line: generating the
1.5M stream holds one run in memory, not the stream.
"""

from __future__ import annotations

import argparse
import json
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

__all__ = ["STREAMS", "generate", "generate_state_heavy", "write_ndjson"]

_WORDS = [
    *[
        "the",
        "plan",
        "covers",
        "scope",
        "risks",
        "budget",
        "timeline",
        "owner",
        "review",
        "draft",
        "section",
        "table",
    ],
    *[
        "figure",
        "update",
        "item",
        "status",
        "blocked",
        "done",
        "next",
        "week",
        "quarter",
        "revenue",
        "margin",
    ],
    *["growth", "customer", "churn", "cohort", "analysis", "model", "forecast"],
    *("✓", "naïve", "café", "東京", "🚀"),
]


def _tokens(rng: random.Random, n: int) -> Iterator[str]:
    for _ in range(n):
        yield rng.choice(_WORDS) + " "


def _run(rng: random.Random, r: int) -> Iterator[dict[str, Any]]:
    thread, run_id = "thread-bench", f"run-{r}"
    yield {"type": "RUN_STARTED", "threadId": thread, "runId": run_id}

    # reasoning inside a step
    yield {"type": "STEP_STARTED", "stepName": "plan"}
    span, rmsg = f"{run_id}-rs", f"{run_id}-rm"
    yield {"type": "REASONING_START", "messageId": span}
    yield {"type": "REASONING_MESSAGE_START", "messageId": rmsg, "role": "reasoning"}
    for tok in _tokens(rng, rng.randint(20, 60)):
        yield {"type": "REASONING_MESSAGE_CONTENT", "messageId": rmsg, "delta": tok}
    yield {"type": "REASONING_MESSAGE_END", "messageId": rmsg}
    yield {"type": "REASONING_END", "messageId": span}
    yield {"type": "STEP_FINISHED", "stepName": "plan"}

    # the assistant's answer, token by token
    msg = f"{run_id}-m1"
    yield {"type": "TEXT_MESSAGE_START", "messageId": msg, "role": "assistant"}
    for tok in _tokens(rng, rng.randint(80, 400)):
        yield {"type": "TEXT_MESSAGE_CONTENT", "messageId": msg, "delta": tok}
    yield {"type": "TEXT_MESSAGE_END", "messageId": msg}

    # parallel tool calls attached to that message
    calls = [("search", f"{run_id}-c1"), ("internal_debug", f"{run_id}-c2")]
    if rng.random() < 0.7:
        calls.append(("update_items", f"{run_id}-c3"))
    for name, call in calls:
        yield {
            "type": "TOOL_CALL_START",
            "toolCallId": call,
            "toolCallName": name,
            "parentMessageId": msg,
        }
    for _name, call in calls:
        yield {"type": "TOOL_CALL_ARGS", "toolCallId": call, "delta": '{"query": "'}
        for tok in _tokens(rng, rng.randint(5, 30)):
            yield {"type": "TOOL_CALL_ARGS", "toolCallId": call, "delta": tok}
        yield {"type": "TOOL_CALL_ARGS", "toolCallId": call, "delta": '"}'}
    for _name, call in calls:
        yield {"type": "TOOL_CALL_END", "toolCallId": call}
    for name, call in calls:
        if name == "update_items":
            content = json.dumps(
                [{"op": "add", "path": "/items/-", "value": {"run": r, "n": rng.randint(0, 99)}}]
            )
        else:
            content = json.dumps({"hits": [rng.choice(_WORDS) for _ in range(5)]})
        yield {
            "type": "TOOL_CALL_RESULT",
            "messageId": f"{call}-result",
            "toolCallId": call,
            "content": content,
            "role": "tool",
        }

    # shared state
    if r == 0:
        yield {"type": "STATE_SNAPSHOT", "snapshot": {"items": [], "status": "new", "runs": 0}}
    yield {
        "type": "STATE_DELTA",
        "delta": [
            {"op": "replace", "path": "/status", "value": rng.choice(["draft", "review"])},
            {"op": "replace", "path": "/runs", "value": r + 1},
        ],
    }

    # a subagent, with a nested subagent
    sub, nested = f"{run_id}-sub-1", f"{run_id}-sub-2"
    yield {
        "type": "SUBAGENT_STARTED",
        "subagentRunId": sub,
        "name": "researcher",
        "parentToolCallId": calls[0][1],
    }
    smsg = f"{run_id}-m2"
    yield {"type": "TEXT_MESSAGE_START", "messageId": smsg, "subagentRunId": sub}
    for tok in _tokens(rng, rng.randint(20, 80)):
        yield {
            "type": "TEXT_MESSAGE_CONTENT",
            "messageId": smsg,
            "delta": tok,
            "subagentRunId": sub,
        }
    yield {"type": "TEXT_MESSAGE_END", "messageId": smsg, "subagentRunId": sub}
    yield {
        "type": "SUBAGENT_STARTED",
        "subagentRunId": nested,
        "name": "estimator",
        "parentSubagentRunId": sub,
    }
    nmsg = f"{run_id}-m3"
    yield {"type": "TEXT_MESSAGE_START", "messageId": nmsg, "subagentRunId": nested}
    for tok in _tokens(rng, rng.randint(10, 40)):
        yield {
            "type": "TEXT_MESSAGE_CONTENT",
            "messageId": nmsg,
            "delta": tok,
            "subagentRunId": nested,
        }
    yield {"type": "TEXT_MESSAGE_END", "messageId": nmsg, "subagentRunId": nested}
    yield {"type": "SUBAGENT_FINISHED", "subagentRunId": nested}
    yield {"type": "SUBAGENT_FINISHED", "subagentRunId": sub, "result": {"tasks": 2}}

    # a closing remark in chunk form
    cmsg = f"{run_id}-m4"
    first = True
    for tok in _tokens(rng, rng.randint(10, 40)):
        event: dict[str, Any] = {"type": "TEXT_MESSAGE_CHUNK", "delta": tok}
        if first:
            event["messageId"] = cmsg
            event["role"] = "assistant"
            first = False
        yield event

    yield {"type": "RUN_FINISHED", "threadId": thread, "runId": run_id}


def generate(events: int, seed: int = 1) -> Iterator[dict[str, Any]]:
    """Whole runs until at least ``events`` events were produced (wire dicts)."""
    rng = random.Random(seed)
    produced = 0
    r = 0
    while produced < events:
        for event in _run(rng, r):
            produced += 1
            yield event
        r += 1


def generate_state_heavy(
    events: int, seed: int = 1, share: float = 0.05
) -> Iterator[dict[str, Any]]:
    """The realistic stream with shared state doing real work: ``share`` of events are deltas.

    Agents that keep a UI in sync (a progress bar, a growing result list)
    publish state while they talk, so deltas arrive *between* text deltas,
    not once per run. Each run opens with a full ``STATE_SNAPSHOT`` (items
    included, the biggest events of the stream); then, every ``1/share``
    events, a ``STATE_DELTA`` whose ``delta`` is a list of JSON Patch
    operations (the shape that misses the codecs' scalar fast paths) that
    apply to that snapshot. ``STATE_SNAPSHOT`` and ``STATE_DELTA`` together
    are ``share`` of the stream plus one snapshot per run.
    """
    if not 0 < share < 1:
        raise ValueError(f"share must be between 0 and 1 (exclusive), got {share}")
    rng = random.Random(seed)
    every = max(1, round((1 - share) / share))
    produced = 0
    r = 0
    while produced < events:
        since = 0
        added = 0
        for event in _run(rng, r):
            if event["type"] == "STATE_SNAPSHOT":
                continue  # the run's own snapshot, below, replaces it
            produced += 1
            yield event
            if event["type"] == "RUN_STARTED":
                produced += 1
                yield {
                    "type": "STATE_SNAPSHOT",
                    "snapshot": {
                        "items": [
                            {"run": r, "n": n, "label": rng.choice(_WORDS)} for n in range(8)
                        ],
                        "status": "new",
                        "runs": r,
                        "progress": 0,
                    },
                }
                continue
            since += 1
            # not inside a run of chunks (a chunk after another event opens a new item)
            if since >= every and event["type"] not in ("RUN_FINISHED", "TEXT_MESSAGE_CHUNK"):
                since = 0
                added += 1
                produced += 1
                yield {
                    "type": "STATE_DELTA",
                    "delta": [
                        {"op": "replace", "path": "/progress", "value": added},
                        {
                            "op": "add",
                            "path": "/items/-",
                            "value": {"run": r, "n": 8 + added, "label": rng.choice(_WORDS)},
                        },
                    ],
                }
        r += 1


#: The selectable streams: name -> generator of wire dicts (``events``, ``seed``).
STREAMS = {"realistic": generate, "state-heavy": generate_state_heavy}


def write_ndjson(path: Path, events: int, seed: int = 1, stream: str = "realistic") -> int:
    """Write the stream as NDJSON; returns the number of events written."""
    if stream not in STREAMS:
        raise ValueError(f"unknown stream {stream!r}; choose one of {', '.join(STREAMS)}")
    path.parent.mkdir(parents=True, exist_ok=True)
    count = 0
    with path.open("w", encoding="utf-8") as out:
        for event in STREAMS[stream](events, seed):
            out.write(json.dumps(event, ensure_ascii=False, separators=(",", ":")))
            out.write("\n")
            count += 1
    return count


def main() -> None:
    parser = argparse.ArgumentParser(description="Write a deterministic benchmark stream.")
    parser.add_argument("--events", type=int, default=150_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--stream", choices=sorted(STREAMS), default="realistic")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    count = write_ndjson(args.out, args.events, args.seed, args.stream)
    print(f"wrote {count} events to {args.out}")


if __name__ == "__main__":
    main()
