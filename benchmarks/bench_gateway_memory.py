"""Gateway memory over sequential runs, and ``agui-pipes run``'s peak RSS against stream length.

    python benchmarks/bench_gateway_memory.py                  # 10 runs of 800k events
    python benchmarks/bench_gateway_memory.py --runs 4 --events 160000 --diagnose
    python benchmarks/bench_gateway_memory.py --env PYTHONMALLOC=malloc --env MALLOC_ARENA_MAX=2

Starts the replay upstream of ``bench_serving.py`` (a raw asyncio server
answering every POST with the same pre-encoded SSE body) and the real
``agui-pipes serve --upstream URL --config CHAIN`` (the suite's gateway-path
chain) on loopback, then sends ``--runs`` runs one after the other and reads
the gateway process's resident set (``VmRSS`` in ``/proc/PID/status``) after
each, once the run's last byte has arrived and the server has had a moment
to finish the request. The issue-15 target: the RSS after the last run at most
1.2x the RSS after the first.

The gateway runs through a small wrapper (``--_role gateway``) that calls the
CLI's ``main`` unchanged but installs a ``SIGUSR1`` handler; with
``--diagnose`` the benchmark sends it after each run and the handler writes
what the process holds to a JSON file: the number of live objects by type
(after ``gc.collect()``), the sizes of the fast path's caches, the glibc heap
(``mallinfo2``: in use, free in the arenas, mmapped), the RSS before and after
``malloc_trim(0)`` when ``--trim-probe`` is given (how much of the growth is
free memory the allocator has not returned), and, with ``--tracemalloc``,
the top allocation sites grown since the previous run (tracing starts after
the first run, so one-time work is not in it; once it hooks the allocator,
``sys._debugmallocstats`` has no pymalloc figures to give). ``--env NAME=VALUE``
(repeatable) sets the gateway's environment, e.g. ``PYTHONMALLOC=malloc``
(no pymalloc arenas) or ``MALLOC_ARENA_MAX=2`` (fewer glibc arenas).

The second part (skipped by ``--no-run-rss``) runs ``agui-pipes run`` as a
whole process on 160k and 800k events of the same stream and reports each
one's peak RSS (``VmHWM``): it must not grow with the stream's length.
Nothing is asserted: the figures go to docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
import httpx

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
OUT = HERE / "out"
sys.path.insert(0, str(HERE))

import bench_serving  # noqa: E402
from _raw_http import read_head  # noqa: E402
from bench_serving import GATEWAY_CHAIN, Server, free_port, sse_body  # noqa: E402

_FINISHED = b'"type":"RUN_FINISHED"'


def status_kib(pid: int | str, field: str) -> int:
    """A ``/proc/PID/status`` field in KiB (``VmRSS``, ``VmHWM``)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise KeyError(field)


# -- the gateway, inside its own process -----------------------------------------------


def _libc() -> Any:
    import ctypes
    import ctypes.util

    name = ctypes.util.find_library("c")
    return ctypes.CDLL(name) if name else None


def _mallinfo(libc: Any) -> dict[str, int] | None:
    """glibc's heap figures (``mallinfo2``), in KiB: None off glibc."""
    import ctypes

    if libc is None or not hasattr(libc, "mallinfo2"):
        return None

    class _Info(ctypes.Structure):
        _fields_ = [
            (name, ctypes.c_size_t)
            for name in (
                "arena",
                "ordblks",
                "smblks",
                "hblks",
                "hblkhd",
                "usmblks",
                "fsmblks",
                "uordblks",
                "fordblks",
                "keepcost",
            )
        ]

    libc.mallinfo2.restype = _Info
    info = libc.mallinfo2()
    return {
        "arena_kib": info.arena // 1024,  # bytes in the sbrk/arena heaps
        "in_use_kib": info.uordblks // 1024,
        "free_kib": info.fordblks // 1024,  # free chunks kept in the arenas
        "mmapped_kib": info.hblkhd // 1024,
        "top_releasable_kib": info.keepcost // 1024,
    }


