"""The gateway runs each of its consumer stages once (issue 15, "no stage runs twice").

The gateway wraps the configured chain as ``ExpandChunks | <chain> | Verify``.
A chain that starts with its own ``ExpandChunks`` or ends with a ``Verify`` as
strict as the gateway's gets them merged; the client must not tell: every
scenario is sent through three gateways over real loopback HTTP, on both of
the gateway's paths (relay: sync chain; apply: a chain with an async stage):

* ``bare`` — the chain alone;
* ``doubled`` — ``ExpandChunks | chain | Verify``: merged;
* ``unmerged`` — the same with stand-ins the gateway cannot merge (subclasses
  named like the originals): what the gateway sent before merging.

``doubled`` must send the bytes ``unmerged`` sends, and its per-run log line
must list one ``ExpandChunks`` and one ``Verify``.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest
from ag_ui.core import BaseEvent
from hypothesis import given, settings
from hypothesis import strategies as st
from starlette.applications import Starlette
from starlette.routing import Route

from agui_pipes import AsyncStreamTransformer, Stage, TransformerChain
from agui_pipes.codecs import SSEDecoder, decode, encode_sse
from agui_pipes.server import Gateway
from agui_pipes.testing.strategies import streams
from agui_pipes.transformers import ExpandChunks, FilterToolCalls, Redact, Verify
from tests._servers import Running, run_input, serve, wait_until

pytestmark = pytest.mark.anyio


class _Upstream:
    """Answers with the SSE text the run input carries, cut where it says.

    The gateway forwards the body as received: ``forwardedProps`` is
    ``{"wire": <SSE text>, "cuts": [byte offsets]}``.
    """

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body", False):
                break
        props = json.loads(body)["forwardedProps"]
        wire: bytes = props["wire"].encode()
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"text/event-stream")],
            }
        )
        start = 0
        for cut in [*sorted(set(props["cuts"])), len(wire)]:
            part, start = wire[start:cut], max(start, cut)
            if part:
                await send({"type": "http.response.body", "body": part, "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})


class _StandInExpand(ExpandChunks):
    """Behaves and is named as ExpandChunks, but is not one: the gateway keeps it."""

    @property
    def name(self) -> str:
        return "ExpandChunks"


class _StandInVerify(Verify):
    """Behaves and is named as Verify, but is not one: the gateway keeps its own too."""

    @property
    def name(self) -> str:
        return "Verify"


def _middle() -> list[Stage]:
    return [FilterToolCalls.deny(["internal_*"]), Redact([r"[0-9]{3,}"], replacement="#")]


def _chain(
    mode: str, first: Callable[[], Stage] | None, last: Callable[[], Stage] | None
) -> Callable[[], TransformerChain]:
    def build() -> TransformerChain:
        stages = [*([first()] if first else []), *_middle()]
        if mode == "apply":
            stages.append(AsyncStreamTransformer())
        return TransformerChain([*stages, *([last()] if last else [])])

    return build


CHAINS: dict[str, tuple[Callable[[], Stage] | None, Callable[[], Stage] | None]] = {
    "bare": (None, None),
    "doubled": (ExpandChunks, Verify),
    "unmerged": (_StandInExpand, _StandInVerify),
    # Not substitutes for the gateway's final check: it appends its own.
    "warn": (ExpandChunks, lambda: Verify(on_violation="warn")),
    "truncated-ok": (None, lambda: Verify(allow_truncated=True)),
    "run-error": (None, lambda: Verify(on_violation="run_error")),
    "producer": (None, lambda: Verify(profile="producer")),
    "disabled": (None, lambda: Verify(enabled=False)),
}


@pytest.fixture(scope="module")
def gateway() -> Iterator[Running]:
    with serve(Starlette(routes=[Route("/echo", _Upstream(), methods=["POST"])])) as upstream:
        gateways = {
            f"/{mode}/{name}": Gateway(
                upstream.url + "/echo", chain=_chain(mode, first, last), keepalive=None
            )
            for mode in ("relay", "apply")
            for name, (first, last) in CHAINS.items()
        }
        # A Verify in the middle of the chain is not the end check either.
        for mode in ("relay", "apply"):
            gateways[f"/{mode}/verify-mid"] = Gateway(
                upstream.url + "/echo",
                chain=lambda: TransformerChain([Verify(), *_middle()]),
                keepalive=None,
            )
        routes = [Route(path, g, methods=["POST"]) for path, g in gateways.items()]

        @asynccontextmanager
        async def lifespan(app: object) -> AsyncIterator[None]:
            try:
                yield
            finally:
                for g in gateways.values():
                    await g.aclose()

        with serve(Starlette(routes=routes, lifespan=lifespan)) as server:
            yield server


async def _body(server: Running, path: str, wire: str, cuts: list[int], run_id: str) -> bytes:
    body = run_input(run_id, forwardedProps={"wire": wire, "cuts": cuts})
    async with httpx.AsyncClient() as client:
        response = await client.post(server.url + path, json=body)
    assert response.status_code == 200
    return response.content


def _events(body: bytes) -> list[Any]:
    return [decode(p).event for p in SSEDecoder().feed(body)]


async def _log_line(caplog: pytest.LogCaptureFixture, run_id: str) -> str:
    marker = f"gateway run {run_id} "
    await wait_until(lambda: any(marker in r.getMessage() for r in caplog.records), 2.0, "log")
    return next(r.getMessage() for r in caplog.records if marker in r.getMessage())


def _wire(*events: dict[str, Any]) -> str:
    return "".join(f"data: {json.dumps(e)}\n\n" for e in events)


STARTED = {"type": "RUN_STARTED", "threadId": "thread-1", "runId": "run-1"}
FINISHED = {"type": "RUN_FINISHED", "threadId": "thread-1", "runId": "run-1"}
SCENARIOS = {
    "valid": _wire(
        STARTED,
        {"type": "TEXT_MESSAGE_CHUNK", "messageId": "m1", "delta": "call 5551234"},
        {"type": "TEXT_MESSAGE_CHUNK", "delta": " now"},
        FINISHED,
    ),
    # A step finished that never started: the chain's Verify (or the gateway's) refuses it.
    "violation": _wire(STARTED, {"type": "STEP_FINISHED", "stepName": "zz"}, FINISHED),
    # A run left open: the end check.
    "open-run": _wire(STARTED, {"type": "TEXT_MESSAGE_START", "messageId": "m1"}),
    # A chunk conflict: the gateway's ExpandChunks refuses it.
    "chunk-conflict": _wire(
        STARTED,
        {"type": "TOOL_CALL_CHUNK", "toolCallId": "c1", "toolCallName": "a", "delta": "{"},
        {"type": "TOOL_CALL_CHUNK", "toolCallId": "c1", "toolCallName": "b", "delta": "}"},
        FINISHED,
    ),
}


@pytest.mark.parametrize("mode", ["relay", "apply"])
@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
async def test_merged_stages_send_what_the_unmerged_chain_sent(
    gateway: Running,
    mode: str,
    scenario: str,
    caplog: pytest.LogCaptureFixture,
    anyio_backend: str,
) -> None:
    caplog.set_level(logging.INFO, logger="agui_pipes.server")
    wire = SCENARIOS[scenario]
    run = f"{scenario}-{mode}-{anyio_backend}"
    doubled = await _body(gateway, f"/{mode}/doubled", wire, [7, 60], f"d-{run}")
    unmerged = await _body(gateway, f"/{mode}/unmerged", wire, [7, 60], f"u-{run}")
    assert doubled == unmerged
    if scenario in ("valid", "chunk-conflict"):
        # Nothing the chain's own Verify raises first: the bare chain sends the same.
        assert doubled == await _body(gateway, f"/{mode}/bare", wire, [7, 60], f"b-{run}")
    last = _events(doubled)[-1]
    if scenario == "valid":
        assert last.type.value == "RUN_FINISHED"
    else:
        assert last.type.value == "RUN_ERROR"
    if scenario == "violation":
        # Found by the chain's own Verify, as before the merge: told, not quoted.
        assert "message is withheld" in last.message and "found by stage Verify" in last.message

    # Each stage ran once: the merged line is the unmerged one without the repeats.
    merged = _comparable(await _log_line(caplog, f"d-{run}"), f"d-{run}")
    kept = _comparable(await _log_line(caplog, f"u-{run}"), f"u-{run}")
    stages = merged.partition("; events ")[2]
    assert stages.count("ExpandChunks") == 1 and stages.count("Verify") == 1, merged
    deduplicated, repeats = re.subn(r"\b(ExpandChunks|Verify) (\d+) → \1 \2\b", r"\1 \2", kept)
    assert repeats == 2, kept
    assert merged == deduplicated


def _comparable(line: str, run_id: str) -> str:
    """A log line without what differs between two runs: the run id and the duration."""
    return re.sub(r" in [0-9.]+s; events ", "; events ", line.replace(run_id, "RUN"))


@settings(max_examples=25, deadline=None)
@given(
    events=streams(max_runs=2, tool_names=["search", "internal_debug"]),
    cuts=st.lists(st.integers(0, 5_000), max_size=4),
)
async def test_merged_stages_are_byte_identical_on_generated_streams(
    gateway: Running, events: list[BaseEvent], cuts: list[int]
) -> None:
    wire = "".join(encode_sse(e).decode() for e in events)
    for mode in ("relay", "apply"):
        doubled = await _body(gateway, f"/{mode}/doubled", wire, cuts, "gen")
        assert doubled == await _body(gateway, f"/{mode}/unmerged", wire, cuts, "gen")
        assert doubled == await _body(gateway, f"/{mode}/bare", wire, cuts, "gen")


@pytest.mark.parametrize("mode", ["relay", "apply"])
@pytest.mark.parametrize(
    ("chain", "scenario"),
    [
        ("warn", "violation"),
        ("truncated-ok", "valid"),
        ("run-error", "violation"),
        ("producer", "valid"),
        ("disabled", "violation"),
        ("verify-mid", "valid"),
    ],
)
async def test_a_verify_that_is_not_the_gateways_check_keeps_the_gateways(
    gateway: Running,
    mode: str,
    chain: str,
    scenario: str,
    caplog: pytest.LogCaptureFixture,
    anyio_backend: str,
) -> None:
    caplog.set_level(logging.INFO, logger="agui_pipes.server")
    run = f"{chain}-{scenario}-{mode}-{anyio_backend}"
    body = await _body(gateway, f"/{mode}/{chain}", SCENARIOS[scenario], [], run)
    line = (await _log_line(caplog, run)).partition("; events ")[2]
    # The chain's Verify, then the gateway's own, last.
    assert line.count("Verify") == 2, line
    assert line.count("ExpandChunks") == 1, line
    assert line.split(" → ")[-2].startswith("Verify"), line
    if chain in ("warn", "disabled"):
        # The gateway's own check found it: told in full, not withheld.
        last = _events(body)[-1]
        assert last.type.value == "RUN_ERROR" and last.code == "PROTOCOL_VIOLATION"
        assert "withheld" not in last.message
