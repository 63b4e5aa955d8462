"""Issue 27's load check, against a real ``agui-pipes serve --store URL`` process.

    python benchmarks/load_check.py --store sqlite:///load.db
    python benchmarks/load_check.py --start-redis          # its own redis-server
    python benchmarks/load_check.py --store redis://127.0.0.1:6379/0 --checks waves
    python benchmarks/load_check.py --start-redis --clients 20 --followers 50 --pause 2

Three checks, each against a server of its own on the same store:

``waves``     ``serve --demo --pace P`` (``--pace-waves``, 0.01 s: a run lasts about a
              second, so a client that leaves does so while its run is live): ``--waves``
              waves of ``--clients`` concurrent POSTs; ``--disconnect`` of them (20%)
              close the connection after some frames and resume with ``Last-Event-ID``
              (``GET runs/{runId}``). Every answer must be 200 and every run's log, read
              back through the replay route, byte-equal to what its client received (a
              resumed client: its prefix and the resumed tail). The server's resident set
              after the last wave must be within ``--rss-tolerance`` (10%) of that after
              the first.
``followers`` ``serve --demo --pace P`` (``--pace-followers``, 0.5 s: a run of ~50 s):
              one run POSTed, and ``--followers`` (1,000) concurrent ``GET runs/{runId}``
              of it while it is live. Every follower must follow it to its end with the
              stored log's bytes, and the run's own client must get every event. A
              follower whose first frame came after the run ended makes the check
              fail as inconclusive (on a loaded machine joining 1,000 takes tens of s).
``pause``     ``serve --upstream MOCK --store URL`` in front of ``agui-pipes mock`` whose
              agent goes silent for ``--pause`` seconds (30) mid-run: a follower that
              joined before the pause must get the whole run, byte-equal to the log.

Any non-200 answer, transport error, broken log or a traceback in a server's
output fails its check. The report is a table (and ``--json PATH``); the exit
status is 1 when a check failed. No timing is judged: the figures are printed.
"""

from __future__ import annotations

import argparse
import functools
import json
import random
import re
import resource
import secrets
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import httpx

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _load_processes import HTTPProcess, Process, scan_log, start_redis  # noqa: E402
from _load_sse import (  # noqa: E402
    check_log,
    complete_frames,
    ends_finished,
    first_difference,
    frame_id,
)

CHECKS = ("waves", "followers", "pause")


@dataclass
class Result:
    """One check's verdict and the figures behind it."""

    name: str
    ok: bool = True
    lines: list[str] = field(default_factory=list)
    figures: dict[str, Any] = field(default_factory=dict)

    def fail(self, line: str) -> None:
        self.ok = False
        self.lines.append(line)


@dataclass
class Stream:
    """What one HTTP request got: status, the complete frames, the error if any."""

    status: int | None = None
    frames: list[bytes] = field(default_factory=list)
    error: str = ""
    body: bytes = b""
    cut: bool = False
    """Closed by us after ``cut_after`` blocks, before the stream ended."""
    headers_at: float | None = None
    first_frame_at: float | None = None
    ended_at: float | None = None


def run_input(thread_id: str, run_id: str) -> dict[str, Any]:
    return {
        "threadId": thread_id,
        "runId": run_id,
        "state": None,
        "messages": [{"id": f"{run_id}-user", "role": "user", "content": "A weekend in Porto"}],
        "tools": [],
        "context": [],
        "forwardedProps": None,
    }


