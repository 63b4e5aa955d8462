"""Inspector page in a real browser: load, scrolling and memory on a 100k-event file.

    python benchmarks/bench_inspector_browser.py                 # 100k events, 5 repeats
    python benchmarks/bench_inspector_browser.py --events 20000 --repeat 3

Needs a chromium binary (``chromium``, ``chromium-browser`` or ``AGUI_PIPES_CHROMIUM``)
and the ``playwright`` package (the test extra). Two ``agui-pipes inspect --no-open``
servers run side by side: one on benchmarks/streams.py's realistic stream
(``--events``), one on tests/data/demo-run.ndjson (141 events) as the baseline, and
every measurement alternates between them (medians of the repeats), so the ratio
holds on a loaded machine while the absolute times do not.

* **first rows**: a fresh page, from navigation to the first rendered rows of the
  events table (``#events``) and of the timeline (``#timeline``).
* **jump**: setting the events table's scroll position to a random place in the
  stream until that row is rendered (a page fetch of 200 rows plus the redraw).
* **scroll**: scrolling the table one screen per animation frame for 200 frames;
  the median and 95th percentile frame time and how many frames still showed
  placeholder rows (pages not fetched yet).
  Then one screen per 100 ms (a fast wheel): how many screens still showed
  placeholders 100 ms after scrolling there.
* **DOM and heap**: the number of elements in the page after scrolling, and the JS
  heap used after a forced garbage collection (CDP ``Runtime.getHeapUsage``).

The server's own cost (building the model) is bench_inspector.py's; here it shows
only as the time until the server answers. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

from streams import write_ndjson  # noqa: E402

OUT = HERE / "out"
DEMO = ROOT / "tests" / "data" / "demo-run.ndjson"


def _chromium() -> str:
    explicit = os.environ.get("AGUI_PIPES_CHROMIUM")
    if explicit:
        return explicit
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        found = shutil.which(name)
        if found:
            return found
    sys.exit("no chromium binary on PATH: apt-get install chromium, or set AGUI_PIPES_CHROMIUM")


class _Server:
    """``agui-pipes inspect FILE --no-open --port 0``; ``ready_s`` until it answered."""

    def __init__(self, path: Path) -> None:
        start = time.perf_counter()
        env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
        self.process = subprocess.Popen(
            [sys.executable, "-m", "agui_pipes", "inspect", str(path), "--no-open", "--port", "0"],
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        found: list[str] = []

        def read() -> None:
            assert self.process.stdout is not None
            for line in self.process.stdout:
                match = re.search(r"https?://\S+", line)
                if match:
                    found.append(match.group(0))
                    return

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        reader.join(600)
        if not found:
            self.close()
            sys.exit(f"agui-pipes inspect {path} printed no URL")
        self.url = found[0]
        while True:
            try:
                with urllib.request.urlopen(self.url + "api/runs", timeout=5) as response:
                    response.read()
                break
            except OSError:
                time.sleep(0.05)
        self.ready_s = time.perf_counter() - start

    def close(self) -> None:
        self.process.terminate()
        self.process.wait(10)


_FIRST_ROW = {"events": "[data-testid=event-row]", "timeline": "[data-testid=lane]"}

_STEADY_JS = """async ([steps, step, pause]) => {
  const el = document.getElementById('ev-scroll');
  let pending = 0;
  for (let i = 0; i < steps; i++) {
    el.scrollTop += step;
    await new Promise(r => setTimeout(r, pause));
    if (el.querySelector('.ev-row.pending')) pending++;
  }
  return pending;
}"""

_SCROLL_JS = """async ([frames, step]) => {
  const el = document.getElementById('ev-scroll');
  const times = []; let pending = 0;
  let last = performance.now();
  for (let i = 0; i < frames; i++) {
    el.scrollTop += step;
    await new Promise(r => requestAnimationFrame(r));
    const now = performance.now();
    times.push(now - last); last = now;
    if (el.querySelector('.ev-row.pending')) pending++;
  }
  return {times, pending};
}"""


def _first_rows(browser: Any, url: str, view: str) -> float:
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    start = time.perf_counter()
    page.goto(url + "#" + view)
    page.wait_for_selector(_FIRST_ROW[view], timeout=120_000)
    elapsed = time.perf_counter() - start
    page.close()
    return elapsed


def _open_events(browser: Any, url: str) -> Any:
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    page.goto(url + "#events")
    page.wait_for_selector(_FIRST_ROW["events"], timeout=120_000)
    return page


def _jump(page: Any, index: int) -> float:
    start = time.perf_counter()
    page.evaluate(
        "i => { const el = document.getElementById('ev-scroll'); el.scrollTop = i * 22; }", index
    )
    page.wait_for_selector(f"[data-testid=event-row][data-index='{index}']", timeout=60_000)
    return time.perf_counter() - start


def _heap_mb(page: Any) -> tuple[float, int]:
    cdp = page.context.new_cdp_session(page)
    cdp.send("HeapProfiler.collectGarbage")
    used = cdp.send("Runtime.getHeapUsage")["usedSize"] / 1e6
    nodes = page.evaluate("document.getElementsByTagName('*').length")
    cdp.detach()
    return used, nodes


def _ms(values: list[float]) -> str:
    return f"{statistics.median(values) * 1000:7.1f} ms"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()

    from playwright.sync_api import sync_playwright

    path = OUT / f"inspector-{args.events}-{args.seed}.ndjson"
    if not path.exists():
        write_ndjson(path, args.events, args.seed)
    events = sum(1 for _ in path.open("rb"))
    big, small = _Server(path), _Server(DEMO)
    print(
        f"stream: {events:,} events, {path.stat().st_size / 1e6:.1f} MB ({path.name}); "
        f"baseline: {DEMO.name} (141 events)"
    )
    print(f"server answering after {big.ready_s:.1f} s (baseline {small.ready_s:.1f} s)")
    rng = random.Random(args.seed)
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=_chromium(), args=["--no-sandbox"])
            first: dict[tuple[str, str], list[float]] = {}
            for _ in range(args.repeat):
                for view in ("events", "timeline"):
                    for name, server in (("big", big), ("small", small)):
                        first.setdefault((view, name), []).append(
                            _first_rows(browser, server.url, view)
                        )
            for view in ("events", "timeline"):
                b, s = first[(view, "big")], first[(view, "small")]
                print(
                    f"first rows, {view:8}: {_ms(b)}  (141 events: {_ms(s)}; "
                    f"ratio {statistics.median(b) / statistics.median(s):.2f}x)"
                )

            page = _open_events(browser, big.url)
            jumps = [_jump(page, rng.randrange(events)) for _ in range(args.repeat * 10)]
            print(
                f"jump to a random row: {_ms(jumps)} median, "
                f"{max(jumps) * 1000:.1f} ms worst of {len(jumps)}"
            )
            frames: list[float] = []
            pending = 0
            for _ in range(args.repeat):
                result = page.evaluate(_SCROLL_JS, [200, 900])
                frames += result["times"]
                pending += result["pending"]
            frames.sort()
            p95 = frames[int(len(frames) * 0.95)]
            print(
                f"scroll one screen per frame: {statistics.median(frames):.1f} ms median "
                f"frame, {p95:.1f} ms p95, {pending} of {len(frames)} frames showed "
                f"placeholder rows"
            )
            steady = sum(page.evaluate(_STEADY_JS, [50, 900, 100]) for _ in range(args.repeat))
            print(
                f"scroll one screen per 100 ms: {steady} of {args.repeat * 50} screens still "
                f"showed placeholder rows 100 ms after the scroll"
            )
            heap, nodes = _heap_mb(page)
            page.close()
            small_page = _open_events(browser, small.url)
            small_heap, small_nodes = _heap_mb(small_page)
            small_page.close()
            print(
                f"after scrolling: {nodes} elements, JS heap {heap:.1f} MB "
                f"(141 events: {small_nodes} elements, {small_heap:.1f} MB)"
            )
            browser.close()
    finally:
        big.close()
        small.close()


if __name__ == "__main__":
    main()
