"""Per-event overhead of the run driver: agent emit -> transformers -> verifier -> consumer.

    python benchmarks/bench_driver.py [--events 100000] [--chunk 32] [--repeat 5]
        [--backend asyncio|trio] [--json out.json]

An agent streams one long message (``message.delta(...)`` per event),
yielding to the scheduler every ``--chunk`` events the way a model stream
delivers tokens in bursts, and the consumer drains ``async with run(...) as
events``. Reported, as the best of several repetitions in µs per emitted
event:

* ``construct``   — the same agent loop building the TEXT_MESSAGE_CONTENT
  models and yielding, with no driver (what any producer pays: pydantic
  validation);
* ``driver``      — the whole run without the verifier, per event;
* ``overhead``    — ``driver - construct``: what the driver itself adds
  (the handle, the emit path, the memory stream, the consumer's iteration);
* ``verified`` / ``verify cost`` — the same with the producer verifier on;
* ``raw emit``    — ``ctx.emit(prebuilt_event)``: the pipeline with no model
  construction at all (no verifier).

Times are CPU time of this process (``time.process_time``), so other load on
a shared machine inflates them less than wall-clock time would; the agent and
the consumer share one thread, so CPU time is the whole cost. Timings are
reported, never asserted.
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from collections.abc import Callable, Coroutine
from typing import Any

import anyio
from ag_ui.core import TextMessageContentEvent
from anyio.lowlevel import checkpoint

from agui_pipes import RunContext, RunOutcome, run

AgentFn = Callable[[RunContext[Any]], Coroutine[Any, Any, RunOutcome]]


def streaming_agent(n: int, chunk: int) -> AgentFn:
    async def agent(ctx: RunContext[Any]) -> RunOutcome:
        with ctx.assistant_message() as message:
            delta = message.delta
            for i in range(n):
                delta("x")
                if i % chunk == 0:
                    await checkpoint()
        return RunOutcome.success()

    return agent


def raw_agent(n: int, chunk: int) -> AgentFn:
    async def agent(ctx: RunContext[Any]) -> RunOutcome:
        with ctx.assistant_message() as message:
            event = TextMessageContentEvent(message_id=message.id, delta="x")
            emit = ctx.emit
            for i in range(n):
                emit(event)
                if i % chunk == 0:
                    await checkpoint()
        return RunOutcome.success()

    return agent


async def drain(agent: Any, verify: bool) -> float:
    start = time.process_time()
    count = 0
    async with run(agent, {"threadId": "t", "runId": "r"}, verify=verify) as events:
        async for _ in events:
            count += 1
    return time.process_time() - start


async def time_construct(n: int, chunk: int) -> float:
    start = time.process_time()
    for i in range(n):
        TextMessageContentEvent(message_id="r-msg-1", delta="x")
        if i % chunk == 0:
            await checkpoint()
    return time.process_time() - start


async def measure(n: int, chunk: int, repeat: int) -> dict[str, float]:
    samples: dict[str, list[float]] = {
        "construct": [], "driver": [], "verified": [], "raw emit": []
    }
    for _ in range(repeat):
        samples["construct"].append(await time_construct(n, chunk))
        samples["driver"].append(await drain(streaming_agent(n, chunk), verify=False))
        samples["verified"].append(await drain(streaming_agent(n, chunk), verify=True))
        samples["raw emit"].append(await drain(raw_agent(n, chunk), verify=False))
    us = {name: min(values) / n * 1e6 for name, values in samples.items()}
    us["overhead"] = us["driver"] - us["construct"]
    us["verify cost"] = us["verified"] - us["driver"]
    return us


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--chunk", type=int, default=32, help="events between yields")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--backend", choices=["asyncio", "trio"], default="asyncio")
    parser.add_argument("--json", help="also write the figures to this file")
    args = parser.parse_args()

    figures = anyio.run(measure, args.events, args.chunk, args.repeat, backend=args.backend)
    print(f"run driver, {args.events} events (yield every {args.chunk}) x {args.repeat} "
          f"runs, {args.backend}, "
          f"Python {platform.python_version()}")
    for name in ("construct", "driver", "overhead", "verified", "verify cost", "raw emit"):
        print(f"  {name:<12} {figures[name]:7.3f} µs/event")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as out:
            json.dump(
                {"backend": args.backend, "events": args.events, "chunk": args.chunk, **figures},
                out,
                indent=2,
            )


if __name__ == "__main__":
    main()