async def read_stream(
    http: httpx.AsyncClient,
    method: str,
    url: str,
    *,
    body: dict[str, Any] | None = None,
    last_event_id: str | None = None,
    cut_after: int | None = None,
    on_frame: Callable[[bytes], None] | None = None,
) -> Stream:
    """One request read to its end (or closed after ``cut_after`` complete frames)."""
    got = Stream()
    headers = {"accept": "text/event-stream"}
    if last_event_id is not None:
        headers["last-event-id"] = last_event_id
    raw = bytearray()
    try:
        async with http.stream(method, url, json=body, headers=headers) as response:
            got.status = response.status_code
            got.headers_at = time.monotonic()
            if response.status_code != 200:
                got.body = (await response.aread())[:300]
                return got
            async for chunk in response.aiter_raw():
                raw += chunk
                if got.first_frame_at is None and b"\n\n" in raw:
                    got.first_frame_at = time.monotonic()
                if on_frame is not None:
                    on_frame(bytes(raw))
                if cut_after is not None and raw.count(b"\n\n") >= cut_after:
                    got.cut = True
                    break  # leaving the block closes the connection mid-stream
    except httpx.HTTPError as exc:
        got.error = f"{type(exc).__name__}: {exc}"[:200]
    got.ended_at = time.monotonic()
    got.frames, _ = complete_frames(bytes(raw))
    return got


def describe(stream: Stream) -> str:
    if stream.error:
        return stream.error
    return f"HTTP {stream.status} {stream.body[:120]!r}"


async def gather(calls: list[Callable[[], Awaitable[Any]]], limit: int | None = None) -> list[Any]:
    """Run the calls concurrently (at most ``limit`` at once); their results in order."""
    results: list[Any] = [None] * len(calls)
    gate = anyio.Semaphore(limit or len(calls) or 1)

    async def one(n: int) -> None:
        async with gate:
            results[n] = await calls[n]()

    async with anyio.create_task_group() as group:
        for n in range(len(calls)):
            group.start_soon(one, n)
    return results


async def stored_log(http: httpx.AsyncClient, url: str, run_id: str) -> Stream:
    """The run's log as the server's replay route gives it (no ``Last-Event-ID``)."""
    return await read_stream(http, "GET", f"{url}runs/{run_id}")


def client_http(read_timeout: float) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        timeout=httpx.Timeout(60.0, read=read_timeout),
        # No keep-alive: each request is a client of its own, as in the check, and
        # no request races the server's closing of an idle kept-alive connection.
        limits=httpx.Limits(max_connections=4000, max_keepalive_connections=0),
    )


class Errors:
    """Failed requests by kind, with the first few described."""

    def __init__(self) -> None:
        self.kinds: Counter[str] = Counter()
        self.samples: list[str] = []
        self.resumed = 0  # clients that were cut and asked for the rest

    def add(self, what: str, stream: Stream) -> None:
        kind = f"{what}: " + (
            stream.error.split(":")[0] if stream.error else f"HTTP {stream.status}"
        )
        self.kinds[kind] += 1
        if len(self.samples) < 5:
            self.samples.append(f"{what}: {describe(stream)}")

    @property
    def total(self) -> int:
        return sum(self.kinds.values())


def kind_of(problem: str) -> str:
    """A problem's kind, for counting: numbers and quoted details left out."""
    return re.sub(r"\d+", "N", problem.split(" (")[0].split(": ")[0])


# -- waves ---------------------------------------------------------------------------------


async def one_client(
    http: httpx.AsyncClient, url: str, run_id: str, cut: int | None, errors: Errors
) -> list[bytes] | None:
    """POST a run (closing it after ``cut`` frames, then resuming); the frames received."""
    first = await read_stream(
        http, "POST", url, body=run_input(f"t-{run_id}", run_id), cut_after=cut
    )
    if first.status != 200 or first.error:
        errors.add("POST", first)
        return None
    if not first.cut:
        return first.frames  # read to its end (a run shorter than the cut is not cut)
    errors.resumed += 1
    last_id = frame_id(first.frames[-1])
    if last_id is None:
        return first.frames  # not resumable: check_log names the frame without an id
    tail = await read_stream(http, "GET", f"{url}runs/{run_id}", last_event_id=last_id)
    if tail.status != 200 or tail.error:
        errors.add("resume", tail)
        return None
    return first.frames + tail.frames


