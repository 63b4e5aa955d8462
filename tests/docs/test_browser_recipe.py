"""docs/browser.md's page, in real Chromium: a reload mid-run, and a second tab.

The page (examples/browser/) uses nothing but the stock ``@ag-ui/client``
``HttpAgent`` (the harness's pinned client, bundled by its pinned esbuild) against
an agent endpoint with a store. The agent holds its run open at a gate mid-answer;
the page is reloaded there, a second tab opens on the same thread, then the gate
opens: both tabs must end showing the user's message and the complete answer.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from starlette.applications import Starlette
from starlette.routing import Mount
from starlette.staticfiles import StaticFiles

from agui_pipes.driver import RunContext, RunOutcome
from agui_pipes.server import AgentEndpoint, agent_routes
from tests._browser import find_chromium
from tests._oracle import client_bundle, ts_available
from tests._servers import serve

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = find_chromium()
if CHROMIUM is None or not ts_available():
    pytest.skip(
        "BROWSER RECIPE NOT TESTED: it needs a chromium binary on PATH (or AGUI_PIPES_CHROMIUM) "
        "and node/npm for the @ag-ui/client bundle; .ci/run installs both",
        allow_module_level=True,
    )

from playwright.sync_api import Page, expect, sync_playwright  # noqa: E402

ANSWER = "".join(f"day{n} " for n in range(5)) + "".join(f"more{n} " for n in range(5))


class HeldAnswer:
    """An answer streamed in two halves; the second waits for the test's gate."""

    def __init__(self) -> None:
        self.gate = threading.Event()
        self.runs: list[str] = []

    async def run(self, ctx: RunContext[Any]) -> RunOutcome:
        self.runs.append(ctx.run_id)
        with ctx.message() as message:
            for n in range(5):
                message.delta(f"day{n} ")
            while not self.gate.is_set():  # noqa: ASYNC110 - set from the test's thread
                await anyio.sleep(0.01)
            for n in range(5):
                message.delta(f"more{n} ")
        return RunOutcome.success()


@pytest.fixture
def site(tmp_path: Path) -> Iterator[tuple[str, AgentEndpoint, HeldAnswer]]:
    agent = HeldAnswer()
    routes = agent_routes(
        "/agent", agent.run, store=f"sqlite:///{tmp_path / 'runs.db'}", detach_grace=30.0
    )
    endpoint = routes[0].endpoint
    assert isinstance(endpoint, AgentEndpoint)
    vendor = client_bundle().parent
    app = Starlette(
        routes=[
            *routes,
            Mount("/vendor", StaticFiles(directory=vendor)),
            Mount("/", StaticFiles(directory=ROOT / "examples" / "browser", html=True)),
        ],
        lifespan=endpoint.lifespan,
    )
    with serve(app) as server:
        yield server.url, endpoint, agent


def _readers(endpoint: AgentEndpoint) -> int:
    assert endpoint.durable is not None
    return sum(live.readers for live in endpoint.durable.live.values())


def _wait(condition: Any, what: str, within: float = 20.0) -> None:
    deadline = time.monotonic() + within
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def _texts(page: Page) -> list[str]:
    return page.locator("#messages li").all_text_contents()


def test_a_reloaded_page_and_a_second_tab_end_with_the_whole_answer(
    site: tuple[str, AgentEndpoint, HeldAnswer],
) -> None:
    url, endpoint, agent = site
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            context = browser.new_context()
            page = context.new_page()
            page.goto(url + "/")
            page.click("button")
            expect(page.locator("#messages li[data-role=assistant]")).to_contain_text("day4")
            page.reload()  # mid-run: the answer's second half is still held
            expect(page.locator("#status")).to_have_text("running")
            other = context.new_page()  # a second tab on the same thread
            other.goto(url + "/")
            _wait(lambda: _readers(endpoint) == 2, "both tabs to follow the run")
            agent.gate.set()
            for tab in (page, other):
                expect(tab.locator("#status")).to_have_text("done", timeout=20_000)
            assert _texts(page) == ["A weekend in Porto", ANSWER]
            assert _texts(other) == _texts(page)
            assert len(agent.runs) == 1  # reconnecting started no second run
        finally:
            browser.close()
