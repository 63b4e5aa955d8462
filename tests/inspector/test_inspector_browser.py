"""The inspector page in a real browser: Debian's chromium driven by Playwright.

Each test starts the real ``agui-pipes inspect FILE --no-open --port 0`` as a
subprocess and drives the page it serves, so the page, the JSON API and the
CLI are exercised together. Browsers cannot be downloaded here, so Playwright
gets the system chromium through ``executable_path``; without one the module
is skipped, loudly. With ``AGUI_PIPES_SCREENSHOTS=1`` the tests also write the
documentation's screenshots (docs/images/inspector-*.png).
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests._browser import Inspector, find_chromium

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "tests" / "data" / "demo-run.ndjson"
HIDE_INTERNAL = ROOT / "examples" / "chains" / "hide-internal-tools.yaml"
IMAGES = ROOT / "docs" / "images"
SHOTS = os.environ.get("AGUI_PIPES_SCREENSHOTS") == "1"


CHROMIUM = find_chromium()
if CHROMIUM is None:
    pytest.skip(
        "INSPECTOR PAGE NOT TESTED: no chromium binary on PATH (tried chromium, "
        "chromium-browser, google-chrome; set AGUI_PIPES_CHROMIUM=/path/to/chrome or "
        "`apt-get install chromium`; .ci/run installs it)",
        allow_module_level=True,
    )

from playwright.sync_api import Browser, Page, expect, sync_playwright  # noqa: E402

# Every test here is synchronous: the async backends of the rest of the suite
# do not apply (Playwright's sync API runs its own loop in a thread).


def _lines(path: Path) -> list[dict[str, Any]]:
    text = path.read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines() if line.strip()]


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with sync_playwright() as playwright:
        # --no-sandbox: CI containers run as root, where chromium's sandbox refuses to start.
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield launched
        launched.close()


@pytest.fixture(scope="module")
def demo() -> Iterator[Inspector]:
    inspector = Inspector(DEMO)
    yield inspector
    inspector.close()


@pytest.fixture(scope="module")
def demo_chain() -> Iterator[Inspector]:
    inspector = Inspector(DEMO, "--config", str(HIDE_INTERNAL))
    yield inspector
    inspector.close()


def _open(browser: Browser, url: str, view: str, height: int = 900) -> Page:
    page = browser.new_page(viewport={"width": 1400, "height": height})
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto(url)
    page.wait_for_selector("body[data-ready=true]", timeout=20000)
    page.click(f"[data-testid=tab-{view}]")
    expect(page.get_by_test_id(f"view-{view}")).to_be_visible()
    page.set_default_timeout(10000)
    page.errors = errors  # type: ignore[attr-defined]
    return page


def _shot(page: Page, name: str) -> None:
    if SHOTS:
        IMAGES.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(IMAGES / f"inspector-{name}.png"))


def _no_page_errors(page: Page) -> None:
    assert page.errors == [], page.errors  # type: ignore[attr-defined]
    expect(page.get_by_test_id("error")).to_be_hidden()


def test_the_timeline_has_a_row_for_every_message_tool_call_and_subagent(
    browser: Browser, demo: Inspector
) -> None:
    events = _lines(DEMO)
    wanted = (
        {("message", e["messageId"]) for e in events if e["type"] == "TEXT_MESSAGE_START"}
        | {("reasoning", e["messageId"]) for e in events if e["type"] == "REASONING_MESSAGE_START"}
        | {("tool_call", e["toolCallId"]) for e in events if e["type"] == "TOOL_CALL_START"}
        | {("subagent", e["subagentRunId"]) for e in events if e["type"] == "SUBAGENT_STARTED"}
    )
    page = _open(browser, demo.url, "timeline", height=1000)
    lanes = page.get_by_test_id("lane")
    expect(lanes.first).to_be_visible()
    shown = lanes.evaluate_all(
        "els => els.map(e => [e.dataset.kind, e.dataset.rawId, Number(e.dataset.depth),"
        " e.dataset.parentRawId || null])"
    )
    by_id = {(kind, raw): (depth, parent) for kind, raw, depth, parent in shown}
    missing = wanted - set(by_id)
    assert not missing, f"no timeline row for {sorted(missing)}; rows: {shown}"
    # Nested subagents sit under what spawned them: the tool call, then the outer subagent.
    for event in events:
        if event["type"] != "SUBAGENT_STARTED":
            continue
        depth, parent = by_id[("subagent", event["subagentRunId"])]
        spawner = event.get("parentToolCallId") or event.get("parentSubagentRunId")
        assert parent == spawner
        spawner_kind = "tool_call" if event.get("parentToolCallId") else "subagent"
        assert depth == by_id[(spawner_kind, spawner)][0] + 1
    _shot(page, "timeline")
    _no_page_errors(page)
    page.close()


def test_clicking_a_timeline_bar_selects_its_first_event(browser: Browser, demo: Inspector) -> None:
    events = _lines(DEMO)
    start = next(
        i
        for i, e in enumerate(events)
        if e["type"] == "TOOL_CALL_START" and e["toolCallName"] == "ask_local_expert"
    )
    page = _open(browser, demo.url, "timeline")
    page.locator("[data-testid=lane][data-raw-id=demo-run-call-3] [data-testid=lane-bar]").click()
    expect(page.get_by_test_id("view-events")).to_be_visible()
    detail = page.get_by_test_id("event-json")
    expect(detail).to_contain_text("ask_local_expert")
    assert json.loads(detail.inner_text()) == events[start]
    expect(page.locator(f"[data-testid=event-row][data-index='{start}']")).to_have_class(
        re.compile(r"\bselected\b")
    )
    _no_page_errors(page)
    page.close()


def _domain(page: Page) -> tuple[float, float]:
    shown = page.get_by_test_id("tl-range")
    return float(shown.get_attribute("data-lo") or "nan"), float(
        shown.get_attribute("data-hi") or "nan"
    )


def test_the_timeline_zooms_with_the_wheel_and_pans_by_dragging(
    browser: Browser, demo: Inspector
) -> None:
    page = _open(browser, demo.url, "timeline")
    scroller = page.get_by_test_id("timeline")
    expect(page.get_by_test_id("tl-range")).to_have_attribute("data-lo", "0")
    full = _domain(page)
    box = scroller.bounding_box()
    assert box is not None
    page.mouse.move(box["x"] + box["width"] * 0.6, box["y"] + 200)
    for _ in range(4):
        page.mouse.wheel(0, -120)
    expect(page.get_by_test_id("tl-range")).not_to_have_attribute("data-hi", str(full[1]))
    page.wait_for_timeout(200)  # let the last wheel events land
    lo, hi = _domain(page)
    assert full[0] < lo < hi < full[1], (full, lo, hi)
    page.mouse.down()
    page.mouse.move(box["x"] + box["width"] * 0.6 + 200, box["y"] + 200, steps=5)
    page.mouse.up()
    lo2, hi2 = _domain(page)
    assert lo2 < lo, "dragging right shows earlier events"
    assert abs((hi2 - lo2) - (hi - lo)) < 1e-6, "panning keeps the zoom"
    page.get_by_test_id("tl-reset").click()
    assert _domain(page) == full
    _no_page_errors(page)
    page.close()


def test_fit_zooms_the_timeline_to_the_rows_in_view(browser: Browser, demo: Inspector) -> None:
    page = _open(browser, demo.url, "timeline", height=260)
    full = _domain(page)
    # Scroll the run and the first messages out of view: the tool calls and subagents remain.
    page.get_by_test_id("timeline").evaluate("el => { el.scrollTop = 5 * 22; }")
    page.get_by_test_id("tl-fit").click()
    lo, hi = _domain(page)
    starts = page.locator("[data-testid=lane-bar]").evaluate_all(
        "els => els.map(e => Number(e.dataset.start))"
    )
    assert full[0] < lo and hi < full[1], (full, lo, hi)
    assert lo <= 47 <= hi  # search_places, in view, starts at event 47
    assert starts, "bars are still drawn"
    _no_page_errors(page)
    page.close()


def test_a_timed_stream_is_drawn_on_a_time_axis(browser: Browser, tmp_path: Path) -> None:
    lines = [
        {"type": "RUN_STARTED", "threadId": "t", "runId": "r", "timestamp": 1000},
        {"type": "TEXT_MESSAGE_START", "messageId": "m", "role": "assistant", "timestamp": 1001},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "hi", "timestamp": 1002},
        {"type": "TEXT_MESSAGE_END", "messageId": "m", "timestamp": 1003},
        {"type": "TOOL_CALL_START", "toolCallId": "c", "toolCallName": "slow", "timestamp": 9000},
        {"type": "TOOL_CALL_END", "toolCallId": "c", "timestamp": 9001},
        {
            "type": "TOOL_CALL_RESULT",
            "toolCallId": "c",
            "messageId": "r1",
            "content": "ok",
            "timestamp": 9002,
        },
        {"type": "RUN_FINISHED", "threadId": "t", "runId": "r", "timestamp": 10000},
    ]
    path = tmp_path / "timed.ndjson"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    inspector = Inspector(path)
    try:
        page = _open(browser, inspector.url, "timeline")
        bar = page.locator("[data-testid=lane][data-raw-id=c] [data-testid=lane-bar]")
        run = page.locator("[data-testid=lane][data-kind=run] [data-testid=lane-bar]")

        def fraction() -> float:
            x = float(bar.get_attribute("x") or "nan")
            x0 = float(run.get_attribute("x") or "nan")
            width = float(run.get_attribute("width") or "nan")
            return (x - x0) / width

        expect(page.get_by_test_id("tl-axis")).to_have_value("time")
        expect(page.get_by_test_id("tl-range")).to_contain_text("ms")
        assert fraction() == pytest.approx(8000 / 9000, abs=0.01)  # t=9000 in 1000..10000
        page.get_by_test_id("tl-axis").select_option("index")
        expect(page.get_by_test_id("tl-range")).to_contain_text("events")
        assert fraction() == pytest.approx(4 / 7, abs=0.01)  # event 4 of 0..7
        _no_page_errors(page)
        page.close()
    finally:
        inspector.close()


def test_clicking_an_event_shows_its_json(browser: Browser, demo: Inspector) -> None:
    events = _lines(DEMO)
    page = _open(browser, demo.url, "events")
    expect(page.get_by_test_id("events-count")).to_contain_text(f"{len(events)} of {len(events)}")
    index = next(i for i, e in enumerate(events) if e["type"] == "STATE_SNAPSHOT")
    page.locator(f"[data-testid=event-row][data-index='{index}']").click()
    detail = page.get_by_test_id("event-json")
    expect(detail).to_contain_text("STATE_SNAPSHOT")
    assert json.loads(detail.inner_text()) == events[index]
    _shot(page, "events")
    _no_page_errors(page)
    page.close()


def test_the_events_table_filters_by_type_id_and_text(browser: Browser, demo: Inspector) -> None:
    events = _lines(DEMO)
    page = _open(browser, demo.url, "events")
    page.get_by_test_id("filter-type").select_option("TOOL_CALL_START")
    rows = page.get_by_test_id("event-row")
    expect(rows).to_have_count(sum(e["type"] == "TOOL_CALL_START" for e in events))
    assert set(rows.evaluate_all("els => els.map(e => e.dataset.type)")) == {"TOOL_CALL_START"}
    page.get_by_test_id("filter-type").select_option("")
    page.get_by_test_id("filter-id").fill("demo-run-call-2")
    expect(rows).to_have_count(sum("demo-run-call-2" in e.values() for e in events))
    page.get_by_test_id("filter-id").fill("")
    page.get_by_test_id("filter-text").fill("Lisbon")
    expected = [i for i, e in enumerate(events) if "lisbon" in json.dumps(e).lower()]
    expect(rows).to_have_count(len(expected))
    assert rows.evaluate_all("els => els.map(e => Number(e.dataset.index))") == expected
    # The arrow keys walk the filtered rows.
    rows.first.click()
    page.get_by_test_id("events-table").press("ArrowDown")
    expect(page.get_by_test_id("event-detail")).to_contain_text(f"#{expected[1]} ")
    page.get_by_test_id("events-table").press("ArrowDown")
    expect(page.get_by_test_id("event-detail")).to_contain_text(f"#{expected[2]} ")
    page.get_by_test_id("events-table").press("ArrowUp")
    expect(page.get_by_test_id("event-detail")).to_contain_text(f"#{expected[1]} ")
    assert json.loads(page.get_by_test_id("event-json").inner_text()) == events[expected[1]]
    _no_page_errors(page)
    page.close()


def test_the_events_table_keeps_only_the_visible_rows_in_the_dom(
    browser: Browser, tmp_path: Path
) -> None:
    n = 5000
    lines = [
        {"type": "RUN_STARTED", "threadId": "t", "runId": "r"},
        {"type": "TEXT_MESSAGE_START", "messageId": "m", "role": "assistant"},
    ]
    lines += [
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": f"d{i} "} for i in range(n)
    ]
    lines += [
        {"type": "TEXT_MESSAGE_END", "messageId": "m"},
        {"type": "RUN_FINISHED", "threadId": "t", "runId": "r"},
    ]
    path = tmp_path / "long.ndjson"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    inspector = Inspector(path)
    try:
        page = _open(browser, inspector.url, "events")
        rows = page.get_by_test_id("event-row")
        expect(rows.first).to_be_visible()
        assert rows.count() < 100
        page.get_by_test_id("events-table").evaluate("el => { el.scrollTop = el.scrollHeight; }")
        last = page.locator(f"[data-testid=event-row][data-index='{len(lines) - 1}']")
        expect(last).to_be_visible()
        expect(last).to_contain_text("RUN_FINISHED")
        assert rows.count() < 100
        _no_page_errors(page)
        page.close()
    finally:
        inspector.close()


def test_the_pipeline_view_lists_what_filter_tool_calls_dropped(
    browser: Browser, demo_chain: Inspector
) -> None:
    events = _lines(DEMO)
    hidden = {
        e["toolCallId"]
        for e in events
        if e["type"] == "TOOL_CALL_START" and e["toolCallName"].startswith("internal_")
    }
    dropped = [i for i, e in enumerate(events) if e.get("toolCallId") in hidden]
    assert dropped
    page = _open(browser, demo_chain.url, "pipeline")
    stage = page.locator("[data-testid=stage][data-stage='0']")
    expect(stage).to_contain_text(re.compile(r"filter_?tool_?calls", re.IGNORECASE))
    stage.get_by_test_id("stage-count-dropped").click()
    rows = page.get_by_test_id("stage-row")
    expect(rows).to_have_count(len(dropped))
    assert set(rows.evaluate_all("els => els.map(e => e.dataset.kind)")) == {"dropped"}
    assert rows.evaluate_all("els => els.map(e => e.dataset.type)") == [
        events[i]["type"] for i in dropped
    ]
    rows.first.click()
    shown = json.loads(page.get_by_test_id("stage-event-json").inner_text())
    assert shown == events[dropped[0]]
    _shot(page, "pipeline")
    page.get_by_test_id("stage-open-event").click()  # stage 0's input is the file
    expect(page.get_by_test_id("view-events")).to_be_visible()
    assert json.loads(page.get_by_test_id("event-json").inner_text()) == events[dropped[0]]
    _no_page_errors(page)
    page.close()


def test_the_pipeline_view_shows_the_diff_of_a_changed_event(
    browser: Browser, tmp_path: Path
) -> None:
    chain = tmp_path / "chain.yaml"
    chain.write_text(
        "version: 1\ntransformers:\n"
        "  - type: filter_tool_calls\n    deny: ['internal_*']\n"
        "  - type: redact\n    patterns: ['Lisbon']\n",
        encoding="utf-8",
    )
    inspector = Inspector(DEMO, "--config", str(chain))
    try:
        page = _open(browser, inspector.url, "pipeline")
        expect(page.get_by_test_id("stage")).to_have_count(2)
        second = page.locator("[data-testid=stage][data-stage='1']")
        expect(second).to_contain_text(re.compile("redact", re.IGNORECASE))
        second.get_by_test_id("stage-count-changed").click()
        rows = page.get_by_test_id("stage-row")
        expect(rows.first).to_be_visible()
        assert set(rows.evaluate_all("els => els.map(e => e.dataset.kind)")) == {"changed"}
        page.locator("[data-testid=stage-row][data-type=STATE_SNAPSHOT]").first.click()
        diff = page.get_by_test_id("stage-diff")
        expect(diff).to_contain_text("/snapshot/city")
        expect(diff).to_contain_text("[REDACTED]")
        shown = json.loads(page.get_by_test_id("stage-event-json").inner_text())
        assert shown["snapshot"]["city"] == "Lisbon"  # the input event, before the stage
        _shot(page, "pipeline-diff")
        _no_page_errors(page)
        page.close()
    finally:
        inspector.close()


def test_without_a_chain_the_pipeline_view_says_how_to_get_one(
    browser: Browser, demo: Inspector
) -> None:
    page = _open(browser, demo.url, "pipeline")
    expect(page.get_by_test_id("view-pipeline")).to_contain_text("--config")
    expect(page.get_by_test_id("stage")).to_have_count(0)
    page.close()


def _state_leaf(page: Page, key: str) -> str:
    return page.locator(f"[data-testid=state-leaf][data-path-key='{key}']").first.inner_text()


def test_the_scrubber_changes_the_shown_state_and_messages(
    browser: Browser, demo: Inspector
) -> None:
    events = _lines(DEMO)
    first_snapshot = next(i for i, e in enumerate(events) if e["type"] == "STATE_SNAPSHOT")
    page = _open(browser, demo.url, "result")
    transcript = page.get_by_test_id("transcript")
    expect(transcript).to_have_attribute("data-at", str(len(events) - 1))
    assert _state_leaf(page, "status") == 'status: "ready"'
    # The full transcript: every tool call with its result, subagents nested under their call.
    calls = [e["toolCallId"] for e in events if e["type"] == "TOOL_CALL_START"]
    for call in calls:
        expect(page.locator(f"[data-testid=transcript-toolcall][data-id='{call}']")).to_have_count(
            1
        )
    expect(page.get_by_test_id("transcript-result")).to_have_count(len(calls))
    outer = page.locator(
        "[data-testid=transcript-toolcall][data-id=demo-run-call-3] "
        "~ [data-testid=transcript-subagent][data-subagent=demo-run-sub-1]"
    )
    expect(outer).to_have_count(1)
    expect(
        outer.locator("[data-testid=transcript-subagent][data-subagent=demo-run-sub-2]")
    ).to_have_count(1)
    _shot(page, "result")

    page.get_by_test_id("scrubber").fill(str(first_snapshot))
    expect(transcript).to_have_attribute("data-at", str(first_snapshot))
    assert _state_leaf(page, "status") == 'status: "researching"'
    expect(page.get_by_test_id("transcript-toolcall")).to_have_count(0)
    page.get_by_test_id("scrub-prev").click()
    expect(page.get_by_test_id("state-tree")).to_have_attribute("data-at", str(first_snapshot - 1))
    expect(page.get_by_test_id("state-leaf")).to_have_count(0)  # {} before the first snapshot
    _no_page_errors(page)
    page.close()


def test_a_rejected_stream_shows_the_violation_at_its_event(
    browser: Browser, tmp_path: Path
) -> None:
    events = _lines(DEMO)
    bad = 20
    ghost = {"type": "TEXT_MESSAGE_CONTENT", "messageId": "ghost", "delta": "boo"}
    lines = [*events[:bad], ghost, *events[bad:]]
    path = tmp_path / "rejected.ndjson"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    inspector = Inspector(path)
    try:
        page = _open(browser, inspector.url, "events")
        expect(page.get_by_test_id("run-info")).to_have_attribute("data-outcome", "rejected")
        problem = page.get_by_test_id("problem-violation")
        expect(problem).to_have_count(1)
        expect(problem).to_have_attribute("data-index", str(bad))
        expect(problem).to_contain_text("ghost")
        row = page.locator(f"[data-testid=event-row][data-index='{bad}']")
        expect(row).to_have_attribute("data-flags", re.compile(r"\bviolation\b"))
        row.click()
        expect(page.get_by_test_id("detail-violation")).to_contain_text("ghost")
        assert json.loads(page.get_by_test_id("event-json").inner_text()) == ghost
        _shot(page, "violation")
        page.click("[data-testid=tab-timeline]")
        expect(page.get_by_test_id("timeline-violation")).to_have_count(1)
        _no_page_errors(page)
        page.close()
    finally:
        inspector.close()


def test_event_text_is_shown_as_text_never_as_markup(browser: Browser, tmp_path: Path) -> None:
    markup = '<img id="pwned" src="x" onerror="document.title=\'pwned\'"><b id="bold">b</b>'
    lines = [
        {"type": "RUN_STARTED", "threadId": "t", "runId": "r"},
        {"type": "TEXT_MESSAGE_START", "messageId": markup, "role": "assistant"},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": markup, "delta": markup},
        {"type": "TEXT_MESSAGE_END", "messageId": markup},
        {"type": "TOOL_CALL_START", "toolCallId": "c1", "toolCallName": markup},
        {"type": "TOOL_CALL_ARGS", "toolCallId": "c1", "delta": json.dumps({"q": markup})},
        {"type": "TOOL_CALL_END", "toolCallId": "c1"},
        {"type": "TOOL_CALL_RESULT", "toolCallId": "c1", "messageId": "t1", "content": markup},
        {"type": "STATE_SNAPSHOT", "snapshot": {markup: markup}},
        {"type": "RUN_FINISHED", "threadId": "t", "runId": "r"},
    ]
    path = tmp_path / "markup.ndjson"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    inspector = Inspector(path)
    try:
        page = _open(browser, inspector.url, "timeline")
        for view in ("timeline", "events", "result"):
            page.click(f"[data-testid=tab-{view}]")
            if view == "events":
                page.locator("[data-testid=event-row][data-index='2']").click()
                expect(page.get_by_test_id("event-json")).to_contain_text("<b id")
            if view == "result":
                expect(page.get_by_test_id("transcript")).to_contain_text('<b id="bold">')
            assert page.locator("#pwned, #bold").count() == 0
        assert page.title() != "pwned"
        _no_page_errors(page)
        page.close()
    finally:
        inspector.close()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def test_serve_inspect_shows_a_run_live_while_it_streams(browser: Browser) -> None:
    port = _free_port()
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    # --pace: the demo agent pauses between words, so the run is live for seconds.
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "agui_pipes",
            "serve",
            "--demo",
            "--inspect",
            "--pace",
            "0.04",
            "--port",
            str(port),
            "--log-level",
            "warning",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=env,
        cwd=ROOT,
    )
    base = f"http://127.0.0.1:{port}"
    streamed: list[str] = []
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(f"{base}/inspect/api/runs", timeout=2) as response:
                    response.read()
                break
            except OSError:
                assert process.poll() is None, process.communicate()[1]
                assert time.monotonic() < deadline, "serve --inspect did not come up"
                time.sleep(0.1)
        # Without the trailing slash: redirected, and the page's relative URLs still resolve.
        page = _open(browser, f"{base}/inspect", "events")
        expect(page.get_by_test_id("run-info")).to_contain_text("no runs yet")

        body = json.dumps(
            {
                "threadId": "t1",
                "runId": "r1",
                "state": {},
                "messages": [],
                "tools": [],
                "context": [],
                "forwardedProps": {},
            }
        ).encode()

        def post() -> None:
            request = urllib.request.Request(
                f"{base}/", data=body, headers={"Content-Type": "application/json"}
            )
            with urllib.request.urlopen(request, timeout=60) as response:
                streamed.extend(
                    line
                    for line in response.read().decode().splitlines()
                    if line.startswith("data:")
                )

        client = threading.Thread(target=post)
        client.start()
        info = page.get_by_test_id("run-info")
        expect(info).to_have_attribute("data-outcome", "live", timeout=15000)
        rows = page.get_by_test_id("event-row")
        expect(rows.first).to_be_visible()
        client.join(60)
        assert streamed, "the demo run streamed nothing"
        expect(info).to_have_attribute("data-outcome", "finished", timeout=15000)
        expect(page.get_by_test_id("events-count")).to_contain_text(
            f"{len(streamed)} of {len(streamed)} events"
        )
        page.click("[data-testid=tab-timeline]")
        expect(page.locator("[data-testid=lane][data-kind=subagent]").first).to_be_visible()
        _no_page_errors(page)
        page.close()
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.communicate(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.communicate()


def test_a_long_run_draws_only_what_is_in_view(browser: Browser, tmp_path: Path) -> None:
    n = 350
    lines: list[dict[str, Any]] = [{"type": "RUN_STARTED", "threadId": "t", "runId": "r"}]
    for i in range(n):
        lines += [
            {"type": "TEXT_MESSAGE_START", "messageId": f"m{i}", "role": "assistant"},
            {"type": "TEXT_MESSAGE_CONTENT", "messageId": f"m{i}", "delta": f"number {i}"},
            {"type": "TEXT_MESSAGE_END", "messageId": f"m{i}"},
        ]
    lines.append({"type": "RUN_FINISHED", "threadId": "t", "runId": "r"})
    path = tmp_path / "long-chat.ndjson"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    inspector = Inspector(path)
    try:
        page = _open(browser, inspector.url, "result")
        messages = page.get_by_test_id("transcript-message")
        expect(messages).to_have_count(300)
        expect(messages.last).to_have_attribute("data-id", f"m{n - 1}")
        expect(messages.first).to_have_attribute("data-id", f"m{n - 300}")
        page.get_by_test_id("transcript-show-all").click()
        expect(messages).to_have_count(n)
        expect(messages.first).to_have_attribute("data-id", "m0")
        # The timeline draws only the lanes in view, too (351 lanes here).
        page.click("[data-testid=tab-timeline]")
        lanes = page.get_by_test_id("lane")
        expect(lanes.first).to_be_visible()
        assert lanes.count() < 100
        page.get_by_test_id("timeline").evaluate("el => { el.scrollTop = el.scrollHeight; }")
        expect(page.locator(f"[data-testid=lane][data-raw-id=m{n - 1}]")).to_be_visible()
        assert lanes.count() < 100
        _no_page_errors(page)
        page.close()
    finally:
        inspector.close()


def test_warnings_are_marked_at_their_events(browser: Browser, tmp_path: Path) -> None:
    events = _lines(DEMO)
    at = 40
    odd = {"type": "MADE_UP_EVENT", "value": 1}
    lines = [*events[:at], odd, *events[at:]]
    path = tmp_path / "unknown-type.ndjson"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    inspector = Inspector(path)
    try:
        page = _open(browser, inspector.url, "events")
        expect(page.get_by_test_id("run-info")).to_have_attribute("data-outcome", "finished")
        warning = page.locator(f"[data-testid=problem-warning][data-index='{at}']")
        expect(warning).to_have_count(1)
        expect(warning).to_contain_text("MADE_UP_EVENT")
        warning.click()
        row = page.locator(f"[data-testid=event-row][data-index='{at}']")
        expect(row).to_have_attribute("data-flags", re.compile(r"\bwarning\b"))
        expect(row).to_have_class(re.compile(r"\bselected\b"))
        expect(page.get_by_test_id("detail-warning")).to_contain_text("MADE_UP_EVENT")
        expect(page.get_by_test_id("problem-violation")).to_have_count(0)
        _no_page_errors(page)
        page.close()
    finally:
        inspector.close()