async def check_waves(args: argparse.Namespace, store: str, directory: Path) -> Result:
    result = Result(f"waves: {args.waves} x {args.clients} clients, {args.disconnect:.0%} cut")
    server = HTTPProcess(
        "serve-waves",
        ["serve", "--demo", "--store", store, "--pace", str(args.pace_waves)],
        directory,
    )
    rng = random.Random(args.seed)
    tag = secrets.token_hex(3)
    rss: list[float] = []
    try:
        async with client_http(args.read_timeout) as http:
            for wave in range(1, args.waves + 1):
                errors = Errors()
                ids = [f"load-{tag}-w{wave}-{n}" for n in range(args.clients)]
                cutters = set(
                    rng.sample(range(args.clients), round(args.clients * args.disconnect))
                )
                cuts = [rng.randint(3, 120) if n in cutters else None for n in range(args.clients)]
                started = time.monotonic()
                received = await gather(
                    [
                        functools.partial(one_client, http, server.url, run_id, cut, errors)
                        for run_id, cut in zip(ids, cuts, strict=True)
                    ]
                )
                seconds = time.monotonic() - started
                logs = await gather(
                    [functools.partial(stored_log, http, server.url, run_id) for run_id in ids], 50
                )
                broken: Counter[str] = Counter()
                samples: list[str] = []
                for run_id, got, log in zip(ids, received, logs, strict=True):
                    if got is None:
                        continue  # counted as an HTTP error
                    problem = ""
                    if log.status != 200 or log.error:
                        problem = f"replay {describe(log)}"
                    else:
                        problem = check_log(got, run_id).problem or first_difference(
                            got, log.frames
                        )
                    if problem:
                        broken[kind_of(problem)] += 1
                        if len(samples) < 5:
                            samples.append(f"{run_id}: {problem}")
                rss.append(server.rss_mib())
                equal = args.clients - errors.total - sum(broken.values())
                result.figures[f"wave{wave}"] = {
                    "seconds": round(seconds, 2),
                    "http_errors": errors.total,
                    "error_kinds": dict(errors.kinds),
                    "broken_logs": sum(broken.values()),
                    "broken_kinds": dict(broken),
                    "logs_equal": equal,
                    "resumed": errors.resumed,
                    "rss_mib": round(rss[-1], 1),
                }
                line = (
                    f"wave {wave}: {seconds:.1f} s, {errors.resumed} cut and resumed, "
                    f"{errors.total} HTTP errors, "
                    f"{equal}/{args.clients} logs equal to what the client got, "
                    f"server RSS {rss[-1]:.1f} MiB"
                )
                if errors.total or broken:
                    result.fail(line)
                    result.lines += [f"  {kind}: {count}" for kind, count in errors.kinds.items()]
                    result.lines += [f"  {kind}: {count}" for kind, count in broken.items()]
                    result.lines += [f"  e.g. {sample}" for sample in errors.samples + samples]
                else:
                    result.lines.append(line)
    finally:
        server.stop()
    if len(rss) >= 2:
        growth = rss[-1] / rss[0] - 1
        result.figures["rss_growth"] = round(growth, 4)
        line = f"RSS wave 1 -> {len(rss)}: {rss[0]:.1f} -> {rss[-1]:.1f} MiB ({growth:+.1%})"
        if args.rss_tolerance is not None and growth > args.rss_tolerance:
            result.fail(f"{line}, over the {args.rss_tolerance:.0%} tolerance")
        else:
            result.lines.append(line)
    judge_log(result, server)
    return result


def judge_log(result: Result, *servers: Process) -> None:
    for server in servers:
        scan = scan_log(server.output())
        result.figures[f"{server.name}_log"] = scan
        summary = (
            f"{server.name}: {scan['tracebacks']} tracebacks, {scan['errors']} error lines, "
            f"{scan['warnings']} warnings"
        )
        if scan["tracebacks"] or scan["errors"]:
            result.fail(summary)
        elif scan["warnings"]:
            result.lines.append(summary)
        result.lines += [f"  {count} x {shape[:160]}" for shape, count in scan["kinds"]]  # type: ignore[attr-defined]


