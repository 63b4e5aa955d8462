"""``agui-pipes serve`` — put a chain in front of an AG-UI agent, over HTTP.

Three modes:

* ``--upstream URL`` — a gateway: each run POSTed here is forwarded to the
  upstream agent, and its events come back through chunk expansion,
  verification and the chain in ``--config``;
* ``--agent module:attr`` — serve that object in this process (``_served_agent``):
  a framework's agent an installed integration recognises (a pydantic-ai
  ``Agent``, a compiled LangGraph graph), whose events go through the same
  expansion, verification and chain as an upstream's, a producer, or a driver
  agent; ``--timeout`` is a producer's longest silence; an integration's own
  stage (ADK's ``adk_chain()``) runs before ``--config``'s;
* ``--demo`` — serve the built-in demo agent (through ``--config``, or the
  demo's default chain), handy to try a client or to be an upstream.

The agent endpoint is ``POST --path`` (``/`` by default); ``GET /healthz``
answers ``ok``. One log line per run at INFO shows what each stage did.
With ``--repair`` a fresh ``Repair`` stage (the request's thread and run ids)
runs before the chain on every run — after chunk expansion in a gateway, on the
agent's events for the demo — and the per-run line ends with its fix count
(``; repaired 2 (content-after-end 2)``).
With ``--store URL`` (the demo agent or a gateway) every run is recorded in that event
log, and ``--path`` also serves ``runs/{runId}`` (resume), ``runs/{runId}/stop``
and ``threads/{threadId}`` (see docs/durable.md). ``--otel`` traces every run
with OpenTelemetry, exporting as the ``OTEL_*`` variables say (docs/observability.md).
With ``--compat`` each request's declared ``protocolVersion`` picks the rewrite its
client's era needs (docs/compat.md).

Who may call (docs/security.md): ``--auth-tokens FILE`` (``TOKEN SCOPE`` lines,
re-read on SIGHUP) or ``--auth-jwt`` (``--jwt-secret-file`` or ``--jwt-jwks-file``,
``--jwt-audience``, ``--jwt-issuer``, ``--jwt-scope-claim``) authorize every
route, the inspector's too, and key each caller's runs by its scope. Without
either, every client shares one scope: that is refused on a ``--host`` other
machines can reach unless ``--insecure-no-auth`` says it is meant.

``--server NAME`` picks the HTTP stack (``_servers``): by default uvicorn's
pure-Python h11 and asyncio; ``uvicorn`` takes httptools and uvloop when both are
installed (the ``fast`` extra), ``uvicorn-fast`` insists on them.

SIGINT (Ctrl-C) or SIGTERM stops the live runs at once — each ends with a
recorded RUN_ERROR code CANCELLED, sent to its client — then closes the
event log, within ``--shutdown-timeout`` seconds (``_shutdown``); a second
signal exits at once.

Exit status: 0 after a clean shutdown, 1 if the server could not start, 2
for usage, an invalid chain file, or an auth file that cannot be read or
parsed, 3 for a shutdown that abandoned a run which did not end in time, 128
+ the signal's number (130 for Ctrl-C) when a second signal cut it short.
"""

from __future__ import annotations

import argparse
import contextlib
import ipaddress
import logging
import signal
import socket
import sys
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from ..server._options import (
    DEFAULT_COMPAT_UNDECLARED,
    DEFAULT_DETACH_GRACE,
    DEFAULT_KEEPALIVE,
    DEFAULT_SEND_BUFFER,
    DEFAULT_SEND_TIMEOUT,
    DEFAULT_SHUTDOWN_TIMEOUT,
)
from ..server.auth import AuthConfigError, TokenFile
from ._chainfile import EXIT_CONFIG, load_or_report, plugin_warnings_on_stderr
from ._limits import add_limit_options, limits_of
from ._servers import DEFAULT_SERVER, SERVERS, ServerStack, UnavailableServer, stack_of

if TYPE_CHECKING:
    from .._pipeline.chain import TransformerChain
    from ..server import ServerOptions

__all__ = ["register"]


