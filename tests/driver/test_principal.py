"""``ctx.principal``: who the run is for, given to ``run()`` or taken from the server's context."""

from __future__ import annotations

from typing import Any

import pytest

from agui_pipes import run
from agui_pipes.driver import RunContext, RunOutcome
from agui_pipes.server.auth import ANONYMOUS, Principal, using_principal

pytestmark = pytest.mark.anyio

INPUT = {"threadId": "t", "runId": "r"}


class Seen:
    def __init__(self) -> None:
        self.principals: list[Principal] = []

    async def run(self, ctx: RunContext[Any]) -> RunOutcome:
        self.principals.append(ctx.principal)
        return RunOutcome.success()


async def _drain(agent: Seen, **options: Any) -> None:
    async with run(agent, INPUT, **options) as events:
        async for _ in events:
            pass


async def test_a_run_without_a_principal_is_anonymous() -> None:
    agent = Seen()
    await _drain(agent)
    assert agent.principals == [ANONYMOUS]
    assert ANONYMOUS.scope == "default"


async def test_the_principal_given_or_current_reaches_the_agent() -> None:
    agent = Seen()
    ada = Principal("acme", subject="ada", claims={"role": "admin"})
    await _drain(agent, principal=ada)
    with using_principal(Principal("initech")):
        await _drain(agent)  # the principal current where the run is created
    assert [p.scope for p in agent.principals] == ["acme", "initech"]
    assert agent.principals[0].claims == {"role": "admin"}