def _pymalloc_summary() -> dict[str, int]:
    """Arenas pymalloc holds, from ``sys._debugmallocstats`` (CPython-specific)."""
    import re

    read, write = os.pipe()
    saved = os.dup(2)
    os.dup2(write, 2)
    try:
        sys._debugmallocstats()  # type: ignore[attr-defined]  # writes to the C stderr
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(write)
    text = b""
    while chunk := os.read(read, 65536):
        text += chunk
    os.close(read)
    out: dict[str, int] = {}
    for key, pattern in (
        ("arenas_allocated_total", rb"# arenas allocated total\s*=\s*([\d,]+)"),
        ("arenas_reclaimed", rb"# arenas reclaimed\s*=\s*([\d,]+)"),
        ("arenas_highwater", rb"# arenas highwater mark\s*=\s*([\d,]+)"),
        ("arenas_now", rb"# arenas allocated current\s*=\s*([\d,]+)"),
        ("arena_bytes", rb"(\d[\d,]*) arenas \* \d+ bytes/arena\s*=\s*([\d,]+)"),
        ("free_pool_bytes", rb"# bytes in available blocks\s*=\s*([\d,]+)"),
        ("unused_pool_bytes", rb"\d+ unused pools \* \d+ bytes\s*=\s*([\d,]+)"),
    ):
        found = re.search(pattern, text)
        if found:
            out[key] = int(found.groups()[-1].replace(b",", b""))
    return out


def _fast_path_caches() -> dict[str, int]:
    """Sizes of the module-level dicts and lists the fast path and codecs keep."""
    sizes: dict[str, int] = {}
    for name, module in list(sys.modules.items()):
        if not name.startswith("agui_pipes") or module is None:
            continue
        for attr, value in list(vars(module).items()):
            if (
                isinstance(value, (dict, list, set))
                and not attr.startswith("__")
                and len(value) > 8
            ):
                sizes[f"{name}.{attr}"] = len(value)
    import linecache

    sizes["linecache.cache"] = len(linecache.cache)
    return sizes


def gateway_main(argv: list[str], report_dir: str, trace: bool) -> int:
    """The CLI's ``main`` with a SIGUSR1 handler that dumps what the process holds."""
    import gc
    from collections import Counter

    libc = _libc()
    state: dict[str, Any] = {"n": 0, "snapshot": None}

    def dump(signum: int, frame: Any) -> None:
        gc.collect()
        counts = Counter(type(o).__name__ for o in gc.get_objects())
        report: dict[str, Any] = {
            "rss_kib": status_kib("self", "VmRSS"),
            "objects": sum(counts.values()),
            "top_types": counts.most_common(12),
            "caches": _fast_path_caches(),
            "mallinfo": _mallinfo(libc),
            "pymalloc": _pymalloc_summary(),
        }
        if trace:
            # Tracing starts at the first dump (after run 1: the one-time work is
            # done), so what later dumps show grown is what the later runs kept.
            import tracemalloc

            if not tracemalloc.is_tracing():
                tracemalloc.start(10)
            snapshot = tracemalloc.take_snapshot()
            report["traced_kib"] = tracemalloc.get_traced_memory()[0] // 1024
            if state["snapshot"] is not None:
                diff = snapshot.compare_to(state["snapshot"], "lineno")
                report["grown"] = [str(stat) for stat in diff[:12]]
            state["snapshot"] = snapshot
        if os.environ.get("AGUI_BENCH_TRIM_PROBE") == "1" and libc is not None:
            libc.malloc_trim(0)
            report["rss_after_trim_kib"] = status_kib("self", "VmRSS")
            report["mallinfo_after_trim"] = _mallinfo(libc)
        state["n"] += 1
        path = Path(report_dir) / f"dump-{state['n']}.json"
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(report))
        tmp.rename(path)

    signal.signal(signal.SIGUSR1, dump)
    from agui_pipes._cli import main

    return main(argv)


