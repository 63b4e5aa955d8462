"""Both servers take one set of options: ``ServerOptions``, whole or field by field.

The agent endpoint and the gateway accept the same durable, limits, compat and
repair options (docs/serving.md, "Options of both servers"), with the defaults
written once, in ``ServerOptions``; a keyword overrides the object it is given
with; a misspelt one fails at construction, naming the server.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from agui_pipes import Limits
from agui_pipes.demo import DemoAgent
from agui_pipes.server import AgentEndpoint, Gateway, ServerOptions, agent_route, gateway_route
from agui_pipes.store import MemoryEventLog

UPSTREAM = "http://127.0.0.1:1/"


def _endpoint(**keywords: Any) -> AgentEndpoint:
    return AgentEndpoint(DemoAgent(), **keywords)


def _gateway(**keywords: Any) -> Gateway:
    return Gateway(UPSTREAM, **keywords)


def _everyone(request: Any) -> str:
    return "everyone"


SERVERS = [pytest.param(_endpoint, id="endpoint"), pytest.param(_gateway, id="gateway")]


@pytest.mark.parametrize("server", SERVERS)
def test_without_options_a_server_has_the_defaults(server: Any) -> None:
    assert server().options == ServerOptions()


@pytest.mark.parametrize("server", SERVERS)
def test_every_option_is_a_keyword_of_both_servers(server: Any) -> None:
    values = {
        "keepalive": 2.5,
        "send_buffer": 1234,
        "send_timeout": None,
        "max_body_bytes": 99,
        "verify": False,
        "limits": Limits(max_depth=7),
        "detach_grace": 3.0,
        "owner_timeout": 4.0,
        "repair": True,
        "compat_down": True,
        "compat_undeclared": "0.0.45",
        "authorize": _everyone,
        "allow_tools": ("search", "ui_*"),
        "concurrency": "supersede",
        "shutdown_timeout": 5.0,
        "interrupts": "off",
    }
    # history="server" needs a store: tests/server/test_server_trust.py
    assert set(values) | {"logger", "store", "history"} == {
        f.name for f in dataclasses.fields(ServerOptions)
    }
    assert server(**values).options == ServerOptions(**values)


@pytest.mark.parametrize("server", SERVERS)
def test_a_keyword_overrides_the_options_object(server: Any) -> None:
    given = ServerOptions(keepalive=5.0, repair=True)
    options = server(options=given, keepalive=None).options
    assert options == dataclasses.replace(given, keepalive=None)
    assert given.keepalive == 5.0  # the caller's object is left as it was


@pytest.mark.parametrize(("server", "name"), [(_endpoint, "AgentEndpoint"), (_gateway, "Gateway")])
def test_an_unknown_keyword_names_the_server(server: Any, name: str) -> None:
    with pytest.raises(
        TypeError, match=rf"^{name}\(\) got an unexpected keyword argument 'kepalive'$"
    ):
        server(kepalive=1.0)


@pytest.mark.parametrize("server", SERVERS)
def test_options_must_be_server_options(server: Any) -> None:
    with pytest.raises(TypeError, match=r"options must be an agui_pipes\.server\.ServerOptions"):
        server(options={"keepalive": 1.0})


@pytest.mark.parametrize("server", SERVERS)
def test_options_are_checked_as_keywords_are(server: Any) -> None:
    with pytest.raises(ValueError, match="keepalive must be a positive number"):
        server(options=ServerOptions(keepalive=0))


@pytest.mark.parametrize("server", SERVERS)
def test_owner_timeout_is_set_on_either_servers_store(server: Any) -> None:
    store = MemoryEventLog()
    built = server(options=ServerOptions(store=store), owner_timeout=2.0)
    assert built.durable is not None
    assert store.owner_timeout == 2.0


def test_a_route_refuses_a_store_given_in_the_options() -> None:
    options = ServerOptions(store="memory:")
    with pytest.raises(TypeError, match="agent_routes"):
        agent_route("/agent", DemoAgent(), options=options)
    with pytest.raises(TypeError, match=r"Gateway\(upstream, store=...\).routes"):
        gateway_route("/", UPSTREAM, options=options)