# -- followers -------------------------------------------------------------------------------


async def check_followers(args: argparse.Namespace, store: str, directory: Path) -> Result:
    result = Result(f"followers: {args.followers} resumes of one live run")
    server = HTTPProcess(
        "serve-followers",
        ["serve", "--demo", "--store", store, "--pace", str(args.pace_followers)],
        directory,
    )
    run_id = f"load-{secrets.token_hex(3)}-followed"
    try:
        async with client_http(args.read_timeout) as http:
            started = anyio.Event()

            def first_frames(raw: bytes) -> None:
                if raw.count(b"\n\n") >= 2:
                    started.set()

            followers: list[Stream] = []

            follow_started = 0.0

            async def follow_all() -> None:
                nonlocal follow_started
                await started.wait()
                follow_started = time.monotonic()
                url = f"{server.url}runs/{run_id}"
                followers.extend(
                    await gather([lambda: read_stream(http, "GET", url)] * args.followers)
                )

            owner = Stream()

            async def own() -> None:
                nonlocal owner
                owner = await read_stream(
                    http,
                    "POST",
                    server.url,
                    body=run_input(f"t-{run_id}", run_id),
                    on_frame=first_frames,
                )
                started.set()

            async with anyio.create_task_group() as group:
                group.start_soon(own)
                group.start_soon(follow_all)
            log = await stored_log(http, server.url, run_id)
            rss = server.rss_mib()
    finally:
        server.stop()
    if owner.status != 200 or owner.error:
        result.fail(f"the run's own client: {describe(owner)}")
    if log.status != 200 or log.error:
        result.fail(f"the stored log: {describe(log)}")
        judge_log(result, server)
        return result
    shape = check_log(log.frames, run_id)
    if not shape.ok:
        result.fail(f"the stored log: {shape.problem}")
    # Unharmed: it got its whole run, to RUN_FINISHED; byte-equal to the log: it was recorded.
    if not ends_finished(owner.frames):
        last = owner.frames[-1][-120:] if owner.frames else b"nothing"
        result.fail(f"the run's own client did not get the whole run: it ends in {last!r}")
    else:
        result.lines.append(f"the run's own client got its whole run ({len(owner.frames)} events)")
    owner_diff = first_difference(owner.frames, log.frames)
    if owner_diff:
        result.fail(f"the run's own client and the stored log: {owner_diff}")
    errors = Errors()
    unequal: Counter[str] = Counter()
    samples: list[str] = []
    live = 0
    for follower in followers:
        if follower.status != 200 or follower.error:
            errors.add("follow", follower)
            continue
        if owner.ended_at is not None and (follower.first_frame_at or 0) < owner.ended_at:
            live += 1
        diff = first_difference(follower.frames, log.frames)
        if diff:
            unequal[kind_of(diff)] += 1
            if len(samples) < 5:
                samples.append(diff)
    firsts = sorted(
        follower.first_frame_at - follow_started
        for follower in followers
        if follower.first_frame_at is not None
    )
    answers = sorted(f.headers_at - follow_started for f in followers if f.headers_at is not None)
    run_seconds = (owner.ended_at or 0) - (owner.first_frame_at or 0)
    first_median = firsts[len(firsts) // 2] if firsts else None
    first_max = firsts[-1] if firsts else None
    result.figures.update(
        run_seconds=round(run_seconds, 2),
        first_frame_median=None if first_median is None else round(first_median, 2),
        first_frame_max=None if first_max is None else round(first_max, 2),
        answer_median=round(answers[len(answers) // 2], 2) if answers else None,
        followers=args.followers,
        http_errors=errors.total,
        error_kinds=dict(errors.kinds),
        unequal=sum(unequal.values()),
        attached_while_live=live,
        events=len(log.frames),
        rss_mib=round(rss, 1),
    )
    line = (
        f"{args.followers - errors.total - sum(unequal.values())}/{args.followers} followers "
        f"got the whole run ({len(log.frames)} events); {live} had it live; "
        f"{errors.total} HTTP errors; server RSS {rss:.1f} MiB"
    )
    if firsts:
        result.lines.append(
            f"the run lasted {run_seconds:.1f} s; a follower's answer came "
            f"{answers[len(answers) // 2]:.1f} s (median) after it asked, its first frame "
            f"{firsts[len(firsts) // 2]:.1f} s (median), {firsts[-1]:.1f} s (last)"
        )
    if errors.total or unequal:
        result.fail(line)
        result.lines += [f"  {kind}: {count}" for kind, count in (errors.kinds + unequal).items()]
        result.lines += [f"  e.g. {sample}" for sample in errors.samples + samples]
    elif live < args.followers:
        result.fail(f"{line}: the run ended too soon for the check (raise --pace-followers)")
    else:
        result.lines.append(line)
    judge_log(result, server)
    return result


# -- pause -----------------------------------------------------------------------------------

PAUSE_SCENARIO = """\
version: 1
scenarios:
  - name: pause
    pace: 0.01
    script:
      - text: "Let me think about that for a while."
      - custom: {{name: pause, value: {seconds}}}
      - sleep: {seconds}
      - text: "Here is the answer after the pause."
"""


async def check_pause(args: argparse.Namespace, store: str, directory: Path) -> Result:
    result = Result(f"pause: a follower through a {args.pause:g} s pause of the agent")
    scenario = directory / "pause.yaml"
    scenario.write_text(PAUSE_SCENARIO.format(seconds=args.pause))
    mock = HTTPProcess("mock", ["mock", str(scenario)], directory)
    gateway: HTTPProcess | None = None
    run_id = f"load-{secrets.token_hex(3)}-paused"
    try:
        command = ["serve", "--upstream", mock.url, "--store", store]
        command += ["--timeout", str(args.pause * 2 + 30)]  # the pause is no upstream timeout
        gateway = HTTPProcess("serve-pause", command, directory)
        async with client_http(max(args.read_timeout, args.pause + 60)) as http:
            paused = anyio.Event()
            owner = Stream()
            follower = Stream()

            def frame(raw: bytes) -> None:
                if b'"name":"pause"' in raw:
                    paused.set()  # the agent is now silent

            async def own() -> None:
                nonlocal owner
                assert gateway is not None
                body = run_input(f"t-{run_id}", run_id)
                owner = await read_stream(http, "POST", gateway.url, body=body, on_frame=frame)
                paused.set()

            async def follow() -> None:
                nonlocal follower
                assert gateway is not None
                await paused.wait()  # joining now, the follower's wait is the pause
                follower = await read_stream(http, "GET", f"{gateway.url}runs/{run_id}")

            async with anyio.create_task_group() as group:
                group.start_soon(own)
                group.start_soon(follow)
            log = await stored_log(http, gateway.url, run_id)
    finally:
        if gateway is not None:
            gateway.stop()
        mock.stop()
    for who, stream in (("the run's own client", owner), ("the follower", follower)):
        if stream.status != 200 or stream.error:
            result.fail(f"{who}: {describe(stream)}")
            continue
        problem = check_log(stream.frames, run_id).problem or first_difference(
            stream.frames, log.frames
        )
        if problem:
            result.fail(f"{who}: {problem}")
        else:
            waited = (stream.ended_at or 0) - (stream.first_frame_at or 0)
            result.lines.append(f"{who}: all {len(stream.frames)} events, {waited:.1f} s")
    if gateway is not None:
        judge_log(result, gateway)
    return result


# -- the run -------------------------------------------------------------------------------


def raise_fd_limit(needed: int) -> None:
    """Enough descriptors for every client socket here and in the servers (inherited)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = needed if hard == resource.RLIM_INFINITY else min(needed, hard)
    if soft != resource.RLIM_INFINITY and soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--store", help="the store URL every server uses (sqlite:///…, redis://…)")
    where.add_argument(
        "--start-redis", action="store_true", help="start a redis-server of its own and use it"
    )
    parser.add_argument("--checks", default=",".join(CHECKS), help="comma-separated (all)")
    parser.add_argument("--clients", type=int, default=200, help="concurrent clients a wave (200)")
    parser.add_argument("--waves", type=int, default=2, help="waves of clients (2)")
    parser.add_argument("--disconnect", type=float, default=0.2, help="share that cut (0.2)")
    parser.add_argument("--followers", type=int, default=1000, help="followers of one run (1000)")
    parser.add_argument("--pause", type=float, default=30.0, help="the agent's pause, s (30)")
    parser.add_argument("--pace-waves", type=float, default=0.01, help="demo pace, waves (0.01)")
    parser.add_argument(
        "--pace-followers", type=float, default=0.5, help="demo pace, followers (0.5)"
    )
    parser.add_argument(
        "--rss-tolerance",
        type=float,
        default=0.10,
        help="RSS growth from the first wave to the last that still counts as flat (0.10)",
    )
    parser.add_argument(
        "--no-rss-check", action="store_true", help="report the RSS, do not judge it"
    )
    parser.add_argument("--read-timeout", type=float, default=120.0, help="per read, s (120)")
    parser.add_argument("--seed", type=int, default=27, help="which clients cut, and where")
    parser.add_argument("--json", type=Path, help="also write the report here")
    args = parser.parse_args(argv)
    args.checks = [name.strip() for name in args.checks.split(",") if name.strip()]
    unknown = sorted(set(args.checks) - set(CHECKS))
    if unknown:
        parser.error(f"unknown check(s) {', '.join(unknown)}; the checks: {', '.join(CHECKS)}")
    if args.no_rss_check:
        args.rss_tolerance = None
    return args


RUNNERS: dict[str, Callable[[argparse.Namespace, str, Path], Awaitable[Result]]] = {
    "waves": check_waves,
    "followers": check_followers,
    "pause": check_pause,
}


async def run_checks(args: argparse.Namespace, store: str, directory: Path) -> list[Result]:
    results = []
    for name in args.checks:
        print(f"... {name}", file=sys.stderr, flush=True)
        try:
            results.append(await RUNNERS[name](args, store, directory))
        except Exception as exc:  # a check that cannot run is a failed check, with its reason
            failed = Result(name)
            failed.fail(f"could not run: {type(exc).__name__}: {exc}"[:2000])
            results.append(failed)
    return results


def report(store: str, results: list[Result]) -> str:
    lines = [f"load check against serve --store {store}", ""]
    for result in results:
        lines.append(f"{'PASS' if result.ok else 'FAIL'}  {result.name}")
        lines += [f"      {line}" for line in result.lines]
    for result in results:
        for key, value in result.figures.items():
            if key.endswith("_log") and value["traceback_excerpts"]:
                lines += ["", f"{key}: first tracebacks"]
                for excerpt in value["traceback_excerpts"]:
                    lines += ["  " + line for line in excerpt.splitlines()[-12:]] + [""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    raise_fd_limit(4 * max(args.followers, args.clients) + 1024)
    with tempfile.TemporaryDirectory(prefix="agui-load-") as tmp:
        directory = Path(tmp)
        redis: Process | None = None
        store: str = args.store
        if args.start_redis:
            redis, store = start_redis(directory)
        try:
            results = anyio.run(run_checks, args, store, directory)
        finally:
            if redis is not None:
                redis.stop()
    print(report(store, results))
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "store": store,
                    "ok": all(result.ok for result in results),
                    "checks": [
                        {"name": r.name, "ok": r.ok, "lines": r.lines, "figures": r.figures}
                        for r in results
                    ],
                },
                indent=2,
            )
        )
    return 0 if all(result.ok for result in results) else 1


if __name__ == "__main__":
    sys.exit(main())
