"""Export with the request, import and ``--target``, in Chromium as a user drives the page.

A run sent from ``serve --inspect``'s page is exported (its first line the request) and
imported into another inspector through the header's file input, where it is listed
and its result view shows the request; a file dropped on the page is imported too, and
one that is not an export is refused with the server's reason. ``agui-pipes inspect
--target URL`` sends the page's run to a real ``agui-pipes serve --demo`` and follows
it live. With ``AGUI_PIPES_SCREENSHOTS=1`` it also writes docs/images/inspector-import.png
and docs/images/inspector-target.png.
"""

from __future__ import annotations

import json
from pathlib import Path

from playwright.sync_api import Browser, expect

from tests._browser import Inspector
from tests.cli.test_cli_serve import start, stop
from tests.inspector.test_inspector_browser_workbench import (
    IMAGES,
    SHOTS,
    _open,
    _send,
    _serve,
    browser,
)

__all__ = ["browser"]  # the module's fixture, shared

DEMO = Path(__file__).resolve().parents[1] / "data" / "demo-run.ndjson"


def test_a_sent_run_is_exported_with_its_request_and_imported_elsewhere(
    browser: Browser, tmp_path: Path
) -> None:
    with _serve() as base:
        page = _open(browser.new_page(viewport={"width": 1400, "height": 900}), f"{base}/inspect/")
        _send(page, "thread-x", "run-x1", "Plan a weekend in Lisbon")
        info = page.get_by_test_id("run-info")
        expect(info).to_have_attribute("data-outcome", "finished", timeout=60000)
        page.click("[data-testid=tab-result]")
        expect(page.get_by_test_id("run-request-head")).to_contain_text("thread-x / run-x1")
        with page.expect_download() as download:
            page.get_by_test_id("run-export").click()
        exported = tmp_path / "exported.ndjson"
        download.value.save_as(exported)
        page.close()
    first = json.loads(exported.read_text(encoding="utf-8").splitlines()[0])
    assert first["type"] == "agui_pipes.request"
    assert first["input"]["state"] == {"from": "the inspector"}

    copy = tmp_path / "demo-run.ndjson"
    copy.write_bytes(DEMO.read_bytes())
    inspector = Inspector(copy)
    try:
        page = _open(browser.new_page(viewport={"width": 1400, "height": 900}), inspector.url)
        page.get_by_test_id("run-import").set_input_files(str(exported))
        select = page.get_by_test_id("run-select")
        expect(select.locator("option")).to_have_count(2)
        expect(select.locator("option").first).to_contain_text("exported.ndjson")
        expect(page.get_by_test_id("run-info")).to_have_attribute("data-outcome", "finished")
        page.click("[data-testid=tab-result]")
        request = page.get_by_test_id("run-request")
        expect(request).to_be_visible()
        expect(page.get_by_test_id("run-request-head")).to_contain_text(
            "thread-x / run-x1 — 1 message(s), 0 tool(s)"
        )
        page.get_by_test_id("run-request-head").click()
        expect(page.get_by_test_id("run-request-json")).to_contain_text("Plan a weekend in Lisbon")
        expect(page.get_by_test_id("run-request-edit")).to_be_hidden()  # nowhere to send
        if SHOTS:
            page.screenshot(path=str(IMAGES / "inspector-import.png"))
        # A file dropped on the page is imported the same way.
        drop = page.evaluate_handle(
            """(text) => {
                const data = new DataTransfer();
                data.items.add(new File([text], "dropped.ndjson", {type: "application/x-ndjson"}));
                return data;
            }""",
            DEMO.read_text(encoding="utf-8"),
        )
        page.dispatch_event("main", "drop", {"dataTransfer": drop})
        expect(select.locator("option")).to_have_count(3)
        expect(select.locator("option").first).to_contain_text("dropped.ndjson")
        # A file that is not an export: the server's reason, and nothing added.
        bad = tmp_path / "notes.ndjson"
        bad.write_text("these are my notes\n", encoding="utf-8")
        page.get_by_test_id("run-import").set_input_files(str(bad))
        expect(page.get_by_test_id("error")).to_contain_text("import of notes.ndjson refused")
        expect(page.get_by_test_id("error")).to_contain_text("not NDJSON of AG-UI events")
        expect(select.locator("option")).to_have_count(3)
        assert page.errors == [], page.errors  # type: ignore[attr-defined]
        page.close()
    finally:
        inspector.close()


def test_inspect_target_sends_the_pages_run_to_a_served_agent_and_follows_it_live(
    browser: Browser,
) -> None:
    demo = start("--demo", "--path", "/agent", "--pace", "0.03")
    inspector = Inspector(None, "--target", f"{demo.url}/agent")
    try:
        page = _open(browser.new_page(viewport={"width": 1400, "height": 900}), inspector.url)
        expect(page.get_by_test_id("tab-send")).to_be_visible()
        page.click("[data-testid=tab-send]")
        expect(page.get_by_test_id("send-target")).to_have_text(f"{demo.url}/agent")
        _send(page, "thread-t", "run-t1", "Plan a weekend in Lisbon")
        info = page.get_by_test_id("run-info")
        expect(info).to_have_attribute("data-outcome", "live")
        expect(page.get_by_test_id("event-row").first).to_be_visible()
        expect(info).to_have_attribute("data-outcome", "finished", timeout=60000)
        expect(page.get_by_test_id("run-select")).to_contain_text("thread-t / run-t1")
        page.click("[data-testid=tab-result]")
        expect(
            page.locator("[data-testid=transcript-message][data-role=assistant]").first
        ).to_be_visible()
        # The request it was sent with, back into the send tab for a second run.
        page.get_by_test_id("run-request-edit").click()
        expect(page.get_by_test_id("send-thread")).to_have_value("thread-t")
        expect(page.get_by_test_id("send-state")).to_have_value('{\n "from": "the inspector"\n}')
        if SHOTS:
            page.screenshot(path=str(IMAGES / "inspector-target.png"))
        assert page.errors == [], page.errors  # type: ignore[attr-defined]
        page.close()
    finally:
        inspector.close()
        stop(demo)
