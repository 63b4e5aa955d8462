"""Per-event overhead of the run driver: agent emit -> transformers -> verifier -> consumer.

    python benchmarks/bench_driver.py [--events 100000] [--chunk 32] [--repeat 9]
        [--backend asyncio|trio] [--json out.json]
    python benchmarks/bench_driver.py --instructions [--events 20000]

An agent streams one long message (``message.delta("x")`` per event),
yielding to the scheduler every ``--chunk`` events the way a model stream
delivers tokens in bursts, and the consumer drains ``async with run(...) as
events``. Every variant below builds or carries the same
TEXT_MESSAGE_CONTENT event and hands it to a consumer loop:

* ``bare``     — an async generator building ``TextMessageContentEvent(...)``
  and yielding it, drained by ``async for`` (what any producer pays with no
  driver: pydantic validation and an async iteration);
* ``delta``    — the driver, ``message.delta("x")``, verifier off;
* ``delta+v``  — the same with the producer verifier on (``run()``'s default);
* ``emit``     — ``ctx.emit(prebuilt_event)``, verifier off: the driver's
  path with no model built at all.

The variants run interleaved — one of each per round, in a rotating order —
and each is reported as the median of its rounds in µs of CPU time per event
(``time.process_time``: the agent and the consumer share one thread, so CPU
time is the whole cost, and other load on a shared machine inflates it less
than wall-clock time). The ``over bare`` column is the median of the per-round
differences with the ``bare`` sample of the same round, which cancels most of
the machine's drift. Timings are reported, never asserted.

``--instructions`` runs each variant alone under ``valgrind --tool=callgrind``
at two stream lengths and reports instructions per event (the difference
divided by the extra events, so start-up and imports cancel): a figure that
does not depend on the load of the machine.
"""

from __future__ import annotations

import argparse
import json
import platform
import re
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from typing import Any

import anyio
from ag_ui.core import TextMessageContentEvent
from anyio.lowlevel import checkpoint

from agui_pipes import RunContext, RunOutcome, run

AgentFn = Callable[[RunContext[Any]], Coroutine[Any, Any, RunOutcome]]
Variant = Callable[[int, int], Awaitable[float]]

_INPUT = {"threadId": "t", "runId": "r"}


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


async def _bare_stream(n: int, chunk: int) -> AsyncIterator[TextMessageContentEvent]:
    for i in range(n):
        yield TextMessageContentEvent(message_id="r-msg-1", delta="x")
        if i % chunk == 0:
            await checkpoint()


async def time_bare(n: int, chunk: int) -> float:
    start = time.process_time()
    count = 0
    async for _ in _bare_stream(n, chunk):
        count += 1
    return time.process_time() - start


async def _drain(agent: AgentFn, verify: bool) -> float:
    start = time.process_time()
    count = 0
    async with run(agent, _INPUT, verify=verify) as events:
        async for _ in events:
            count += 1
    return time.process_time() - start


async def time_delta(n: int, chunk: int) -> float:
    return await _drain(streaming_agent(n, chunk), verify=False)


async def time_delta_verified(n: int, chunk: int) -> float:
    return await _drain(streaming_agent(n, chunk), verify=True)


async def time_emit(n: int, chunk: int) -> float:
    return await _drain(raw_agent(n, chunk), verify=False)


VARIANTS: dict[str, Variant] = {
    "bare": time_bare,
    "delta": time_delta,
    "delta+v": time_delta_verified,
    "emit": time_emit,
}


async def measure(n: int, chunk: int, repeat: int) -> dict[str, dict[str, float]]:
    """Median µs/event per variant, and the median per-round difference with ``bare``."""
    names = list(VARIANTS)
    samples: dict[str, list[float]] = {name: [] for name in names}
    for variant in VARIANTS.values():  # warm-up: imports, caches, first allocations
        await variant(min(n, 2_000), chunk)
    for round_no in range(repeat):
        shift = round_no % len(names)
        for name in names[shift:] + names[:shift]:
            samples[name].append(await VARIANTS[name](n, chunk) / n * 1e6)
    bare = samples["bare"]
    return {
        name: {
            "us": statistics.median(values),
            "over_bare": statistics.median(v - b for v, b in zip(values, bare, strict=True)),
        }
        for name, values in samples.items()
    }


