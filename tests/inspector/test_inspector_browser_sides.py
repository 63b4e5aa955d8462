"""The inspector page in Chromium: identity attribution, the input/output switch, odd ids.

Like test_inspector_browser.py, each test starts the real ``agui-pipes
inspect FILE --no-open --port 0`` and drives the page with Playwright on the
system chromium (``executable_path``); without one the module is skipped, loudly.
With ``AGUI_PIPES_SCREENSHOTS=1`` it also writes docs/images/inspector-sides.png.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests._browser import Inspector, find_chromium

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "tests" / "data" / "demo-run.ndjson"
IMAGES = ROOT / "docs" / "images"
SHOTS = os.environ.get("AGUI_PIPES_SCREENSHOTS") == "1"


CHROMIUM = find_chromium()
if CHROMIUM is None:
    pytest.skip(
        "INSPECTOR PAGE NOT TESTED: no chromium binary on PATH (set AGUI_PIPES_CHROMIUM or "
        "`apt-get install chromium`)",
        allow_module_level=True,
    )

from playwright.sync_api import Browser, Page, expect, sync_playwright  # noqa: E402

DEMO_EVENTS = [json.loads(line) for line in DEMO.read_text(encoding="utf-8").splitlines()]
GHOST = {"type": "TEXT_MESSAGE_CONTENT", "messageId": "ghost", "delta": "boo"}
DENIED_CALL = "demo-run-call-2"  # internal_price_lookup


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with sync_playwright() as playwright:
        # --no-sandbox: CI containers run as root, where chromium's sandbox refuses to start.
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield launched
        launched.close()


def _write(path: Path, events: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(e) + "\n" for e in events), encoding="utf-8")
    return path


def _chain(path: Path, body: str) -> str:
    path.write_text("version: 1\ntransformers:\n" + body, encoding="utf-8")
    return str(path)


def _open(browser: Browser, url: str, view: str) -> Page:
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto(url)
    page.wait_for_selector("body[data-ready=true]", timeout=20000)
    page.click(f"[data-testid=tab-{view}]")
    expect(page.get_by_test_id(f"view-{view}")).to_be_visible()
    page.set_default_timeout(10000)
    page.errors = errors  # type: ignore[attr-defined]
    return page


def _no_page_errors(page: Page) -> None:
    assert page.errors == [], page.errors  # type: ignore[attr-defined]
    expect(page.get_by_test_id("error")).to_be_hidden()


def test_redact_shows_event_9_changed_into_city_with_its_patch_and_no_drops(
    browser: Browser, tmp_path: Path
) -> None:
    chain = _chain(
        tmp_path / "chain.yaml",
        "  - type: filter_tool_calls\n    deny: ['internal_*']\n"
        "  - type: redact\n    patterns: ['Lisbon']\n    replacement: '[city]'\n",
    )
    inspector = Inspector(DEMO, "--config", chain)
    try:
        page = _open(browser, inspector.url, "pipeline")
        redact = page.locator("[data-testid=stage][data-stage='1']")
        expect(redact).to_contain_text(re.compile("redact", re.IGNORECASE))
        expect(redact.get_by_test_id("stage-count-dropped")).to_have_count(0)  # 0: no button
        expect(redact.get_by_test_id("stage-count-added")).to_have_count(0)
        redact.get_by_test_id("stage-count-changed").click()
        row = page.locator("[data-testid=stage-row][data-in='9']")
        expect(row).to_have_attribute("data-kind", "changed")
        expect(row.get_by_test_id("stage-row-reason")).to_contain_text("redacted")
        expect(page.locator("[data-testid=stage-row][data-in='22']")).to_have_count(0)
        row.click()
        diff = page.get_by_test_id("stage-diff")
        expect(diff).to_have_text('replace /delta = "[city]. "')
        shown = json.loads(page.get_by_test_id("stage-event-json").inner_text())
        assert shown["delta"] == "Lisbon. "  # the input, before the stage
        # A sentence released as one event lists the deltas it was made from.
        page.get_by_test_id("kind-merged").click()
        merged = page.get_by_test_id("stage-row")
        expect(merged.first).to_be_visible()
        assert set(merged.evaluate_all("els => els.map(e => e.dataset.kind)")) == {"merged"}
        merged.first.click()
        expect(page.get_by_test_id("stage-sources")).to_contain_text("#36, #37")
        _no_page_errors(page)
        page.close()
    finally:
        inspector.close()


def test_the_output_side_shows_what_the_client_receives_after_a_repair_chain(
    browser: Browser, tmp_path: Path
) -> None:
    broken = _write(tmp_path / "broken.ndjson", [*DEMO_EVENTS[:20], GHOST, *DEMO_EVENTS[20:]])
    chain = _chain(
        tmp_path / "chain.yaml",
        "  - type: filter_tool_calls\n    deny: ['internal_*']\n  - type: repair\n",
    )
    inspector = Inspector(broken, "--config", chain)
    try:
        page = _open(browser, inspector.url, "events")
        info = page.get_by_test_id("run-info")
        expect(info).to_have_attribute("data-outcome", "rejected")
        expect(info).to_contain_text("1 violation")
        expect(page.get_by_test_id("problem-violation")).to_have_count(1)
        page.get_by_test_id("filter-id").fill(DENIED_CALL)
        expect(page.get_by_test_id("event-row").first).to_be_visible()

        page.get_by_test_id("side-select").select_option("output")
        expect(info).to_have_attribute("data-outcome", "finished")
        expect(info).not_to_contain_text("violation")
        expect(page.get_by_test_id("problem-violation")).to_have_count(0)
        page.get_by_test_id("filter-id").fill("")
        page.get_by_test_id("filter-id").fill(DENIED_CALL)
        expect(page.get_by_test_id("events-count")).to_have_text(re.compile(r"^0 matching of "))
        expect(page.get_by_test_id("event-row")).to_have_count(0)
        if SHOTS:
            page.get_by_test_id("filter-id").fill("")
            expect(page.get_by_test_id("events-count")).to_have_text(
                re.compile(r"^\d+ of \d+ events$")
            )
            expect(page.get_by_test_id("event-row").first).to_be_visible()
            page.screenshot(path=str(IMAGES / "inspector-sides.png"))

        page.click("[data-testid=tab-timeline]")
        lanes = page.get_by_test_id("lane")
        expect(lanes.first).to_be_visible()
        expect(page.locator(f"[data-testid=lane][data-raw-id='{DENIED_CALL}']")).to_have_count(0)
        expect(page.get_by_test_id("timeline-violation")).to_have_count(0)

        page.click("[data-testid=tab-result]")
        expect(page.get_by_test_id("transcript-toolcall").first).to_be_visible()
        expect(
            page.locator(f"[data-testid=transcript-toolcall][data-id='{DENIED_CALL}']")
        ).to_have_count(0)

        # The pipeline describes both sides: it is the same on this one.
        page.click("[data-testid=tab-pipeline]")
        expect(page.get_by_test_id("stage")).to_have_count(2)
        page.click("[data-testid=tab-result]")

        # Back on the input side, the denied call is there again.
        page.get_by_test_id("side-select").select_option("input")
        expect(info).to_have_attribute("data-outcome", "rejected")
        expect(
            page.locator(f"[data-testid=transcript-toolcall][data-id='{DENIED_CALL}']")
        ).to_have_count(1)

        # The pipeline lists Repair's fix, with its rule, next to the input it fixed.
        page.click("[data-testid=tab-pipeline]")
        page.locator("[data-testid=stage][data-stage='1'] [data-testid=stage-name]").click()
        fixed = page.locator("[data-testid=stage-row][data-in='20']", has_text="boo")
        expect(fixed.get_by_test_id("stage-row-reason")).to_contain_text("content-not-started")
        _no_page_errors(page)
        page.close()
    finally:
        inspector.close()


def test_a_tool_call_named_constructor_renders(browser: Browser, tmp_path: Path) -> None:
    events = [
        {"type": "RUN_STARTED", "threadId": "t", "runId": "r"},
        {"type": "TEXT_MESSAGE_START", "messageId": "__proto__", "role": "assistant"},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": "__proto__", "delta": "calling"},
        {"type": "TEXT_MESSAGE_END", "messageId": "__proto__"},
        {"type": "TOOL_CALL_START", "toolCallId": "constructor", "toolCallName": "constructor",
         "parentMessageId": "__proto__"},
        {"type": "TOOL_CALL_ARGS", "toolCallId": "constructor", "delta": '{"q": 1}'},
        {"type": "TOOL_CALL_END", "toolCallId": "constructor"},
        {"type": "TOOL_CALL_RESULT", "toolCallId": "constructor", "messageId": "toString",
         "content": "built"},
        {"type": "RUN_FINISHED", "threadId": "t", "runId": "r"},
    ]  # fmt: skip
    inspector = Inspector(_write(tmp_path / "constructor.ndjson", events))
    try:
        page = _open(browser, inspector.url, "result")
        call = page.locator("[data-testid=transcript-toolcall][data-id='constructor']")
        expect(call).to_have_count(1)
        expect(call).to_contain_text("constructor")
        expect(call.get_by_test_id("transcript-result")).to_contain_text("built")
        expect(page.get_by_test_id("transcript-message")).to_have_count(1)  # result folded in
        page.click("[data-testid=tab-timeline]")
        expect(page.locator("[data-testid=lane][data-raw-id='constructor']")).to_have_count(1)
        _no_page_errors(page)
        page.close()
    finally:
        inspector.close()


def test_compare_shows_both_sides_aligned_by_item_with_the_differences_marked(
    browser: Browser, tmp_path: Path
) -> None:
    chain = _chain(
        tmp_path / "chain.yaml", "  - type: filter_tool_calls\n    deny: ['internal_*']\n"
    )
    inspector = Inspector(DEMO, "--config", chain)
    try:
        page = _open(browser, inspector.url, "compare")
        expect(page.get_by_test_id("compare-left")).to_have_value("0|input")
        expect(page.get_by_test_id("compare-right")).to_have_value("0|output")
        denied = page.locator(f"[data-testid=compare-item][data-key='tool_call:{DENIED_CALL}']")
        expect(denied).to_have_attribute("data-differs", "true")
        expect(denied.locator("td.missing")).to_have_count(1)  # on the left only
        same = page.locator("[data-testid=compare-item][data-key='tool_call:demo-run-call-1']")
        expect(same).to_have_attribute("data-differs", "false")
        events = page.locator("[data-testid=compare-verdict][data-key=events]")
        expect(events).to_have_attribute("data-differs", "true")
        # The assistant message that announced the denied call differs in its tool calls.
        differing = page.locator("[data-testid=compare-message][data-differs=true]")
        expect(differing.first).to_be_visible()
        assert DENIED_CALL in differing.first.inner_text()
        expect(page.locator("[data-testid=compare-state-key][data-differs=true]")).to_have_count(0)
        if SHOTS:
            page.screenshot(path=str(IMAGES / "inspector-compare.png"))
        # The same side twice is no comparison.
        page.get_by_test_id("compare-right").select_option("0|input")
        expect(page.get_by_test_id("compare-note")).to_contain_text("pick two different")
        _no_page_errors(page)
        page.close()
    finally:
        inspector.close()
