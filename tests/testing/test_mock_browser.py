"""A stock ``@ag-ui/client`` page in real Chromium against ``agui-pipes mock``.

The page (tests/testing/mock_page/) is a minimal chat on the stock ``HttpAgent`` (the
harness's pinned client, bundled by its pinned esbuild). It answers the frontend tool
``show_weather`` with a second run, approves an interrupt with a button, and reports
in the DOM what it saw: the messages, the state, every response's status and
``retry-after``, and a status line — the client's own error when ``runAgent`` fails, or
the page's two checks the client does not make (a body that ended with no terminal
event; no event for the watchdog's time).

``agui-pipes mock`` runs as the command, in a subprocess, on the scenario file the
mock's other tests share (tests/_mock_scenarios.py). The page is served at the mock's
own origin (Playwright answers its GETs), so the requests are same-origin, as when a
dev server proxies the agent. One browser and one page serve every case; each Send is
a new conversation, and the test waits for that conversation's status, never a time.
"""

from __future__ import annotations

import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

from agui_pipes.testing import FAULT_HEADER
from tests._browser import find_chromium
from tests._mock_scenarios import SCENARIOS
from tests._oracle import client_bundle, ts_available

CHROMIUM = find_chromium()
if CHROMIUM is None or not ts_available():
    pytest.skip(
        "MOCK BROWSER PAGE NOT TESTED: it needs a chromium binary on PATH (or "
        "AGUI_PIPES_CHROMIUM) and node/npm for the @ag-ui/client bundle; .ci/run installs both",
        allow_module_level=True,
    )

from playwright.sync_api import Page, Route, sync_playwright  # noqa: E402

PAGE_DIR = Path(__file__).resolve().parent / "mock_page"
WATCHDOG_MS = 3000
"""The page's own stall check; only the keep-alive-only case waits for it."""

LONG = "one two three four five six"


@dataclass(frozen=True)
class Case:
    """One conversation: what the user types, the fault planted, what the page shows."""

    text: str
    status: str | re.Pattern[str]
    messages: list[tuple[str, str]]
    fault: str = ""
    http: str = "200"
    state: str = "{}"
    approve: str | None = field(default=None)  # the status after clicking Approve


def _long(status: str | re.Pattern[str], said: str | None = LONG, **extra: str) -> Case:
    messages = [("user", "long")] + ([("assistant", said)] if said is not None else [])
    return Case("long", status, messages, **extra)


def _failed(wording: str) -> re.Pattern[str]:
    return re.compile("^failed: .*" + re.escape(wording))


INCOMPLETE = "incomplete: the stream ended with no RUN_FINISHED or RUN_ERROR"
TEXT_OPEN = "Cannot send 'TEXT_MESSAGE_CONTENT' event: No active text message found"
RUN_ACTIVE = "Cannot send 'RUN_STARTED' while a run is still active"

