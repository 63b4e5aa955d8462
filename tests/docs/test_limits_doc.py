"""docs/limits.md states every bound with its default: the figures must be the code's."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest

from agui_pipes import Limits
from agui_pipes._cli._input import MAX_DOCUMENT_BYTES
from agui_pipes._foundation.limits import MAX_EVENT_ID_LENGTH, MAX_ID_LENGTH, MAX_SEQ
from agui_pipes.codecs import DEFAULT_MAX_FRAME_BYTES
from agui_pipes.config import _bounds
from agui_pipes.demo import DemoAgent
from agui_pipes.driver import DEFAULT_BACKPRESSURE
from agui_pipes.server import AgentEndpoint, Gateway, ServerOptions
from agui_pipes.server._durable import DEFAULT_DETACH_GRACE
from agui_pipes.server._frames import DEFAULT_SEND_BUFFER
from agui_pipes.server._http import DEFAULT_MAX_BODY_BYTES
from agui_pipes.server._store_health import HEALTH_TIMEOUT
from agui_pipes.server._streaming import DEFAULT_SEND_TIMEOUT
from agui_pipes.server._upstream_pool import DEFAULT_IDLE_CONNECTIONS
from agui_pipes.store import EventLog, RunRecorder
from agui_pipes.store._sqlite_connection import DEFAULT_TIMEOUT
from agui_pipes.store._sqlite_file import WAL_LIMIT
from agui_pipes.store._sqlite_health import FAILURE_MEMORY, HEALTH_EVERY

DOC = (Path(__file__).resolve().parents[2] / "docs" / "limits.md").read_text(encoding="utf-8")

_DEFAULTS = Limits()
BOUNDS = {
    "Limits.max_depth": _DEFAULTS.max_depth,
    "Limits.max_nodes": _DEFAULTS.max_nodes,
    "Limits.max_bytes": _DEFAULTS.max_bytes,
    "DEFAULT_MAX_FRAME_BYTES": DEFAULT_MAX_FRAME_BYTES,
    "MAX_DOCUMENT_BYTES": MAX_DOCUMENT_BYTES,
    "DEFAULT_MAX_BODY_BYTES": DEFAULT_MAX_BODY_BYTES,
    "MAX_ID_LENGTH": MAX_ID_LENGTH,
    "MAX_EVENT_ID_LENGTH": MAX_EVENT_ID_LENGTH,
    "MAX_SEQ": MAX_SEQ,
    "EventLog.resume_wait": EventLog.resume_wait,
    "MAX_CHAIN_BYTES": _bounds.MAX_CHAIN_BYTES,
    "MAX_CHAIN_DEPTH": _bounds.MAX_CHAIN_DEPTH,
    "MAX_CHAIN_NODES": _bounds.MAX_CHAIN_NODES,
    "MAX_CHAIN_STAGES": _bounds.MAX_CHAIN_STAGES,
    "DEFAULT_SEND_BUFFER": DEFAULT_SEND_BUFFER,
    "DEFAULT_SEND_TIMEOUT": DEFAULT_SEND_TIMEOUT,
    "DEFAULT_BACKPRESSURE": DEFAULT_BACKPRESSURE,
    "DEFAULT_IDLE_CONNECTIONS": DEFAULT_IDLE_CONNECTIONS,
    # the servers' default is their options' (the durable module loads only with a store)
    "DEFAULT_DETACH_GRACE": ServerOptions().detach_grace,
    "DEFAULT_SHUTDOWN_TIMEOUT": ServerOptions().shutdown_timeout,
    **{
        f"RunRecorder.{name}": inspect.signature(RunRecorder).parameters[name].default
        for name in ("max_events", "max_bytes", "stall_timeout", "close_timeout", "max_batch")
    },
    "SQLiteEventLog.timeout": DEFAULT_TIMEOUT,
    "WAL_LIMIT": WAL_LIMIT,
    "HEALTH_EVERY": HEALTH_EVERY,
    "FAILURE_MEMORY": FAILURE_MEMORY,
    "HEALTH_TIMEOUT": HEALTH_TIMEOUT,
}


@pytest.mark.parametrize(("name", "value"), BOUNDS.items())
def test_the_limits_page_states_the_codes_default(name: str, value: object) -> None:
    assert f"| `{name}` | {value} |" in DOC, f"docs/limits.md: `{name}` should read {value}"


def test_the_gateways_upstream_idle_is_the_pools_default() -> None:
    parameter = inspect.signature(Gateway).parameters["upstream_idle"]
    assert parameter.default == DEFAULT_IDLE_CONNECTIONS


def test_the_servers_detach_grace_is_the_durable_default() -> None:
    assert AgentEndpoint(DemoAgent()).options.detach_grace == DEFAULT_DETACH_GRACE
    assert Gateway("http://127.0.0.1:1/").options.detach_grace == DEFAULT_DETACH_GRACE
