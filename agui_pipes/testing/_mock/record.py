"""Record mode of the mock backend: relay each run to a real agent and save it for replay.

The client talks to the mock as it would to the agent: the request body goes
upstream as received (with its ``content-type``, ``accept`` and
``authorization`` headers) and the upstream's response comes back byte for
byte, status and content type included — recording changes nothing the
client sees. Meanwhile the SSE payloads are cut out of the stream
(``codecs.SSEDecoder``) and, once the response ends, saved as one run
directory under the recording directory::

    DIR/0001-<runId>/request.json     the body the client POSTed, as received
    DIR/0001-<runId>/events.ndjson    one payload per line, as the upstream sent it
    DIR/0001-<runId>/timing.json      {"offsets": [...]}: seconds after the request

which is what ``--replay DIR`` (``_mock_replay``) reads back. Only complete
``200 text/event-stream`` answers are saved; anything else is relayed and
logged. An upstream that cannot be reached is a 502 JSON error; one whose
stream breaks mid-run has the client's connection cut the same way.
"""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path
from typing import Any

import anyio
from ag_ui.core import RunAgentInput

from ...codecs import CodecError, SSEDecoder
from ...server._http import BadRequest, send_json_error
from ...server._streaming import Receive, Scope, Send
from .faults import MockDrop
from .replay import EVENTS_FILE, REQUEST_FILE, TIMING_FILE

__all__ = ["Recorder"]

_log = logging.getLogger("agui_pipes.testing.mock")

_FORWARDED = (b"content-type", b"accept", b"authorization")
_RETURNED = (b"content-type", b"cache-control", b"retry-after", b"x-accel-buffering")
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


class Recorder:
    """Relays runs to ``upstream`` and saves each one under ``directory``."""

    def __init__(self, upstream: str, directory: str | Path, *, timeout: float = 300.0) -> None:
        import httpx

        self.upstream = upstream
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self._client = httpx.AsyncClient(timeout=httpx.Timeout(timeout, connect=10.0))
        self._count = sum(1 for p in self.directory.iterdir() if p.is_dir())

    async def aclose(self) -> None:
        await self._client.aclose()

    async def relay(
        self, scope: Scope, receive: Receive, send: Send, body: bytes, request: RunAgentInput
    ) -> None:
        import httpx

        headers = [
            (bytes(k).decode("latin-1"), bytes(v).decode("latin-1"))
            for k, v in scope.get("headers", ())
            if bytes(k).lower() in _FORWARDED
        ]
        started = anyio.current_time()
        payloads: list[str] = []
        offsets: list[float] = []
        decoder = SSEDecoder()
        answered = False
        try:
            async with self._client.stream(
                "POST", self.upstream, content=body, headers=headers
            ) as response:
                returned = [
                    (k.encode("latin-1"), v.encode("latin-1"))
                    for k, v in response.headers.items()
                    if k.lower().encode() in _RETURNED
                ]
                await send(
                    {
                        "type": "http.response.start",
                        "status": response.status_code,
                        "headers": returned,
                    }
                )
                answered = True
                sse = response.status_code == 200 and response.headers.get(
                    "content-type", ""
                ).startswith("text/event-stream")
                async for chunk in response.aiter_raw():
                    await send({"type": "http.response.body", "body": chunk, "more_body": True})
                    if sse:
                        for payload in decoder.feed(chunk):
                            payloads.append(payload)
                            offsets.append(round(anyio.current_time() - started, 6))
                if sse:
                    decoder.close()
        except (httpx.HTTPError, CodecError) as exc:
            _log.warning("record: the run from %s was not saved: %s", self.upstream, exc)
            if answered:  # the upstream's stream broke: break the client's the same way
                raise MockDrop(f"record: the upstream's stream broke: {exc}") from exc
            await send_json_error(
                send,
                BadRequest(
                    502, "upstream_unreachable", f"cannot reach the upstream {self.upstream}: {exc}"
                ),
            )
            return
        await send({"type": "http.response.body", "body": b"", "more_body": False})
        if not sse:
            _log.warning(
                "record: %s answered %s (not an event stream); relayed, not saved",
                self.upstream,
                response.status_code,
            )
            return
        self._save(body, request, payloads, offsets)

    def _save(
        self, body: bytes, request: RunAgentInput, payloads: list[str], offsets: list[float]
    ) -> Path:
        self._count += 1
        run = self.directory / f"{self._count:04d}-{_UNSAFE.sub('_', request.run_id)[:64]}"
        run.mkdir()
        (run / REQUEST_FILE).write_bytes(body)
        lines = [p if "\n" not in p else json.dumps(json.loads(p)) for p in payloads]
        (run / EVENTS_FILE).write_text("".join(f"{line}\n" for line in lines), "utf-8")
        timing: dict[str, Any] = {"offsets": offsets}
        (run / TIMING_FILE).write_text(json.dumps(timing) + "\n", "utf-8")
        _log.info("record: saved %d events in %s", len(payloads), run)
        return run