def upstream_main(port: int, body_file: Path, fresh_ids: bool) -> None:
    """``bench_serving``'s replay upstream; with ``fresh_ids`` every request gets its own ids.

    A real agent never repeats a run, message or tool-call id; with the same
    body replayed, a cache keyed by such values would stop growing after the
    first run and hide a leak. ``fresh_ids`` prefixes every ``run-...`` id of
    the body (all of the stream's ids derive from it) with the request's
    number.
    """
    if not fresh_ids:
        bench_serving.upstream_main(port, body_file)
        return
    import asyncio

    body = body_file.read_bytes()
    piece = 256 * 1024
    head = (
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\n"
        b"transfer-encoding: chunked\r\n\r\n"
    )
    served = [0]

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                request = await read_head(reader)
                if request is None:
                    return
                headers, length = request
                if length:
                    await reader.readexactly(length)
                if headers.startswith(b"GET /healthz"):
                    writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")
                else:
                    served[0] += 1
                    this = body.replace(b'"run-', b'"q%d-run-' % served[0])
                    writer.write(head)
                    for i in range(0, len(this), piece):
                        chunk = this[i : i + piece]
                        writer.write(b"%x\r\n%b\r\n" % (len(chunk), chunk))
                        await writer.drain()
                    writer.write(b"0\r\n\r\n")
                await writer.drain()
        except ConnectionError:
            pass
        finally:
            writer.close()

    async def serve() -> None:
        server = await asyncio.start_server(handle, "127.0.0.1", port, backlog=4096)
        async with server:
            await server.serve_forever()

    asyncio.run(serve())


# -- the client --------------------------------------------------------------------------


async def one_run(url: str, run_id: str) -> tuple[int, bool]:
    """POST one run and read it to the end; (data frames received, ended with RUN_FINISHED)."""
    body = {"threadId": f"t-{run_id}", "runId": run_id, "messages": []}
    frames = 0
    tail = b""
    async with (
        httpx.AsyncClient(timeout=httpx.Timeout(300.0)) as client,
        client.stream("POST", url, json=body) as response,
    ):
        if response.status_code != 200:
            raise SystemExit(f"run {run_id}: HTTP {response.status_code}")
        async for chunk in response.aiter_raw():
            joined = tail + chunk
            frames += joined.count(b"\n\ndata:") - tail.count(b"\n\ndata:")
            tail = joined[-256:]
    return frames + 1, _FINISHED in tail


async def concurrent_runs(url: str, run: int, clients: int, framed: bool) -> tuple[int, bool]:
    """``clients`` runs at once (the n-th round of them); frames received by all, all finished.

    ``framed``: read as ``bench_serving.py``'s client does (splitting every frame
    in Python, a few µs per event: a slower reader, so the gateway's send
    buffer fills and the upstream waits), instead of only counting frames.
    """
    totals = [0, True]

    async def one(index: int) -> None:
        run_id = f"r{run}-{index}"
        if framed:
            phase = bench_serving.Phase("memory", 1)
            async with httpx.AsyncClient(timeout=httpx.Timeout(300.0)) as client:
                await bench_serving.one_run(client, url, run_id, phase)
            frames, finished = phase.events, phase.runs == 1 and not phase.errors
        else:
            frames, finished = await one_run(url, run_id)
        totals[0] += frames
        totals[1] = bool(totals[1]) and finished

    async with anyio.create_task_group() as tg:
        for index in range(clients):
            tg.start_soon(one, index)
    return int(totals[0]), bool(totals[1])


def wait_for(path: Path, timeout: float = 120.0) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while not path.exists():
        if time.monotonic() > deadline:
            raise SystemExit(f"no diagnostics at {path}")
        time.sleep(0.05)
    result: dict[str, Any] = json.loads(path.read_text())
    return result


