"""The inspector page at 360, 800 and 1920 px, in Chromium: every tab reachable, nothing
overflows, the timeline fits and redraws on resize, lanes say what they carry.

Each test starts the real ``agui-pipes inspect FILE --no-open --port 0`` and drives
the page with Playwright on the system chromium (``executable_path``); without one the
module is skipped, loudly. With ``AGUI_PIPES_SCREENSHOTS=1`` it also writes
docs/images/inspector-width-{360,800,1920}.png.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests._browser import Inspector, find_chromium

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "tests" / "data" / "demo-run.ndjson"
IMAGES = ROOT / "docs" / "images"
SHOTS = os.environ.get("AGUI_PIPES_SCREENSHOTS") == "1"
VIEWS = ("timeline", "events", "pipeline", "result")

CHROMIUM = find_chromium()
if CHROMIUM is None:
    pytest.skip(
        "INSPECTOR PAGE NOT TESTED: no chromium binary on PATH (set AGUI_PIPES_CHROMIUM or "
        "`apt-get install chromium`)",
        allow_module_level=True,
    )

from playwright.sync_api import Browser, Page, expect, sync_playwright  # noqa: E402


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with sync_playwright() as playwright:
        # --no-sandbox: CI containers run as root, where chromium's sandbox refuses to start.
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield launched
        launched.close()


@pytest.fixture(scope="module")
def demo_chain(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Inspector]:
    chain = tmp_path_factory.mktemp("layout") / "chain.yaml"
    chain.write_text(
        "version: 1\ntransformers:\n"
        "  - type: filter_tool_calls\n    deny: ['internal_*']\n"
        "  - type: redact\n    patterns: ['Lisbon']\n    replacement: '[city]'\n",
        encoding="utf-8",
    )
    inspector = Inspector(DEMO, "--config", str(chain))
    yield inspector
    inspector.close()


def _open(browser: Browser, url: str, width: int) -> Page:
    page = browser.new_page(viewport={"width": width, "height": 800})
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto(url)
    page.wait_for_selector("body[data-ready=true]", timeout=20000)
    page.set_default_timeout(10000)
    page.errors = errors  # type: ignore[attr-defined]
    return page


def _overflow(page: Page) -> int:
    """How far the page is wider than the window (0: nothing to scroll sideways)."""
    width: int = page.evaluate(
        "() => document.documentElement.scrollWidth - document.documentElement.clientWidth"
    )
    return width


def _in_window(page: Page, testid: str, width: int) -> None:
    box = page.get_by_test_id(testid).bounding_box()
    assert box is not None, f"{testid} is not laid out"
    assert box["x"] >= 0 and box["x"] + box["width"] <= width + 0.5, (testid, box, width)


@pytest.mark.parametrize("width", [360, 800, 1920])
def test_every_tab_is_reachable_and_the_timeline_fits(
    browser: Browser, demo_chain: Inspector, width: int
) -> None:
    page = _open(browser, demo_chain.url, width)
    for view in VIEWS:
        _in_window(page, f"tab-{view}", width)
        page.click(f"[data-testid=tab-{view}]")
        expect(page.get_by_test_id(f"view-{view}")).to_be_visible()
        assert _overflow(page) == 0, f"{view} at {width} px scrolls sideways"
    page.click("[data-testid=tab-timeline]")
    svg = page.get_by_test_id("timeline-svg")
    expect(svg).to_be_visible()
    assert int(svg.get_attribute("width") or 0) <= width
    expect(page.get_by_test_id("lane-bar").first).to_be_visible()
    _in_window(page, "run-info", width)
    _in_window(page, "run-export", width)
    with page.expect_download() as download:
        page.get_by_test_id("run-export").click()
    exported = Path(download.value.path()).read_bytes().splitlines()
    assert exported == [line.strip() for line in DEMO.read_bytes().splitlines()]
    if SHOTS:
        IMAGES.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(IMAGES / f"inspector-width-{width}.png"))
    assert page.errors == [], page.errors  # type: ignore[attr-defined]
    page.close()


def test_the_timeline_redraws_to_the_new_width_on_resize(
    browser: Browser, demo_chain: Inspector
) -> None:
    page = _open(browser, demo_chain.url, 1920)
    svg = page.get_by_test_id("timeline-svg")
    expect(svg).to_be_visible()
    assert int(svg.get_attribute("width") or 0) > 1800
    page.set_viewport_size({"width": 800, "height": 800})
    page.wait_for_function(
        "() => Number(document.querySelector('[data-testid=timeline-svg]')"
        ".getAttribute('width')) <= 800"
    )
    page.set_viewport_size({"width": 360, "height": 700})
    page.wait_for_function(
        "() => Number(document.querySelector('[data-testid=timeline-svg]')"
        ".getAttribute('width')) <= 360"
    )
    assert _overflow(page) == 0
    page.close()


def test_lanes_show_a_text_preview_and_a_legend_names_the_kinds(
    browser: Browser, demo_chain: Inspector
) -> None:
    page = _open(browser, demo_chain.url, 1400)
    legend = page.get_by_test_id("legend-item")
    expect(legend).to_have_count(6)
    assert legend.evaluate_all("els => els.map(e => e.dataset.kind)") == [
        "run",
        "message",
        "reasoning",
        "tool_call",
        "step",
        "subagent",
    ]
    message = page.locator("[data-testid=lane][data-kind=message] [data-testid=lane-label]")
    expect(message.first).to_be_visible()
    shown = "els => els.map(e => e.firstChild.textContent)"  # the label, not its tooltip
    labels = message.evaluate_all(shown)
    assert any(text.startswith("assistant: \u201c") for text in labels), labels
    assert not any("demo-run-msg" in text for text in labels), labels  # text, not ids
    call = page.locator("[data-testid=lane][data-kind=tool_call] [data-testid=lane-label]")
    assert any("(" in text for text in call.evaluate_all(shown))  # name(arguments…)
    page.close()


def test_the_events_type_column_is_never_cut(browser: Browser, demo_chain: Inspector) -> None:
    for width in (360, 1400):
        page = _open(browser, demo_chain.url, width)
        page.click("[data-testid=tab-events]")
        rows = page.get_by_test_id("event-row")
        expect(rows.first).to_be_visible()
        cut = page.evaluate(
            "() => Array.from(document.querySelectorAll('[data-testid=event-row] .c-type'))"
            ".filter(e => e.scrollWidth > e.clientWidth + 1).map(e => e.textContent)"
        )
        assert cut == [], (width, cut)
        page.close()


def test_the_pipeline_opens_on_the_first_stage_that_did_something(
    browser: Browser, demo_chain: Inspector
) -> None:
    page = _open(browser, demo_chain.url, 1400)
    page.click("[data-testid=tab-pipeline]")
    expect(page.get_by_test_id("stage-title")).to_have_text("stage 1: FilterToolCalls")
    expect(page.get_by_test_id("kind-dropped")).to_have_attribute("aria-pressed", "true")
    rows = page.get_by_test_id("stage-row")
    expect(rows.first).to_be_visible()
    assert set(rows.evaluate_all("els => els.map(e => e.dataset.kind)")) == {"dropped"}
    page.close()
