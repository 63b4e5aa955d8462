"""Comparing a framework's streams: in-process producer vs a gateway in front of its server.

Two runs of the same scripted agent differ only in what the framework makes up
per run: message ids (uuid4s), timestamps. ``normalised`` renames every id
field's values to their order of first appearance (``m0``, ``m1``, ...) and
drops timestamps, so the two streams compare equal exactly when they carry the
same events, in the same order, with the same content and the same references
between them.
"""

from __future__ import annotations

import json
from typing import Any

import httpx

__all__ = ["ID_FIELDS", "normalised", "post_events", "types"]

ID_FIELDS = ("messageId", "parentMessageId")
"""Fields whose values a framework invents per run (tool call ids come from the script)."""


def normalised(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    names: dict[str, str] = {}

    def rename(value: Any) -> Any:
        return names.setdefault(value, f"m{len(names)}") if isinstance(value, str) else value

    out = []
    for event in events:
        copy = {k: v for k, v in event.items() if k not in ("timestamp", "rawEvent")}
        for name in ID_FIELDS:
            if name in copy:
                copy[name] = rename(copy[name])
        if isinstance(copy.get("messages"), list):  # MESSAGES_SNAPSHOT: its messages' ids
            copy["messages"] = [
                {**m, "id": rename(m.get("id"))} if isinstance(m, dict) else m
                for m in copy["messages"]
            ]
        out.append(copy)
    return out


def types(events: list[dict[str, Any]]) -> list[str]:
    return [str(event["type"]) for event in events]


async def post_events(url: str, body: dict[str, Any]) -> list[dict[str, Any]]:
    """POST a run and return its events as wire dicts (the whole stream)."""
    async with (
        httpx.AsyncClient(timeout=30) as client,
        client.stream("POST", url, json=body, headers={"accept": "text/event-stream"}) as response,
    ):
        assert response.status_code == 200, await response.aread()
        got = []
        async for line in response.aiter_lines():
            if line.startswith("data: "):
                got.append(json.loads(line[6:]))
        return got