def gateway_runs(args: argparse.Namespace, body_file: Path, chain_file: Path) -> dict[str, Any]:
    report_dir = tempfile.mkdtemp(prefix="gwmem-")
    up_port, gw_port = free_port(), free_port()
    upstream = Server(
        "upstream",
        [
            sys.executable,
            __file__,
            "--_role",
            "upstream",
            "--_port",
            str(up_port),
            "--_dir",
            str(body_file),
            *(["--_trace"] if args.fresh_ids else []),
        ],
        up_port,
    )
    env_extra = dict(item.split("=", 1) for item in args.env)
    if args.trim_probe:
        env_extra["AGUI_BENCH_TRIM_PROBE"] = "1"
    saved = {k: os.environ.get(k) for k in env_extra}
    os.environ.update(env_extra)
    try:
        gateway = Server(
            "gateway",
            [
                sys.executable,
                __file__,
                "--_role",
                "gateway",
                "--_dir",
                report_dir,
                *(["--_trace"] if args.tracemalloc else []),
                "--",
                "serve",
                "--upstream",
                upstream.url + "/",
                "--config",
                str(chain_file),
                "--port",
                str(gw_port),
                "--log-level",
                "warning",
                "--keepalive",
                "0",
            ],
            gw_port,
        )
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    pid = gateway.process.pid
    rows: list[dict[str, Any]] = []
    try:
        idle = status_kib(pid, "VmRSS")
        print(
            f"gateway pid {pid}, env {env_extra or '{}'}: RSS at start {idle / 1024:.1f} MiB",
            flush=True,
        )
        for n in range(1, args.runs + 1):
            cpu = gateway.cpu
            start = time.monotonic()
            frames, finished = anyio.run(
                concurrent_runs, gateway.url + "/", n, args.clients, args.framed
            )
            wall = time.monotonic() - start
            time.sleep(0.5)  # let the server close the request and drop its objects
            row: dict[str, Any] = {
                "run": n,
                "frames": frames,
                "finished": finished,
                "wall_s": round(wall, 2),
                "gateway_cpu_s": round(gateway.cpu - cpu, 2),
                "rss_kib": status_kib(pid, "VmRSS"),
                "hwm_kib": status_kib(pid, "VmHWM"),
            }
            if args.diagnose:
                os.kill(pid, signal.SIGUSR1)
                row["diagnostics"] = wait_for(Path(report_dir) / f"dump-{n}.json")
            rows.append(row)
            line = (
                f"run {n:>2}: {frames:,} frames{'' if finished else ' (NOT FINISHED)'}, "
                f"{wall:.1f} s, gateway CPU {row['gateway_cpu_s']:.1f} s, "
                f"RSS {row['rss_kib'] / 1024:.1f} MiB "
                f"(x{row['rss_kib'] / rows[0]['rss_kib']:.3f} of run 1), "
                f"peak {row['hwm_kib'] / 1024:.1f} MiB"
            )
            if args.diagnose:
                d = row["diagnostics"]
                mi = d.get("mallinfo") or {}
                line += (
                    f"\n        objects {d['objects']:,}, glibc in use "
                    f"{mi.get('in_use_kib', 0) / 1024:.1f} MiB free "
                    f"{mi.get('free_kib', 0) / 1024:.1f} MiB mmapped "
                    f"{mi.get('mmapped_kib', 0) / 1024:.1f} MiB, pymalloc arenas "
                    f"{d['pymalloc'].get('arenas_now', '?')}"
                )
                if "rss_after_trim_kib" in d:
                    line += f", RSS after malloc_trim {d['rss_after_trim_kib'] / 1024:.1f} MiB"
                if "traced_kib" in d:
                    line += f", traced {d['traced_kib'] / 1024:.1f} MiB"
            print(line, flush=True)
    finally:
        gateway.stop()
        upstream.stop()
    first, last = rows[0]["rss_kib"], rows[-1]["rss_kib"]
    print(
        f"RSS after run {len(rows)} / after run 1: {last / first:.3f} (target <= 1.2)", flush=True
    )
    return {
        "env": env_extra,
        "fresh_ids": args.fresh_ids,
        "clients": args.clients,
        "idle_rss_kib": idle,
        "runs": rows,
        "ratio": round(last / first, 3),
    }


# -- agui-pipes run: peak RSS ------------------------------------------------------------


_PEAK_WRAPPER = (
    "import atexit, sys\n"
    "def _peak():\n"
    "    for line in open('/proc/self/status'):\n"
    "        if line.startswith('VmHWM:'):\n"
    "            sys.stderr.write('PEAK ' + line.split()[1] + '\\n')\n"
    "atexit.register(_peak)\n"
    "from agui_pipes._cli import main\n"
    "sys.exit(main(sys.argv[1:]))\n"
)


