"""The options both servers share, with their defaults written once.

``AgentEndpoint``, ``Gateway``, ``build_app`` and ``agui-pipes serve`` take
the same knobs for streaming to a client (keep-alive, send buffer and
timeout), for the request (body size), for what a run may publish
(``limits``), for durable runs (``store``, ``detach_grace``,
``owner_timeout``, ``shutdown_timeout``), for who may call (``authorize``), for how much of a
request is trusted (``allow_tools``, ``history``) and for rewriting
(``verify``, ``repair``, ``compat_down``, ``compat_undeclared``).
``ServerOptions`` holds them; each server accepts the whole object as
``options=`` and every field as a keyword argument of the same name, which
overrides the object's value. A default lives here only:
the servers, the app builder and the command line read it from here.

What only one server has (the endpoint's ``echo_input``, the gateway's
upstream ``timeout``, ``max_frame_bytes``, ``forward_headers`` and
``client``) stays a keyword of that server.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Literal, TypedDict

from .._foundation.limits import Limits

if TYPE_CHECKING:
    from ..store import EventLog
    from .auth import Authorize
else:
    # The event log's classes load only for a server with a store; the run-time
    # hint (typing.get_type_hints) of ``store`` reads Any rather than load them
    # (and of ``authorize``, rather than load the authenticators).
    EventLog = Any
    Authorize = Any

__all__ = [
    "DEFAULT_COMPAT_UNDECLARED",
    "DEFAULT_DETACH_GRACE",
    "DEFAULT_KEEPALIVE",
    "DEFAULT_MAX_BODY_BYTES",
    "DEFAULT_OPTIONS",
    "DEFAULT_SEND_BUFFER",
    "DEFAULT_SEND_TIMEOUT",
    "DEFAULT_SHUTDOWN_TIMEOUT",
    "Concurrency",
    "Interrupts",
    "ServerOptionValues",
    "ServerOptions",
    "Streaming",
    "check_send_limits",
    "check_streaming",
    "records",
    "server_options",
    "streaming",
]

DEFAULT_KEEPALIVE: Final = 15.0
"""Seconds without a frame before a keep-alive comment goes to the client."""

DEFAULT_SEND_BUFFER: Final = 4 * 1024 * 1024
"""Bytes of encoded frames queued per connection before the run waits for the client."""

DEFAULT_SEND_TIMEOUT: Final = 30.0
"""Seconds one write to the client may stay pending before the client counts as gone."""

DEFAULT_MAX_BODY_BYTES: Final = 10 * 1024 * 1024
"""The largest POSTed RunAgentInput accepted (413 past it)."""

Interrupts = Literal["enforce", "cancel", "off"]
"""Whether a run POST is checked against its thread's interrupt contract (with a store):
``"enforce"`` refuses a request that leaves an interrupt unanswered or answers one that
is not open (docs/interrupts.md); ``"cancel"`` checks the same but lets a run that leaves
open interrupts unanswered (new user input) go ahead, answering them ``cancelled`` in its
``resume``; ``"off"`` leaves it to an upstream that checks itself."""

Concurrency = Literal["reject", "supersede"]
"""What a run POST on a thread with a live run does (with a store): refused with 409
``thread_busy``, or the live run stopped first."""

DEFAULT_DETACH_GRACE: Final = 30.0
"""Seconds a run whose client left goes on waiting for a resume reader."""

DEFAULT_SHUTDOWN_TIMEOUT: Final = 10.0
"""Seconds a shutdown gives the live runs to end (each with a recorded RUN_ERROR CANCELLED)
before the event log is closed; runs still going then are abandoned."""

DEFAULT_COMPAT_UNDECLARED: Final = "0.0.57"
"""The protocol era served to a request that declares no ``protocolVersion`` (with
``compat_down``): the last before 1.0, so only the subagent material goes."""


@dataclass(frozen=True)
class ServerOptions:
    """What an agent endpoint or a gateway does besides producing the run (module doc).

    ``keepalive``: idle seconds before a keep-alive comment (None: none).
    ``send_buffer`` / ``send_timeout``: bytes queued for a slow client before
    the run waits for it, and seconds a client may read nothing before it
    counts as gone (None: wait forever). ``max_body_bytes``: the largest
    request body. ``verify``: the endpoint's producer verification, the
    gateway's consumer verification. ``logger``: where the per-run lines go
    (None: ``agui_pipes.server``). ``limits``: the state a run may publish
    and the default of the stages the chain factory builds (None: the limits
    in effect). ``store``, ``detach_grace``, ``owner_timeout``: the event log
    of durable runs (docs/durable.md). ``repair``, ``compat_down``,
    ``compat_undeclared``: docs/repair.md and docs/compat.md.
    ``allow_tools``: glob patterns a declared frontend tool's name must match
    (None: any tool). ``history``: ``"client"`` takes the request's messages as
    the thread's past; ``"server"`` (with a store) uses the stored thread
    history and takes only new user and tool messages from the client
    (docs/security.md, "Request trust").
    ``concurrency``: what a run POST on a thread with a live run gets, with a
    store: ``"reject"`` (409 ``thread_busy``) or ``"supersede"`` (the live
    run is stopped first); docs/durable.md, "One run per thread".
    ``interrupts``: with a store, ``"enforce"`` checks each run POST against the
    thread's interrupt contract before anything runs (docs/interrupts.md);
    ``"cancel"`` checks the same but admits a run that leaves open interrupts
    unanswered, with them answered ``cancelled``; ``"off"`` does not check.
    ``shutdown_timeout``: seconds a shutdown gives the live runs to end
    (stopped, each with a recorded RUN_ERROR CANCELLED) before the store is
    closed; docs/durable.md, "Shutdown".
    """

    keepalive: float | None = DEFAULT_KEEPALIVE
    send_buffer: int = DEFAULT_SEND_BUFFER
    send_timeout: float | None = DEFAULT_SEND_TIMEOUT
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    verify: bool = True
    logger: logging.Logger | None = None
    limits: Limits | None = None
    store: EventLog | str | None = None
    detach_grace: float = DEFAULT_DETACH_GRACE
    owner_timeout: float | None = None
    repair: bool = False
    compat_down: bool = False
    compat_undeclared: str = DEFAULT_COMPAT_UNDECLARED
    authorize: Authorize | None = None
    allow_tools: tuple[str, ...] | None = None
    history: Literal["client", "server"] = "client"
    concurrency: Concurrency = "reject"
    interrupts: Interrupts = "enforce"
    shutdown_timeout: float = DEFAULT_SHUTDOWN_TIMEOUT


class ServerOptionValues(TypedDict, total=False):
    """``ServerOptions``' fields as keyword arguments (each overrides ``options=``)."""

    keepalive: float | None
    send_buffer: int
    send_timeout: float | None
    max_body_bytes: int
    verify: bool
    logger: logging.Logger | None
    limits: Limits | None
    store: EventLog | str | None
    detach_grace: float
    owner_timeout: float | None
    repair: bool
    compat_down: bool
    compat_undeclared: str
    authorize: Authorize | None
    allow_tools: tuple[str, ...] | None
    history: Literal["client", "server"]
    concurrency: Concurrency
    interrupts: Interrupts
    shutdown_timeout: float