def register(subparsers: Any) -> None:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "serve",
        help="serve a chain over HTTP in front of an upstream agent (or the demo agent)",
        description=(
            "Serve AG-UI over HTTP: POST a RunAgentInput, get the run as SSE. With --upstream "
            "the runs are forwarded to that agent and its events pass through the chain; "
            "with --demo the built-in demo agent answers."
        ),
    )
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--upstream", metavar="URL", help="the AG-UI agent to forward runs to")
    source.add_argument(
        "--agent",
        metavar="MODULE:ATTR",
        help=(
            "serve this object in-process: a pydantic-ai Agent, a compiled LangGraph graph, a "
            "producer or a driver agent (imported with the current directory on the path)"
        ),
    )
    source.add_argument("--demo", action="store_true", help="serve the built-in demo agent")
    parser.add_argument(
        "--config",
        metavar="CHAIN.yaml",
        help="the chain to apply (with --demo, default: the demo's default chain)",
    )
    parser.add_argument(
        "--allow-imports",
        action="store_true",
        help="permit `type: module:attr` references in --config",
    )
    parser.add_argument("--host", default="127.0.0.1", help="interface (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8000, help="port (default 8000)")
    parser.add_argument("--path", default="/", help="path of the agent endpoint (default /)")
    parser.add_argument(
        "--server",
        choices=sorted(SERVERS),
        default=DEFAULT_SERVER,
        help=(
            "the HTTP stack: "
            + "; ".join(f"{name}: {what}" for name, what in SERVERS.items())
            + f" (default {DEFAULT_SERVER})"
        ),
    )
    parser.add_argument(
        "--keepalive",
        type=float,
        default=DEFAULT_KEEPALIVE,
        metavar="SECONDS",
        help=(
            f"send an SSE comment after this much idle time (default {DEFAULT_KEEPALIVE:g}; "
            "0 disables)"
        ),
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=60.0,
        metavar="SECONDS",
        help=(
            "gateway: longest silence tolerated from the upstream; --agent: from a producer "
            "(default 60)"
        ),
    )
    parser.add_argument(
        "--send-buffer",
        type=int,
        default=DEFAULT_SEND_BUFFER,
        metavar="BYTES",
        help=(
            "encoded events queued per client before the run waits for it "
            f"(default {DEFAULT_SEND_BUFFER // (1024 * 1024)} MiB)"
        ),
    )
    parser.add_argument(
        "--send-timeout",
        type=float,
        default=DEFAULT_SEND_TIMEOUT,
        metavar="SECONDS",
        help=(
            "a client that reads nothing this long is disconnected "
            f"(default {DEFAULT_SEND_TIMEOUT:g}; 0 disables)"
        ),
    )
    parser.add_argument(
        "--store",
        metavar="URL",
        help=(
            "record every run (demo or gateway) in this event log (memory:, sqlite:///runs.db, "
            "redis://host:6379/0) so clients can resume runs and load thread history; the "
            "history keeps the user's turns (each run records its new input messages), no "
            "echo of the input needed"
        ),
    )
    parser.add_argument(
        "--detach-grace",
        type=float,
        default=DEFAULT_DETACH_GRACE,
        metavar="SECONDS",
        help=(
            "with --store: how long a run whose client left goes on waiting for a resume "
            f"before it is cancelled (default {DEFAULT_DETACH_GRACE:g})"
        ),
    )
    parser.add_argument(
        "--shutdown-timeout",
        type=float,
        default=DEFAULT_SHUTDOWN_TIMEOUT,
        metavar="SECONDS",
        help=(
            "on SIGINT / SIGTERM: the live runs are stopped (a recorded RUN_ERROR CANCELLED "
            "each) and the server exits within this many seconds; a run still going then is "
            f"abandoned (default {DEFAULT_SHUTDOWN_TIMEOUT:g})"
        ),
    )
    parser.add_argument(
        "--allow-tools",
        action="append",
        metavar="PATTERN",
        help=(
            "accept only frontend tools whose name matches this glob pattern (repeatable; "
            "a request declaring another tool is refused with 422 tool_not_allowed)"
        ),
    )
    parser.add_argument(
        "--history",
        choices=("client", "server"),
        default="client",
        help=(
            "with --store: 'server' uses the stored thread history and accepts only new "
            "user and tool messages from the client (default 'client': the request's messages)"
        ),
    )
    parser.add_argument(
        "--concurrency",
        choices=("reject", "supersede"),
        default="reject",
        help=(
            "with --store: a run POSTed on a thread whose run is still live is refused "
            "with 409 thread_busy (reject, the default) or stops that run first (supersede)"
        ),
    )
    parser.add_argument(
        "--interrupts",
        choices=("enforce", "cancel", "off"),
        default="enforce",
        help=(
            "with --store: check each run POST against its thread's interrupt contract "
            "before anything runs (enforce, the default: every open interrupt answered once, "
            "none answered twice or after it expired); cancel checks the same but lets new "
            "input through, answering the pending interrupts cancelled; off leaves it to "
            "the upstream"
        ),
    )
    parser.add_argument(
        "--compat",
        action="store_true",
        help=(
            "serve clients of older protocol versions: each request's declared "
            "protocolVersion picks the era rewrite of its stream (docs/compat.md)"
        ),
    )
    parser.add_argument(
        "--compat-undeclared",
        default=DEFAULT_COMPAT_UNDECLARED,
        metavar="VERSION",
        help=(
            "with --compat: the protocol version assumed for a request that declares none "
            f"(default {DEFAULT_COMPAT_UNDECLARED}, the last era before 1.0)"
        ),
    )
    parser.add_argument(
        "--no-verify",
        action="store_true",
        help="gateway: do not verify the upstream's events (chunks are still expanded)",
    )
    parser.add_argument(
        "--repair",
        action="store_true",
        help=(
            "repair each run's events before the chain (late tool-call arguments, a second "
            "terminal event, items left open, ...); the per-run log line counts the fixes"
        ),
    )
    parser.add_argument(
        "--pace",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="demo: pause between streamed words (default 0)",
    )
    parser.add_argument(
        "--log-level",
        type=str.lower,  # INFO, Info and info alike, as logging itself spells them
        choices=("debug", "info", "warning", "error"),
        default="info",
        help="logging level (default info: one line per run)",
    )
    parser.add_argument(
        "--otel",
        action="store_true",
        help=(
            "trace every run with OpenTelemetry, configured from the OTEL_* environment "
            "(OTLP when installed, else the console); adds the opentelemetry stage last "
            "unless the chain has one (needs: pip install 'agui-pipes[otel]')"
        ),
    )
    parser.add_argument(
        "--cors-origin",
        action="append",
        default=[],
        metavar="ORIGIN",
        help=(
            "let a browser app on ORIGIN (scheme://host[:port], as its Origin header says) "
            "call this server; repeatable (default: no cross-origin calls)"
        ),
    )
    parser.add_argument(
        "--inspect",
        action="store_true",
        help="also serve the inspector at /inspect, showing the last 50 runs (live ones update)",
    )
    parser.add_argument(
        "--inspect-max-mib",
        type=int,
        default=256,
        metavar="MIB",
        help="--inspect: what the recorded runs hold together, in MiB (default 256)",
    )
    parser.add_argument(
        "--inspect-run-max-mib",
        type=int,
        default=32,
        metavar="MIB",
        help="--inspect: what one recorded run holds, in MiB; the rest is not kept (default 32)",
    )
    auth = parser.add_argument_group("who may call (docs/security.md)")
    auth.add_argument(
        "--auth-tokens",
        metavar="FILE",
        help=(
            "bearer tokens, one 'TOKEN SCOPE' pair per line (# comments); each scope's runs "
            "and threads are its own. Re-read on SIGHUP"
        ),
    )
    auth.add_argument(
        "--auth-jwt",
        action="store_true",
        help="bearer JWTs (needs --jwt-secret-file or --jwt-jwks-file; the 'auth' extra)",
    )
    auth.add_argument("--jwt-secret-file", metavar="FILE", help="--auth-jwt: the HMAC secret")
    auth.add_argument(
        "--jwt-jwks-file", metavar="FILE", help="--auth-jwt: the JSON Web Key Set of the issuer"
    )
    auth.add_argument("--jwt-audience", metavar="AUD", help="--auth-jwt: the required 'aud'")
    auth.add_argument("--jwt-issuer", metavar="ISS", help="--auth-jwt: the required 'iss'")
    auth.add_argument(
        "--jwt-scope-claim",
        default="sub",
        metavar="CLAIM",
        help="--auth-jwt: the claim naming the caller's scope (default sub)",
    )
    auth.add_argument(
        "--insecure-no-auth",
        action="store_true",
        help=(
            "serve a non-loopback --host without authentication: every client shares one "
            "scope and can read, stop and join every run"
        ),
    )
    add_limit_options(parser)
    parser.set_defaults(handler=_serve)


def _usage(message: str) -> int:
    print(f"agui-pipes serve: {message}", file=sys.stderr)
    return 2


def _serve(args: argparse.Namespace) -> int:
    problem = _usage_problem(args)
    if problem is not None:
        return _usage(problem)
    try:
        import uvicorn

        from ..server import build_app
    except ImportError as exc:
        return _usage(
            f"serving needs the server extras: pip install 'agui-pipes[server,http]' ({exc})"
        )

    try:
        stack = stack_of(args.server)
    except UnavailableServer as exc:
        return _usage(str(exc))

    try:
        authorize = _authorize_of(args)
    except (AuthConfigError, ImportError) as exc:
        return _usage(str(exc))

    chain = _chain_of(args)
    if isinstance(chain, int):
        return chain
    served: Callable[[], TransformerChain] | None = chain
    traced_to = None
    if args.otel:
        from ._otel import SetupError, configure_from_environment, with_trace

        try:
            traced_to = configure_from_environment(
                lambda note: print(f"agui-pipes serve: {note}", file=sys.stderr)
            )
            served = with_trace(chain)
        except SetupError as exc:
            return _usage(str(exc))

    inspected = None
    if args.inspect:
        from ..inspector import RecentRuns

        inspected = RecentRuns(
            max_bytes=args.inspect_max_mib * 1024 * 1024,
            max_run_bytes=args.inspect_run_max_mib * 1024 * 1024,
        )
        served = _recording(served, inspected)

    try:
        if args.demo:
            from ..demo import DemoAgent

            app = build_app(
                agent=DemoAgent(pace=args.pace),
                chain=served,
                path=args.path,
                options=_options_of(args),
                cors_origins=args.cors_origin,
                authorize=authorize,
            )
            what = "the demo agent"
        elif args.agent:
            from ._served_agent import TargetError, served_agent

            try:
                target = served_agent(args.agent)
            except TargetError as exc:
                return _usage(str(exc))
            extra: dict[str, Any] = {target.kind: target.value}
            if target.kind == "producer":
                extra["producer_timeout"] = args.timeout
            app = build_app(
                chain=served if target.chain is None else _Headed(target.chain, served),
                path=args.path,
                options=_options_of(args),
                cors_origins=args.cors_origin,
                authorize=authorize,
                **extra,
            )
            what = target.described
        else:
            app = build_app(
                upstream=args.upstream,
                chain=served,
                path=args.path,
                options=_options_of(args),
                timeout=_timeout(args.timeout),
                cors_origins=args.cors_origin,
                authorize=authorize,
            )
            what = f"a gateway to {args.upstream}"
    except (TypeError, ValueError) as exc:
        return _usage(str(exc))
    stop_runs = app.state.agui_server.stop_runs
    if inspected is not None:
        from ..inspector import inspector_app, with_inspector

        inspector = inspector_app(inspected, authorize=authorize, send_to=(app, args.path))
        wrapped: Any = with_inspector(app, inspector)
        app = wrapped

    _configure_logging(args.log_level)
    _log_start(args, what, chain, traced_to, inspected is not None, stack)
    _log_auth(args, authorize)
    if isinstance(authorize, TokenFile):
        _reload_on_sighup(authorize)
    return _run(uvicorn, app, args, stop_runs, stack)


def _usage_problem(args: argparse.Namespace) -> str | None:
    """What is wrong with the command line (the usage message), or None."""
    if not args.upstream and not args.demo and not args.agent:
        return (
            "give --upstream URL (a gateway), --agent MODULE:ATTR (an agent in this process) "
            "or --demo (the demo agent)"
        )
    if not args.path.startswith("/"):
        return f"--path must start with '/', got {args.path!r}"
    if args.inspect and (args.path.rstrip("/") + "/").startswith("/inspect/"):
        return (
            f"--path {args.path} would be hidden by --inspect, which serves "
            "/inspect/; choose another --path"
        )
    if not 1 <= args.inspect_run_max_mib <= args.inspect_max_mib:
        return (
            f"--inspect-run-max-mib must be >= 1 and at most --inspect-max-mib "
            f"({args.inspect_max_mib}), got {args.inspect_run_max_mib}"
        )
    if args.keepalive < 0 or args.timeout <= 0 or args.pace < 0:
        return "--keepalive and --pace must be >= 0 and --timeout > 0"
    if args.send_buffer < 1 or not args.send_timeout >= 0:
        return (
            f"--send-buffer must be a positive number of bytes (got {args.send_buffer}) and "
            f"--send-timeout a number of seconds >= 0 (got {args.send_timeout})"
        )
    if not args.shutdown_timeout > 0:
        return f"--shutdown-timeout must be a number of seconds > 0, got {args.shutdown_timeout}"
    if not args.detach_grace >= 0:
        return f"--detach-grace must be a number of seconds >= 0, got {args.detach_grace}"
    if args.history == "server" and args.store is None:
        return "--history server takes the thread's past from the event log: add --store URL"
    return _auth_problem(args)


_AUTH_FLAGS = "--auth-tokens FILE or --auth-jwt (with --jwt-secret-file or --jwt-jwks-file)"


def _auth_problem(args: argparse.Namespace) -> str | None:
    """What is wrong with the authentication flags, or None."""
    jwt_only = [
        flag
        for flag, value in (
            ("--jwt-secret-file", args.jwt_secret_file),
            ("--jwt-jwks-file", args.jwt_jwks_file),
            ("--jwt-audience", args.jwt_audience),
            ("--jwt-issuer", args.jwt_issuer),
            ("--jwt-scope-claim", None if args.jwt_scope_claim == "sub" else args.jwt_scope_claim),
        )
        if value is not None
    ]
    if args.auth_tokens is not None and args.auth_jwt:
        return "give one of --auth-tokens and --auth-jwt, not both"
    if jwt_only and not args.auth_jwt:
        return f"{', '.join(jwt_only)} only apply with --auth-jwt"
    if args.auth_jwt and (args.jwt_secret_file is None) == (args.jwt_jwks_file is None):
        return "--auth-jwt needs exactly one of --jwt-secret-file and --jwt-jwks-file"
    has_auth = args.auth_tokens is not None or args.auth_jwt
    if has_auth and args.insecure_no_auth:
        return "--insecure-no-auth contradicts --auth-tokens / --auth-jwt: give one"
    if not has_auth and not args.insecure_no_auth and not _is_loopback(args.host):
        return (
            f"--host {args.host} can be reached from other machines, and without "
            f"authentication every client could read, stop and join every run: add "
            f"{_AUTH_FLAGS}, or --insecure-no-auth if that is really meant"
        )
    return None


def _is_loopback(host: str) -> bool:
    if host.lower() in ("localhost", "localhost."):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a name: it may resolve anywhere


def _authorize_of(args: argparse.Namespace) -> Any:
    """The ``authorize=`` hook the flags ask for, or None (AuthConfigError: file:line)."""
    if args.auth_tokens is not None:
        return TokenFile(args.auth_tokens)
    if args.auth_jwt:
        from ..server.auth import JWTAuthenticator

        return JWTAuthenticator(
            secret_file=args.jwt_secret_file,
            jwks_file=args.jwt_jwks_file,
            audience=args.jwt_audience,
            issuer=args.jwt_issuer,
            scope_claim=args.jwt_scope_claim,
        )
    return None


def _log_auth(args: argparse.Namespace, authorize: object) -> None:
    log = logging.getLogger(__name__)
    if isinstance(authorize, TokenFile):
        log.info(
            "authentication: %d bearer tokens from %s (re-read on SIGHUP)",
            len(authorize),
            authorize.path,
        )
    elif authorize is not None:
        log.info("authentication: bearer JWTs (scope from the %r claim)", args.jwt_scope_claim)
    elif args.insecure_no_auth and not _is_loopback(args.host):
        log.warning(
            "no authentication on %s (--insecure-no-auth): every client shares one scope and "
            "can read, stop and join every run",
            args.host,
        )
    else:
        log.info(
            "no authentication: every client shares one scope and sees every run "
            "(add %s to keep users apart)",
            _AUTH_FLAGS,
        )


def _reload_on_sighup(tokens: TokenFile) -> None:
    """Re-read the tokens file on SIGHUP; a file that no longer parses keeps the old tokens."""
    hup = getattr(signal, "SIGHUP", None)
    if hup is None:  # pragma: no cover - Windows has no SIGHUP
        return
    log = logging.getLogger(__name__)

    def reload(signum: int, frame: object) -> None:
        try:
            count = tokens.reload()
        except AuthConfigError as exc:
            log.error("SIGHUP: kept the previous tokens: %s", exc)
        else:
            log.info("SIGHUP: %d bearer tokens from %s now in force", count, tokens.path)

    signal.signal(hup, reload)


def _chain_of(args: argparse.Namespace) -> Callable[[], TransformerChain] | int | None:
    """The chain of ``--config`` (or the demo's default), None, or the exit status of a
    chain that did not load (its report is on stderr)."""
    if args.config is not None:
        chain = load_or_report(args.config, allow_imports=args.allow_imports)
        return EXIT_CONFIG if chain is None else chain
    if not args.demo:
        return None
    from ..config import ConfigError, load_chain
    from ..demo import DEFAULT_CHAIN

    with plugin_warnings_on_stderr():
        try:
            return load_chain(DEFAULT_CHAIN)
        except ConfigError as exc:  # only if an installation is broken
            print(f"agui-pipes: the default demo chain did not load: {exc}", file=sys.stderr)
            return EXIT_CONFIG


def _options_of(args: argparse.Namespace) -> ServerOptions:
    """The server's options as the command line gives them (0 turns a timer off)."""
    from ..server import ServerOptions

    options = ServerOptions(
        keepalive=args.keepalive or None,
        send_buffer=args.send_buffer,
        send_timeout=args.send_timeout or None,
        limits=limits_of(args),
        repair=args.repair,
        # --no-verify is the gateway's (and a producer's, whose stream is checked like an
        # upstream's): the demo agent's own runs are always verified.
        verify=not (args.no_verify and (args.upstream or args.agent)),
        shutdown_timeout=args.shutdown_timeout,
    )
    if args.store is not None:
        options = replace(
            options,
            store=args.store,
            detach_grace=args.detach_grace,
            concurrency=args.concurrency,
            interrupts=args.interrupts,
        )
    if args.compat:
        options = replace(options, compat_down=True, compat_undeclared=args.compat_undeclared)
    if args.allow_tools:
        options = replace(options, allow_tools=tuple(args.allow_tools))
    if args.history == "server":
        options = replace(options, history="server")
    return options


def _configure_logging(log_level: str) -> None:
    level = getattr(logging, log_level.upper())
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("agui_pipes").setLevel(level)
    # httpx logs every upstream request at INFO; the per-run line says more.
    logging.getLogger("httpx").setLevel(max(level, logging.WARNING))


def _log_start(
    args: argparse.Namespace,
    what: str,
    chain: object,
    traced_to: object,
    inspecting: bool,
    stack: ServerStack,
) -> None:
    log = logging.getLogger(__name__)
    log.info(
        "serving %s at http://%s:%s%s%s%s on %s",
        what,
        args.host,
        args.port,
        args.path,
        f" through {chain!r}" if chain is not None else "",
        ", repairing each run first" if args.repair else "",
        stack.label(),
    )
    if traced_to is not None:
        log.info(
            "OpenTelemetry: every run traced (opentelemetry stage last unless the chain has "
            "one), spans go to %s",
            traced_to,
        )
    if inspecting:
        log.info("inspector at http://%s:%s/inspect/", args.host, args.port)


def _run(
    uvicorn: Any, app: Any, args: argparse.Namespace, stop_runs: Any, stack: ServerStack
) -> int:
    """Serve ``app`` until SIGINT / SIGTERM: 0 after a clean shutdown, 1 if it never started.

    The shutdown stops the live runs before uvicorn drains the connections
    (``_shutdown.GracefulServer``); it exits the process itself, with its own
    status, when a run is abandoned or a second signal arrives.
    """
    from ._listener import send_at_once
    from ._shutdown import GracefulServer

    config = uvicorn.Config(
        app,
        host=args.host,
        port=args.port,
        log_level=args.log_level,
        lifespan="on",
        timeout_graceful_shutdown=args.shutdown_timeout,
        http=stack.http,
        loop=stack.loop,
    )
    server = GracefulServer(config, stop_runs, args.shutdown_timeout)
    try:
        listener = config.bind_socket()
    except SystemExit:  # uvicorn has logged why (the port is taken, say)
        return 1
    send_at_once(listener)
    _drop_stalled_connections(listener, args.send_timeout)
    try:
        server.run(sockets=[listener])
    finally:
        listener.close()
    return 0 if server.started else 1


def _recording(chain: Any, runs: Any) -> Any:
    """A chain factory: ``chain``'s stages, then a stage recording what the client gets."""
    return _Recording(chain, runs.recorder())


class _Recording:
    """``chain`` (a factory, or None) with the inspector's recorder appended to each run's
    chain; named like the chain in the per-run log line."""

    def __init__(self, chain: Any, recorder: Any) -> None:
        self._chain = chain
        self._recorder = recorder

    @property
    def names(self) -> list[str]:
        return [*getattr(self._chain, "names", ()), "inspect"]

    def __call__(self) -> Any:
        from .. import TransformerChain

        stages = [] if self._chain is None else list(self._chain().stages)
        return TransformerChain([*stages, self._recorder.fresh()])

    def __repr__(self) -> str:
        return "inspect" if self._chain is None else f"{self._chain!r} | inspect"


class _Headed:
    """``chain`` (a factory, or None) with an integration's own stage first in each run's
    chain (``adk_chain()``: what its producer's stream needs before any other stage)."""

    def __init__(self, head: Callable[[], Any], chain: Any) -> None:
        self._head = head
        self._chain = chain

    @property
    def names(self) -> list[str]:
        return [getattr(self._head, "__name__", "integration"), *getattr(self._chain, "names", ())]

    def __call__(self) -> Any:
        from .. import TransformerChain

        stages = [] if self._chain is None else list(self._chain().stages)
        return TransformerChain([self._head(), *stages])

    def __repr__(self) -> str:
        head = getattr(self._head, "__name__", "integration")
        return head if self._chain is None else f"{head} | {self._chain!r}"


def _drop_stalled_connections(listener: socket.socket, send_timeout: float) -> None:
    """Have the kernel drop a connection whose sent data stays unread ``send_timeout``.

    The endpoint gives up on a stalled client after ``send_timeout`` and
    abandons the response, but the ASGI server then only *closes* the
    connection, which waits for the unsent bytes — forever, for a client
    that holds its socket and reads nothing. ``TCP_USER_TIMEOUT`` (Linux; set
    on the listening socket, accepted connections inherit it) makes the
    kernel reset such a connection instead, which frees its socket and
    buffers; it also ends connections to a peer that vanished.
    """
    option = getattr(socket, "TCP_USER_TIMEOUT", None)
    if option is None or not send_timeout or listener.family == socket.AF_UNIX:
        return
    with contextlib.suppress(OSError):
        listener.setsockopt(socket.IPPROTO_TCP, option, int(send_timeout * 1000))


def _timeout(read: float) -> Any:
    import httpx

    return httpx.Timeout(connect=min(read, 10.0), read=read, write=10.0, pool=10.0)