def run_peak_rss(path: Path, chain_file: Path) -> int:
    """Peak RSS (KiB) of ``agui-pipes run --format sse`` over ``path``, output discarded."""
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            _PEAK_WRAPPER,
            "run",
            "--config",
            str(chain_file),
            "--format",
            "sse",
            "--quiet",
            "--output",
            os.devnull,
            str(path),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"agui-pipes run failed: {done.stderr[-2000:]}")
    return int(done.stderr.split("PEAK ")[-1].split()[0])


def stream_ndjson(events: int, state_heavy: bool) -> Path:
    from streams import write_ndjson

    OUT.mkdir(exist_ok=True)
    path = OUT / f"memory-{events}{'-state-heavy' if state_heavy else ''}.ndjson"
    if not path.exists():
        write_ndjson(path, events, stream="state-heavy" if state_heavy else "realistic")
    return path


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--events", type=int, default=800_000, help="events per run")
    parser.add_argument("--state-heavy", action="store_true")
    parser.add_argument(
        "--chain", type=Path, help="gateway chain file (default: the suite's gateway-path stages)"
    )
    parser.add_argument(
        "--clients",
        type=int,
        default=1,
        help="concurrent runs per round (default 1: sequential runs)",
    )
    parser.add_argument(
        "--framed",
        action="store_true",
        help="read as bench_serving.py's client does (slower, splits frames)",
    )
    parser.add_argument(
        "--diagnose",
        action="store_true",
        help="dump objects, caches and heap figures from the gateway per run",
    )
    parser.add_argument(
        "--trim-probe",
        action="store_true",
        help="(with --diagnose) call malloc_trim(0) in the gateway after each "
        "dump and report the RSS it gives back",
    )
    parser.add_argument(
        "--tracemalloc",
        action="store_true",
        help="(with --diagnose) trace allocations, report the top growth",
    )
    parser.add_argument(
        "--env",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="environment of the gateway process (repeatable)",
    )
    parser.add_argument(
        "--no-run-rss", action="store_true", help="skip the peak-RSS check of `agui-pipes run`"
    )
    parser.add_argument(
        "--run-rss-events",
        default="160000,800000",
        help="stream lengths for the peak-RSS check of `agui-pipes run`",
    )
    parser.add_argument("--json", type=Path, help="write the figures to this JSON file")
    parser.add_argument(
        "--fresh-ids",
        action="store_true",
        help="every run gets its own run, message and tool-call ids",
    )
    parser.add_argument("--_role", help=argparse.SUPPRESS)
    parser.add_argument("--_port", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--_dir", help=argparse.SUPPRESS)
    parser.add_argument("--_trace", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("rest", nargs="*", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args._role == "upstream":
        upstream_main(args._port, Path(args._dir), args._trace)
        return 0
    if args._role == "gateway":
        return gateway_main(args.rest, args._dir, args._trace)

    report: dict[str, Any] = {}
    OUT.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        chain_file = args.chain
        if chain_file is None:
            chain_file = Path(tmp) / "chain.yaml"
            chain_file.write_text(GATEWAY_CHAIN)
        body_file = OUT / f"memory-{args.events}{'-state-heavy' if args.state_heavy else ''}.sse"
        if not body_file.exists():
            body_file.write_bytes(sse_body(args.events, args.state_heavy))
        print(
            f"stream: {args.events:,} events per run, "
            f"{body_file.stat().st_size / 1e6:.0f} MB of SSE",
            flush=True,
        )
        report["gateway"] = gateway_runs(args, body_file, chain_file)
        if not args.no_run_rss:
            peaks = {}
            sizes = [int(n) for n in args.run_rss_events.split(",") if n.strip()]
            for events in sizes:
                peaks[events] = run_peak_rss(stream_ndjson(events, args.state_heavy), chain_file)
                print(
                    f"agui-pipes run, {events:,} events: peak RSS {peaks[events] / 1024:.1f} MiB",
                    flush=True,
                )
            print(
                f"peak RSS {sizes[-1]:,} / {sizes[0]:,} events: "
                f"{peaks[sizes[-1]] / peaks[sizes[0]]:.3f}"
            )
            report["run_peak_rss_kib"] = peaks
    if args.json is not None:
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