DEFAULT_OPTIONS: Final = ServerOptions()

_FIELDS: Final = frozenset(field.name for field in dataclasses.fields(ServerOptions))


def server_options(
    options: ServerOptions | None, given: Mapping[str, object], owner: str
) -> ServerOptions:
    """``options`` (or the defaults) with the keyword arguments ``given`` to ``owner`` applied.

    An unknown keyword is refused as Python refuses one (``owner`` names the
    callable), so a typo fails at construction rather than being ignored.
    """
    if options is None:
        options = DEFAULT_OPTIONS
    elif not isinstance(options, ServerOptions):
        raise TypeError(
            f"options must be an agui_pipes.server.ServerOptions, got {type(options).__name__}"
        )
    for name in given:
        if name not in _FIELDS:
            raise TypeError(f"{owner}() got an unexpected keyword argument {name!r}")
    return dataclasses.replace(options, **given) if given else options  # type: ignore[arg-type]


class Streaming(TypedDict):
    """The keyword arguments of an ``SSERun`` that come from a server's options."""

    keepalive: float | None
    send_buffer: int
    send_timeout: float | None
    logger: logging.Logger


def streaming(options: ServerOptions, logger: logging.Logger) -> Streaming:
    """How every response of a server streams: ``SSERun(..., **streaming(options, log))``."""
    return {
        "keepalive": options.keepalive,
        "send_buffer": options.send_buffer,
        "send_timeout": options.send_timeout,
        "logger": logger,
    }


def records(keywords: Mapping[str, object]) -> bool:
    """Whether a server given ``keywords`` has an event log (as ``store=`` or in ``options=``)."""
    if keywords.get("store") is not None:
        return True
    options = keywords.get("options")
    return isinstance(options, ServerOptions) and options.store is not None


def check_streaming(options: ServerOptions) -> None:
    """Raise ``ValueError`` for a keep-alive, send buffer or send timeout that cannot work."""
    keepalive = options.keepalive
    if keepalive is not None and keepalive <= 0:
        raise ValueError(
            f"keepalive must be a positive number of seconds or None, got {keepalive!r}"
        )
    check_send_limits(options.send_buffer, options.send_timeout)


def check_send_limits(send_buffer: int, send_timeout: float | None) -> None:
    """Raise ``ValueError`` for a ``send_buffer`` / ``send_timeout`` that cannot work."""
    if not isinstance(send_buffer, int) or isinstance(send_buffer, bool) or send_buffer < 1:
        raise ValueError(f"send_buffer must be a positive number of bytes, got {send_buffer!r}")
    if send_timeout is not None and not send_timeout > 0:
        raise ValueError(
            f"send_timeout must be a positive number of seconds or None, got {send_timeout!r}"
        )