CASES: dict[str, Case] = {
    "normal-run": _long("done"),
    "tool-round-trip": Case(
        "What's the weather?",
        "done",
        [
            ("user", "What's the weather?"),
            ("reasoning", "Look it up, then show it."),
            ("assistant", "Checking the weather."),
            ("card", "21 degrees"),  # the frontend tool, answered by the page
            ("tool", '{"temp":21}'),  # the backend tool's result
            ("tool", "shown"),  # the page's answer, sent in the second turn
            ("assistant", "The card says shown."),  # the second turn answers it
        ],
        http="200; 200",
    ),
    "state": Case("state", "done", [("user", "state")], state='{"city":"Lisbon","days":3}'),
    "interrupt": Case(
        "delete",
        "interrupted: Delete /tmp?",
        [("user", "delete"), ("assistant", "Approved, going ahead.")],
        http="200; 200",
        approve="done",
    ),
    "run-error": Case("boom", "run error: the model is down", [("user", "boom")]),
    **{
        f"status-{code}": _long(
            f'failed: HTTP {code}: {{"error":"mock_fault","message":"the mock answered {code} '
            '(planted fault)"}',
            None,
            fault=f"status={code}" + (f"; retry-after={retry}" if retry else ""),
            http=f"{code}" + (f" retry-after {retry}" if retry else ""),
        )
        for code, retry in ((401, None), (429, "1"), (500, None), (503, "2"))
    },
    "slow-first-byte": _long("done", fault="first-byte=0.3"),
    "stall": _long("done", fault="stall=0.3@2"),  # the client does not notice a pause
    # Chromium's fetch fails the body read of a chunked response cut short.
    "drop-after": _long("failed: network error", "one ", fault="drop-after=3"),
    "truncate-after": _long(INCOMPLETE, "one ", fault="truncate-after=3"),
    "malformed": _long(_failed("JSON"), None, fault="malformed=2"),
    "duplicate-run-started": _long(_failed(RUN_ACTIVE), None, fault="duplicate=1"),
    "duplicate-delta": _long("done", "one " + LONG, fault="duplicate=3"),
    "reorder-start": _long(_failed(TEXT_OPEN), None, fault="reorder=2"),
    "reorder-deltas": _long("done", "two one three four five six", fault="reorder=3"),
    "break-first-event": _long(
        "failed: First event must be 'RUN_STARTED'", None, fault="break=first-event"
    ),
    "break-run-ended": _long(
        _failed("The run has already finished with 'RUN_FINISHED'"), None, fault="break=run-ended"
    ),
    "break-duplicate-run-started": _long(
        _failed(RUN_ACTIVE), None, fault="break=duplicate-run-started"
    ),
    "break-duplicate-start": _long(
        _failed("A text message with ID 'mock-duplicate' is already in progress"),
        None,
        fault="break=duplicate-start",
    ),
    "break-not-open": _long(
        _failed(TEXT_OPEN + " with ID 'mock-never-opened'"), None, fault="break=not-open"
    ),
    # The producer profile's rules: the reference client tolerates both, so the page
    # shows the run, with the result of a call it never saw.
    **{
        f"break-{rule}": Case(
            "long",
            "done",
            [("user", "long"), ("tool", "?"), ("assistant", LONG)],
            fault=f"break={rule}",
        )
        for rule in ("unknown-id", "out-of-order")
    },
    "break-open-at-finish": _long(
        _failed("Cannot send 'RUN_FINISHED' while steps are still active: mock-left-open"),
        None,
        fault="break=open-at-finish",
    ),
    "break-truncated": _long(INCOMPLETE, fault="break=truncated"),
    "keepalive-only": _long(
        f"stalled: no event for {WATCHDOG_MS} ms, the run was abandoned",
        None,
        fault="keepalive=0.05@1",
    ),
}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def mock_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``agui-pipes mock SCENARIOS --port N`` in a subprocess, until the module ends."""
    scenarios = tmp_path_factory.mktemp("mock-page") / "scenarios.yaml"
    scenarios.write_text(SCENARIOS)
    port = _free_port()
    command = [
        sys.executable, "-m", "agui_pipes", "mock", str(scenarios),
        "--port", str(port), "--log-level", "warning",
    ]  # fmt: skip
    process = subprocess.Popen(command, stderr=subprocess.PIPE, text=True)
    url = f"http://127.0.0.1:{port}/"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                httpx.get(url + "healthz", timeout=1)
                break
            except httpx.TransportError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("agui-pipes mock did not start") from None
                time.sleep(0.05)
        yield url
    finally:
        process.terminate()
        _, err = process.communicate(timeout=30)
        assert "agui-pipes mock: 11 scenario(s), 0 recording(s)" in err, err
        assert "Traceback" not in err, err


@pytest.fixture(scope="module")
def page(mock_url: str) -> Iterator[Page]:
    """The chat page, loaded once at ``{mock}/page/`` in one Chromium."""
    files = {
        "index.html": ((PAGE_DIR / "index.html").read_bytes(), "text/html"),
        "chat.mjs": ((PAGE_DIR / "chat.mjs").read_bytes(), "text/javascript"),
        "ag-ui-client.mjs": (client_bundle().read_bytes(), "text/javascript"),
    }

    def serve_page(route: Route) -> None:
        name = route.request.url.split("/page/", 1)[1].split("?", 1)[0] or "index.html"
        if name not in files:
            route.fulfill(status=404, body=b"not found")
            return
        body, content_type = files[name]
        route.fulfill(status=200, body=body, content_type=content_type)

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            tab = browser.new_page()
            tab.route(mock_url + "page/**", serve_page)
            tab.goto(f"{mock_url}page/?watchdog={WATCHDOG_MS}")
            tab.wait_for_function("document.querySelector('#status').textContent === 'idle'")
            yield tab
        finally:
            browser.close()


SETTLED = """([conversation, unlike]) => {
  const status = document.querySelector('#status');
  return status.dataset.conversation === conversation
    && status.textContent !== 'running' && status.textContent !== unlike;
}"""


def _settle(page: Page, conversation: str, unlike: str = "running") -> str:
    """The status of ``conversation`` once it is no longer running (nor ``unlike``)."""
    page.wait_for_function(SETTLED, arg=[conversation, unlike], timeout=30_000)
    return page.text_content("#status") or ""


def _matches(expected: str | re.Pattern[str], actual: str) -> bool:
    return bool(expected.search(actual)) if isinstance(expected, re.Pattern) else expected == actual


def test_the_faults_the_page_meets_are_the_mock_s_whole_list() -> None:
    """Every fault of the mock's syntax and every breakable rule has a case here."""
    from agui_pipes.testing._mock.faults import BREAKABLE_RULES, FAULT_NAMES, HTTP_FAULT_STATUSES

    planted = [case.fault for case in CASES.values() if case.fault]
    names = {item.split("=")[0] for fault in planted for item in fault.split("; ")}
    assert names == set(FAULT_NAMES)
    assert {f"break={rule.value}" for rule in BREAKABLE_RULES} <= set(planted)
    assert {f"status-{code}" for code in HTTP_FAULT_STATUSES} <= set(CASES)
    assert FAULT_HEADER == "x-agui-mock-fault"  # the header chat.mjs sends


@pytest.mark.parametrize("name", list(CASES))
def test_the_page_sees_what_the_scenario_promised(page: Page, name: str) -> None:
    case = CASES[name]
    page.fill("#text", case.text)
    page.fill("#fault", case.fault)
    conversation = str(int(page.get_attribute("#status", "data-conversation") or "0") + 1)
    page.click("#send")
    status = _settle(page, conversation)
    assert _matches(case.status, status), (name, status)
    if case.approve is not None:
        assert page.is_visible("#approve")
        page.click("#approve")
        status = _settle(page, conversation, unlike=status)
        assert status == case.approve, (name, status)
    shown = [
        (item.get_attribute("data-role") or "", item.text_content() or "")
        for item in page.locator("#messages li").all()
    ]
    if status.startswith("failed: "):
        # How much of the text the client applied before its error depends on how the
        # body's bytes were split into reads: the page shows the user's message and at
        # most a part of the promised answer, never anything else.
        assert shown[:1] == case.messages[:1], name
        assert all(role == "assistant" and LONG.startswith(said) for role, said in shown[1:]), (
            name,
            shown,
        )
    else:
        assert shown == case.messages, name
    assert page.text_content("#http") == case.http, name
    assert page.text_content("#state") == case.state, name
