"""The interrupt contract's cost per run POST: the thread check, p50 / p99.

    python benchmarks/bench_interrupts.py [--requests 300] [--runs 20] [--store sqlite]

A thread of ``--runs`` ended runs (each a few text events) whose last run ended
with N pending interrupts (N = 1, 10, 100) is stored in a real event log; then
the check a server makes when it claims a run POST (``check_interrupts``: the
thread's records, the last run's terminal event, a ``ThreadVerifier``) runs
``--requests`` times for each of two requests — one answering every interrupt
(admitted; with ``resume`` the last 20 runs' terminals are read) and one with
no answer (refused ``interrupt_pending``, one terminal read; under
``interrupts="cancel"`` admitted with every interrupt answered ``cancelled``) —
and the time per check is reported (median and 99th percentile, microseconds).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from typing import Any

import anyio
from ag_ui.core import (
    Interrupt,
    ResumeEntry,
    RunAgentInput,
    RunFinishedEvent,
    RunFinishedInterruptOutcome,
    RunStartedEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
)

from agui_pipes.codecs import encode_json
from agui_pipes.server._http import BadRequest
from agui_pipes.server._interrupt_gate import check_interrupts
from agui_pipes.store import EventLog, RunStatus, open_store
from agui_pipes.verify import NewInput


async def _thread(store: EventLog, thread: str, runs: int, pending: int) -> list[str]:
    ids: list[str] = []
    for n in range(runs):
        run_id = f"{thread}-r{n}"
        events: list[Any] = [
            RunStartedEvent(thread_id=thread, run_id=run_id),
            TextMessageStartEvent(message_id=f"{run_id}-m", role="assistant"),
            TextMessageContentEvent(message_id=f"{run_id}-m", delta="hello"),
            TextMessageEndEvent(message_id=f"{run_id}-m"),
        ]
        last = n == runs - 1
        interrupts = [Interrupt(id=f"{run_id}-i{k}", reason="approval") for k in range(pending)]
        if last:
            ids = [i.id for i in interrupts]
        events.append(
            RunFinishedEvent(
                thread_id=thread,
                run_id=run_id,
                outcome=RunFinishedInterruptOutcome(type="interrupt", interrupts=interrupts)
                if last
                else None,
            )
        )
        await store.append(thread, run_id, [encode_json(e) for e in events])
        await store.end_run(run_id, RunStatus.FINISHED)
    return ids


def _input(thread: str, answers: list[str]) -> RunAgentInput:
    return RunAgentInput(
        thread_id=thread,
        run_id=f"{thread}-next",
        messages=[],
        state={},
        tools=[],
        context=[],
        forwarded_props={},
        resume=[ResumeEntry(interrupt_id=i, status="cancelled") for i in answers] or None,
    )


async def _time(
    store: EventLog, run_input: RunAgentInput, requests: int, new_input: NewInput = "refuse"
) -> list[float]:
    times = []
    for _ in range(requests):
        started = time.perf_counter()
        try:
            await check_interrupts(store, run_input, "default", new_input=new_input)
        except BadRequest:
            pass
        times.append((time.perf_counter() - started) * 1e6)
    return times


def _p99(values: list[float]) -> float:
    return sorted(values)[max(0, int(len(values) * 0.99) - 1)]


async def main(requests: int, runs: int, url: str) -> None:
    async with open_store(url) as store:
        print(f"store {url.split(':', 1)[0]}, a thread of {runs} ended runs")
        print(
            f"{'pending':>8} {'answered p50/p99 us':>22} {'refused p50/p99 us':>22}"
            f" {'cancelled p50/p99 us':>22}"
        )
        for pending in (1, 10, 100):
            thread = f"t{pending}"
            ids = await _thread(store, thread, runs, pending)
            admitted = await _time(store, _input(thread, ids), requests)
            refused = await _time(store, _input(thread, []), requests)
            cancelled = await _time(store, _input(thread, []), requests, "cancel")
            print(
                f"{pending:>8} {statistics.median(admitted):>12.0f} / {_p99(admitted):<8.0f}"
                f" {statistics.median(refused):>12.0f} / {_p99(refused):<8.0f}"
                f" {statistics.median(cancelled):>12.0f} / {_p99(cancelled):<8.0f}"
            )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--store", default="sqlite", help="sqlite, memory or a store URL")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        url = {"sqlite": f"sqlite:///{tmp}/runs.db", "memory": "memory:"}.get(
            args.store, args.store
        )
        anyio.run(main, args.requests, args.runs, url)
