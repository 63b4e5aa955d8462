"""The inspector as a workbench, in Chromium against a real ``agui-pipes serve --inspect``.

A run is composed on the page's send tab, sent to the served demo agent and watched
live until it finishes; with two principals (``--auth-tokens``), each user's page
and API show that user's runs only. Playwright drives the system chromium
(``executable_path``); without one the module is skipped, loudly. With
``AGUI_PIPES_SCREENSHOTS=1`` it also writes docs/images/inspector-send.png.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests._browser import find_chromium

ROOT = Path(__file__).resolve().parents[2]
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

ALICE = "alice-token-0123456789"
BOB = "bob-token-9876543210"


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with sync_playwright() as playwright:
        # --no-sandbox: CI containers run as root, where chromium's sandbox refuses to start.
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield launched
        launched.close()


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@contextmanager
def _serve(*extra: str, token: str | None = None) -> Iterator[str]:
    """``agui-pipes serve --demo --inspect`` on a free port; yields its base URL."""
    port = _free_port()
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    process = subprocess.Popen(
        [sys.executable, "-m", "agui_pipes", "serve", "--demo", "--inspect", "--port", str(port),
         "--log-level", "warning", *extra],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=env,
        cwd=ROOT,
    )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                request = urllib.request.Request(f"{base}/inspect/api/runs", headers=headers)
                with urllib.request.urlopen(request, timeout=2) as response:
                    response.read()
                break
            except OSError:
                assert process.poll() is None, process.communicate()[1]
                assert time.monotonic() < deadline, "serve --inspect did not come up"
                time.sleep(0.1)
        yield base
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.communicate(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.communicate()


def _open(page: Page, url: str) -> Page:
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto(url)
    page.wait_for_selector("body[data-ready=true]", timeout=20000)
    page.set_default_timeout(15000)
    page.errors = errors  # type: ignore[attr-defined]
    return page


def _send(page: Page, thread: str, run: str, text: str) -> None:
    page.click("[data-testid=tab-send]")
    expect(page.get_by_test_id("view-send")).to_be_visible()
    page.get_by_test_id("send-thread").fill(thread)
    page.get_by_test_id("send-run").fill(run)
    page.get_by_test_id("send-messages").fill(
        '[{"id": "u-' + run + '", "role": "user", "content": "' + text + '"}]'
    )
    page.get_by_test_id("send-state").fill('{"from": "the inspector"}')
    page.get_by_test_id("send-go").click()


def test_a_run_composed_on_the_page_is_sent_and_watched_live(browser: Browser) -> None:
    # --pace: the demo agent pauses between words, so the run is live for seconds.
    with _serve("--pace", "0.03") as base:
        page = _open(browser.new_page(viewport={"width": 1400, "height": 900}), f"{base}/inspect/")
        expect(page.get_by_test_id("run-info")).to_contain_text("no runs yet")
        _send(page, "thread-w", "run-w1", "Plan a weekend in Lisbon")
        info = page.get_by_test_id("run-info")
        expect(info).to_have_attribute("data-outcome", "live")
        expect(page.get_by_test_id("view-events")).to_be_visible()
        expect(page.get_by_test_id("event-row").first).to_be_visible()
        expect(info).to_have_attribute("data-outcome", "finished", timeout=60000)
        expect(page.get_by_test_id("run-select")).to_contain_text("thread-w / run-w1")
        page.click("[data-testid=tab-send]")
        expect(page.get_by_test_id("send-status")).to_contain_text("sent thread-w / run-w1")
        expect(page.get_by_test_id("send-run")).not_to_have_value("run-w1")  # a fresh id
        if SHOTS:
            page.screenshot(path=str(IMAGES / "inspector-send.png"))
        # The result view folds what was sent: the user's message and the state given.
        page.click("[data-testid=tab-result]")
        expect(
            page.locator("[data-testid=transcript-message][data-role=assistant]").first
        ).to_be_visible()
        # A second run, then the two compared: the user messages differ, the rest aligns.
        _send(page, "thread-w", "run-w2", "Plan a weekend in Porto")
        expect(page.get_by_test_id("run-select")).to_contain_text("thread-w / run-w2")
        expect(info).to_have_attribute("data-outcome", "live")
        expect(info).to_have_attribute("data-outcome", "finished", timeout=60000)
        page.click("[data-testid=tab-compare]")
        expect(page.get_by_test_id("compare-left")).to_contain_text("thread-w / run-w2")
        expect(page.get_by_test_id("compare-right")).to_contain_text("thread-w / run-w1")
        outcome = page.locator("[data-testid=compare-verdict][data-key=outcome]")
        expect(outcome).to_have_attribute("data-differs", "false")  # both finished
        # The demo agent names its messages after the run: each is on one side only.
        messages = page.get_by_test_id("compare-message")
        expect(messages.first).to_be_visible()
        keys = messages.evaluate_all("els => els.map(e => e.dataset.key)")
        assert any("run-w1" in key for key in keys) and any("run-w2" in key for key in keys)
        assert messages.evaluate_all("els => els.map(e => e.dataset.differs)") == ["true"] * len(
            keys
        )
        assert page.locator("[data-testid=compare-message] td.missing").count() == len(keys)
        expect(page.get_by_test_id("compare-item").first).to_be_visible()
        # A bad field is refused on the page, before anything is sent.
        page.click("[data-testid=tab-send]")
        page.get_by_test_id("send-tools").fill("{not json")
        page.get_by_test_id("send-go").click()
        expect(page.get_by_test_id("send-status")).to_contain_text("tools is not JSON")
        assert page.errors == [], page.errors  # type: ignore[attr-defined]
        page.close()


def test_two_principals_each_see_only_their_runs_in_the_page_and_the_api(
    browser: Browser, tmp_path: Path
) -> None:
    tokens = tmp_path / "tokens"
    tokens.write_text(f"{ALICE} alice\n{BOB} bob\n", encoding="utf-8")
    with _serve("--auth-tokens", str(tokens), token=ALICE) as base:
        pages: dict[str, Page] = {}
        for who, token in (("alice", ALICE), ("bob", BOB)):
            context = browser.new_context(
                viewport={"width": 1200, "height": 800},
                extra_http_headers={"Authorization": f"Bearer {token}"},
            )
            pages[who] = _open(context.new_page(), f"{base}/inspect/")
            _send(pages[who], f"thread-{who}", f"run-{who}", f"hello from {who}")
        for who, page in pages.items():
            info = page.get_by_test_id("run-info")
            expect(info).to_have_attribute("data-outcome", "finished", timeout=60000)
            options = page.locator("[data-testid=run-select] option")
            expect(options).to_have_count(1)
            expect(options).to_contain_text(f"thread-{who} / run-{who}")
        alices = pages["alice"].evaluate("() => fetch('api/runs').then(r => r.json())")
        bobs = pages["bob"].evaluate("() => fetch('api/runs').then(r => r.json())")
        assert [r["label"] for r in alices["runs"]] == ["thread-alice / run-alice"]
        assert [r["label"] for r in bobs["runs"]] == ["thread-bob / run-bob"]
        peek = pages["alice"].request.get(
            f"{base}/inspect/api/runs/{bobs['runs'][0]['id']}/summary"
        )
        assert peek.status == 404  # another user's run is one that does not exist
        # Without a token there is no page at all.
        anonymous = browser.new_page()
        assert anonymous.goto(f"{base}/inspect/").status == 401  # type: ignore[union-attr]
        anonymous.close()
        for page in pages.values():
            assert page.errors == [], page.errors  # type: ignore[attr-defined]
            page.context.close()


class _Approver:
    """Asks for approval (an interrupt with a responseSchema), then says what it got."""

    async def run(self, ctx: Any) -> Any:
        from agui_pipes.driver import RunOutcome

        answer = ctx.resume_for("approve")
        if answer is None:
            with ctx.message() as message:
                message.delta("may I book the flight?")
            schema = {
                "type": "object",
                "properties": {"approved": {"type": "boolean"}, "note": {"type": "string"}},
            }
            return RunOutcome.interrupt(
                [{"id": "approve", "reason": "tool_approval", "message": "book the flight?",
                  "responseSchema": schema}]
            )  # fmt: skip
        with ctx.message() as message:
            message.delta(f"booked: {json.dumps(answer.payload, sort_keys=True)}")
        return RunOutcome.success()


def test_a_pending_interrupt_is_answered_from_the_page_and_the_resumed_run_completes(
    browser: Browser,
) -> None:
    from agui_pipes import TransformerChain
    from agui_pipes.inspector import RecentRuns, inspector_app, with_inspector
    from agui_pipes.server import build_app
    from tests._servers import serve

    runs = RecentRuns()
    recorder = runs.recorder()
    app = build_app(
        agent=_Approver(), path="/agent", chain=lambda: TransformerChain([recorder.fresh()])
    )
    with serve(with_inspector(app, inspector_app(runs, send_to=(app, "/agent")))) as server:
        page = _open(browser.new_page(viewport={"width": 1400, "height": 900}),
                     f"{server.url}/inspect/")  # fmt: skip
        _send(page, "thread-i", "run-i1", "book me a flight")
        info = page.get_by_test_id("run-info")
        expect(page.get_by_test_id("run-select")).to_contain_text("thread-i / run-i1")
        expect(info).to_have_attribute("data-outcome", "finished")
        page.click("[data-testid=tab-result]")
        item = page.locator("[data-testid=interrupt-item][data-id=approve]")
        expect(item).to_contain_text("book the flight?")
        item.locator("input[data-field=approved]").check()  # a form from responseSchema
        item.locator("input[data-field=note]").fill("window seat")
        page.get_by_test_id("interrupt-resolve").click()
        expect(page.get_by_test_id("run-select")).to_contain_text("thread-i / resume-")
        expect(page.get_by_test_id("view-events")).to_be_visible()
        expect(info).to_have_attribute("data-outcome", "finished")
        expect(page.get_by_test_id("run-select").locator("option")).to_have_count(2)
        page.click("[data-testid=tab-result]")
        expect(page.get_by_test_id("transcript")).to_contain_text(
            'booked: {"approved": true, "note": "window seat"}'
        )
        expect(page.get_by_test_id("interrupt")).to_be_hidden()  # nothing pending any more
        assert page.errors == [], page.errors  # type: ignore[attr-defined]
        page.close()
