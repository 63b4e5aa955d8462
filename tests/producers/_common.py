"""What every producer scenario shares: the scenario record and the HTTP capture.

A scenario is an ASGI app (the producer's own AG-UI endpoint) plus the
``RunAgentInput`` posted to it. ``capture`` posts over ``httpx.ASGITransport``,
so the bytes stored are the response body the producer's endpoint writes — its
SSE framing, its JSON encoder — not a re-encoding of its events by us.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx

SECRET_ARG = "SECRET-ARG-7f3a"
SECRET_RESULT = "SECRET-RESULT-9b1c"
SECRET_RETRY = "SECRET-RETRY-2d4e"
"""Secret-looking strings carried by the denied (``internal_*``) tools, so a
filter test can search the output bytes for them."""


@dataclass(frozen=True)
class Scenario:
    """One recording: ``<producer>-<name>.sse`` plus its metadata."""

    producer: str
    name: str
    description: str
    contains: tuple[str, ...]
    """What the stream is meant to exercise (for the metadata and the reader)."""
    app: Callable[[], Any]
    """Builds a fresh ASGI app (fresh agent, fresh checkpointer) per recording."""
    varying: tuple[str, ...] = ()
    """Fields whose values differ between two recordings (ids minted by the producer)."""
    notes: tuple[str, ...] = ()
    user_text: str = "hello"
    extra_input: dict[str, Any] = field(default_factory=dict)

    @property
    def stem(self) -> str:
        return f"{self.producer}-{self.name}"

    def run_input(self) -> dict[str, Any]:
        """The RunAgentInput posted (fixed thread and run ids: both adapters echo them)."""
        return {
            "threadId": f"thread-{self.stem}",
            "runId": f"run-{self.stem}",
            "state": {},
            "messages": [{"id": f"user-{self.stem}", "role": "user", "content": self.user_text}],
            "tools": [],
            "context": [],
            "forwardedProps": {},
            **self.extra_input,
        }


async def capture(scenario: Scenario) -> bytes:
    """POST the scenario's input to its endpoint; return the response body verbatim."""
    transport = httpx.ASGITransport(app=scenario.app())
    async with httpx.AsyncClient(transport=transport, base_url="http://producer") as client:
        response = await client.post(
            "/", json=scenario.run_input(), headers={"accept": "text/event-stream"}
        )
    if response.status_code != 200:
        raise RuntimeError(
            f"{scenario.stem}: the endpoint answered {response.status_code}: {response.text[:500]}"
        )
    content_type = response.headers.get("content-type", "")
    if not content_type.startswith("text/event-stream"):
        raise RuntimeError(f"{scenario.stem}: expected an SSE response, got {content_type!r}")
    return response.content