def _instructions(name: str, n: int, chunk: int, backend: str) -> int:
    """Instructions callgrind counts for one process running variant ``name`` over ``n``."""
    command = [
        "valgrind",
        "--tool=callgrind",
        "--callgrind-out-file=/dev/null",
        sys.executable,
        __file__,
        "--only",
        name,
        "--events",
        str(n),
        "--chunk",
        str(chunk),
        "--backend",
        backend,
    ]
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    found = re.search(r"Collected : (\d+)", done.stderr)
    if found is None:
        raise RuntimeError(f"no instruction count in callgrind's output:\n{done.stderr}")
    return int(found.group(1))


def count_instructions(n: int, chunk: int, backend: str, names: list[str]) -> dict[str, float]:
    """Instructions per event per variant: (Ir(2n) - Ir(n)) / n, start-up cancelled out."""
    if shutil.which("valgrind") is None:
        raise SystemExit("--instructions needs valgrind on PATH")
    return {
        name: (_instructions(name, 2 * n, chunk, backend) - _instructions(name, n, chunk, backend))
        / n
        for name in names
    }


async def _run_only(name: str, n: int, chunk: int) -> None:
    await VARIANTS[name](n, chunk)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--chunk", type=int, default=32, help="events between yields")
    parser.add_argument("--repeat", type=int, default=9, help="interleaved rounds")
    parser.add_argument("--backend", choices=["asyncio", "trio"], default="asyncio")
    parser.add_argument("--json", help="also write the figures to this file")
    parser.add_argument(
        "--instructions",
        action="store_true",
        help="count instructions per event under valgrind instead of timing",
    )
    parser.add_argument(
        "--variants",
        default=",".join(VARIANTS),
        help=f"with --instructions: which to count (comma-separated; default {','.join(VARIANTS)})",
    )
    parser.add_argument("--only", choices=list(VARIANTS), help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.only:  # one variant, once: what --instructions runs under valgrind
        anyio.run(_run_only, args.only, args.events, args.chunk, backend=args.backend)
        return

    header = (
        f"run driver, {args.events} events (yield every {args.chunk}), {args.backend}, "
        f"Python {platform.python_version()}"
    )
    result: dict[str, Any]
    if args.instructions:
        names = [name.strip() for name in args.variants.split(",") if name.strip()]
        unknown = sorted(set(names) - set(VARIANTS))
        if unknown:
            parser.error(
                f"unknown variant(s) {', '.join(unknown)}; choose from {', '.join(VARIANTS)}"
            )
        counts = count_instructions(args.events, args.chunk, args.backend, names)
        print(
            f"{header}; instructions per event (callgrind, {args.events} vs "
            f"{2 * args.events} events)"
        )
        bare = counts.get("bare")
        columns = "" if bare is None else f" {'over bare':>10} {'ratio':>6}"
        print(f"  {'variant':<9} {'Ir/event':>9}{columns}")
        for name, value in counts.items():
            versus = "" if bare is None else f" {value - bare:+10.0f} {value / bare:6.2f}"
            print(f"  {name:<9} {value:9.0f}{versus}")
        result = {"instructions_per_event": counts}
    else:
        figures = anyio.run(measure, args.events, args.chunk, args.repeat, backend=args.backend)
        print(f"{header}; {args.repeat} interleaved rounds, median CPU µs per event")
        print(f"  {'variant':<9} {'µs/event':>9} {'over bare':>10}")
        for name, value in figures.items():
            print(f"  {name:<9} {value['us']:9.3f} {value['over_bare']:+10.3f}")
        result = {"figures": figures}
    if args.json:
        with open(args.json, "w", encoding="utf-8") as out:
            json.dump(
                {"backend": args.backend, "events": args.events, "chunk": args.chunk, **result},
                out,
                indent=2,
            )


if __name__ == "__main__":
    main()
