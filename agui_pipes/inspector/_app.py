"""The inspector's Starlette app: the page, its assets and the JSON API (docs/inspector.md).

The API is the contract the page is built on, and is documented so other tools can
use it: every answer is JSON, every error ``{"error": "what, where, how to fix"}``
with 400 (a bad parameter) or 404 (no such run, event or stage). With the server's
``authorize=`` every request is authorized first (401/403 as the server answers)
and a caller sees its own scope's runs only.
"""

from __future__ import annotations

import itertools
import logging
from collections import OrderedDict
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import orjson
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Receive, Scope, Send

from .._foundation.principal import ANONYMOUS, DEFAULT_SCOPE, Principal
from ..server._access import Access
from ..server.auth import Authorize
from ._model import MIB, InspectedRun
from ._request import RequestError, request_line, split_request
from ._stages import KINDS
from ._tap import SENT_REQUEST
from ._target import SendTarget, send_to_target

__all__ = [
    "DEFAULT_MAX_BYTES",
    "DEFAULT_MAX_RUN_BYTES",
    "MAX_IMPORT_BYTES",
    "MAX_LIMIT",
    "MAX_OFFSET",
    "RecentRuns",
    "inspector_app",
    "with_inspector",
]

STATIC = Path(__file__).with_name("static")
MAX_LIMIT = 1000
MAX_OFFSET = 2**53 - 1
"""The largest offset or index a query accepts (JavaScript's largest exact integer)."""
DEFAULT_MAX_BYTES = 256 * MIB
"""``serve --inspect``'s ring holds at most this much (``--inspect-max-mib``)."""
DEFAULT_MAX_RUN_BYTES = 32 * MIB
"""One recorded run holds at most this much; the rest of its stream is not kept."""
_DEFAULT_LIMIT = 200
MAX_IMPORT_BYTES = 8 * MIB
"""The largest export ``POST api/import`` takes (its NDJSON); the run built from it holds
about 2.5 times that, and is capped like a recording (``max_run_bytes``)."""


class RecentRuns:
    """The last runs a server streamed, newest first: a ring bounded by runs and by bytes.

    At most ``keep`` runs; each keeps at most ``max_events`` events and
    ``max_run_bytes`` bytes (as ``InspectedRun.nbytes`` accounts them), and all
    together at most ``max_bytes``: a run being recorded counts as its whole
    ``max_run_bytes`` (it may still grow), a finished one as what it holds. A new
    run makes room by dropping the oldest runs; a live run dropped stops being
    recorded (its stream goes on). Memory is therefore bounded by ``max_bytes``
    however long the server runs and however many runs stream at once.
    """

    def __init__(
        self,
        keep: int = 50,
        *,
        max_events: int = 100_000,
        max_bytes: int = DEFAULT_MAX_BYTES,
        max_run_bytes: int = DEFAULT_MAX_RUN_BYTES,
    ) -> None:
        if keep < 1 or max_events < 1:
            raise ValueError(f"keep and max_events must be >= 1, got {keep} and {max_events}")
        if not 1 <= max_run_bytes <= max_bytes:
            raise ValueError(
                f"max_run_bytes must be >= 1 and at most max_bytes ({max_bytes}), "
                f"got {max_run_bytes}"
            )
        self.keep = keep
        self.max_events = max_events
        self.max_bytes = max_bytes
        self.max_run_bytes = max_run_bytes
        self._runs: OrderedDict[str, InspectedRun] = OrderedDict()
        self._ids = itertools.count(1)

    def start(self, label: str, scope: str = DEFAULT_SCOPE) -> InspectedRun:
        """A new live run of ``scope``, added to the ring (the oldest fall out to make room)."""
        while self._runs and (
            len(self._runs) >= self.keep or self.reserved() + self.max_run_bytes > self.max_bytes
        ):
            _, dropped = self._runs.popitem(last=False)
            dropped.evicted = True
        run = InspectedRun(
            label,
            run_id=str(next(self._ids)),
            max_events=self.max_events,
            max_bytes=self.max_run_bytes,
        )
        run.scope = scope
        self._runs[run.id] = run
        return run

    def reserved(self) -> int:
        """The bytes the ring's runs may hold: a live run its cap, a finished one its size."""
        return sum(self.max_run_bytes if r.live else r.nbytes for r in self._runs.values())

    def nbytes(self) -> int:
        """The bytes the ring's runs hold now (``InspectedRun.nbytes`` summed)."""
        return sum(r.nbytes for r in self._runs.values())

    def add(self, run: InspectedRun) -> None:
        self._runs[run.id] = run

    def admit(self, run: InspectedRun) -> None:
        """Add a finished run built elsewhere (an import): it gets the next id, and the
        oldest runs make room for it as for a new recording."""
        while self._runs and (
            len(self._runs) >= self.keep or self.reserved() + run.nbytes > self.max_bytes
        ):
            _, dropped = self._runs.popitem(last=False)
            dropped.evicted = True
        run.id = str(next(self._ids))
        self._runs[run.id] = run

    def get(self, run_id: str, scope: str | None = None) -> InspectedRun | None:
        """The run, or None — also for a run of another scope than ``scope`` (if given)."""
        run = self._runs.get(run_id)
        return None if run is None or (scope is not None and run.scope != scope) else run

    def newest_first(self, scope: str | None = None) -> list[InspectedRun]:
        """The runs (of ``scope`` only, if given), newest first."""
        runs = reversed(self._runs.values())
        return [run for run in runs if scope is None or run.scope == scope]

    def recorder(self) -> Any:
        """A pass-through stage recording the events it sees as one live run per stream."""
        from ._tap import InspectorTap

        return InspectorTap(self)


class _JSON(JSONResponse):
    """orjson: a 100k-event summary or a long conversation encodes several times faster."""

    def render(self, content: Any) -> bytes:
        return orjson.dumps(content)


def _error(status: int, message: str) -> JSONResponse:
    return _JSON({"error": message}, status_code=status)


def _int_param(
    request: Request, name: str, default: int | None, lo: int = 0, hi: int | None = None
) -> int:
    raw = request.query_params.get(name)
    hi = MAX_OFFSET if hi is None else hi
    if raw is None or raw == "":
        if default is None:
            raise _BadRequest(
                f"missing query parameter `{name}`: give an event index, e.g. ?{name}=0"
            )
        return default
    value = _integer(raw) if len(raw) <= 20 else None
    if value is None:
        raise _BadRequest(
            f"query parameter `{name}` must be an integer between {lo} and {hi}, got {raw[:40]!r}"
        )
    if value < lo or value > hi:
        raise _BadRequest(f"query parameter `{name}` must be between {lo} and {hi}, got {value}")
    return value


def _integer(raw: str) -> int | None:
    """``raw`` as a plain decimal integer (no ``_`` separators, no spaces), or None."""
    text = raw[1:] if raw[:1] == "-" else raw
    return int(raw) if text.isascii() and text.isdigit() else None


class _BadRequest(Exception):
    pass


class _NotFound(Exception):
    pass


def inspector_app(
    runs: InspectedRun | RecentRuns | Iterable[InspectedRun],
    *,
    authorize: Authorize | None = None,
    send_to: tuple[ASGIApp, str] | SendTarget | None = None,
    max_import_bytes: int = MAX_IMPORT_BYTES,
) -> ASGIApp:
    """The inspector for one stream (``agui-pipes inspect``) or a server's recent runs.

    ``send_to=(app, path)``: the agent endpoint a run composed on the page is sent
    to (``POST api/send``, same-origin only), in process; the run is recorded as
    any other the endpoint serves, so ``runs`` should be the ring its chain records
    into (``serve --inspect`` passes its own app and ``--path``). ``send_to=SendTarget(url)``
    sends it over HTTP instead, to any AG-UI endpoint, and records the stream it answers
    into ``runs`` itself (``agui-pipes inspect --target URL``).

    ``POST api/import`` adds a run exported as NDJSON (at most ``max_import_bytes``;
    413 past it) to the runs listed, as the caller's.

    ``authorize=`` (the server's hook) runs before every page, asset and API
    request, and a principal sees only its own scope's runs: another scope's is
    a run that does not exist (404). Without it every caller is ``ANONYMOUS``
    and sees the default scope's runs — all runs of a server without
    ``authorize=``.
    """
    if isinstance(runs, InspectedRun):
        single = runs
        # Room for runs imported next to it, beyond what the file's run holds.
        registry = RecentRuns(max_bytes=single.nbytes + DEFAULT_MAX_BYTES)
        registry.add(single)
    elif isinstance(runs, RecentRuns):
        registry = runs
    else:
        registry = RecentRuns(1_000_000)
        for run in runs:
            registry.add(run)

    def scope_of(request: Request) -> str:
        principal = request.scope.get(_PRINCIPAL, ANONYMOUS)
        assert isinstance(principal, Principal)
        return principal.scope

    def run_of(request: Request) -> InspectedRun:
        run_id = request.path_params["run"]
        scope = scope_of(request)
        run = registry.get(run_id, scope)
        if run is None:
            known = ", ".join(r.id for r in registry.newest_first(scope)[:10]) or "none"
            raise _NotFound(f"no run {run_id!r}; known runs: {known} (GET /api/runs lists them)")
        return _side(request, run)

    def api(handler: Callable[[Request], Any]) -> Callable[[Request], Any]:
        async def endpoint(request: Request) -> Response:
            try:
                return _JSON(handler(request))
            except _BadRequest as bad:
                return _error(400, str(bad))
            except _NotFound as missing:
                return _error(404, str(missing))

        return endpoint

    def list_runs(request: Request) -> Any:
        listed = [run.listing() for run in registry.newest_first(scope_of(request))]
        where = None
        if isinstance(send_to, SendTarget):
            where = send_to.url
        elif send_to is not None:
            where = send_to[1]
        return {"runs": listed, "send": send_to is not None, "sendsTo": where}

    def summary(request: Request) -> Any:
        return run_of(request).summary()

    def events(request: Request) -> Any:
        run = run_of(request)
        offset = _int_param(request, "offset", 0)
        limit = _int_param(request, "limit", _DEFAULT_LIMIT, 1, MAX_LIMIT)
        types = [t for t in request.query_params.get("type", "").split(",") if t]
        text = request.query_params.get("q", "")
        ident = request.query_params.get("id", "")
        total, indexes = run.page(offset, limit, types, text, ident)
        return {"total": total, "offset": offset, "rows": [run.row(i) for i in indexes]}

    def event(request: Request) -> Any:
        run = run_of(request)
        index = _path_index(request, "index")
        if index >= len(run):
            raise _NotFound(
                f"no event #{index} in run {run.id!r}: it has {len(run)} events "
                f"(indexes 0..{len(run) - 1})"
            )
        violations, warnings = run.problems_at(index)
        return {
            "index": index,
            "type": run.type_at(index),
            "json": run.json_at(index),
            "violations": violations,
            "warnings": warnings,
        }

    def fold(request: Request) -> Any:
        run = run_of(request)
        if not len(run):
            raise _NotFound(f"run {run.id!r} has no events yet: there is nothing to fold")
        at = _int_param(request, "at", None, 0, len(run) - 1)
        return run.fold_at(at)

    def stage(request: Request) -> Any:
        run = run_of(request)
        number = _path_index(request, "n")
        if run.stages is None:
            raise _NotFound(
                f"run {run.id!r} has no pipeline record: start the inspector with "
                "--config CHAIN.yaml to see what each stage did"
            )
        if number >= len(run.stages):
            raise _NotFound(
                f"no stage {number}: the chain has {len(run.stages)} stages "
                f"(0..{len(run.stages) - 1})"
            )
        kind = request.query_params.get("kind") or None
        if kind is not None and kind not in KINDS:
            raise _BadRequest(
                f"query parameter `kind` must be one of {', '.join(KINDS)}, got {kind!r}"
            )
        offset = _int_param(request, "offset", 0)
        limit = _int_param(request, "limit", _DEFAULT_LIMIT, 1, MAX_LIMIT)
        record = run.stages[number]
        total, rows = record.rows(kind, offset, limit)
        return {"name": record.name, "total": total, "rows": rows}

    async def export(request: Request) -> Response:
        try:
            run = run_of(request)
        except _BadRequest as bad:
            return _error(400, str(bad))
        except _NotFound as missing:
            return _error(404, str(missing))
        count = len(run)  # a live run: what it holds now
        lead = [] if run.request is None else [request_line(run.request) + b"\n"]
        body = b"".join([*lead, *(run.raw_at(i) + b"\n" for i in range(count))])
        side = "-output" if request.query_params.get("side") == "output" else ""
        name = f"run-{run.id}{side}.ndjson"
        return Response(
            body,
            media_type="application/x-ndjson",
            headers={"content-disposition": f'attachment; filename="{name}"'},
        )

    async def page(request: Request) -> Response:
        index = STATIC / "index.html"
        if not index.is_file():
            return _error(
                404,
                f"the inspector page is missing from this installation "
                f"({index}); the JSON API is under /api",
            )
        return FileResponse(index)

    async def favicon(request: Request) -> Response:
        return FileResponse(STATIC / "favicon.ico", media_type="image/x-icon")

    async def send(request: Request) -> Response:
        if send_to is None:
            return _error(
                404,
                "this inspector sends nowhere: sending a run needs `agui-pipes serve --inspect` "
                "(or inspector_app(..., send_to=(app, path)))",
            )
        refused = _cross_site(request)
        if refused is not None:
            return _error(403, refused)
        body = await request.body()
        checked = _run_input(body)
        if isinstance(checked, Response):
            return checked
        if isinstance(send_to, SendTarget):
            sent = checked.model_dump(mode="json", by_alias=True, exclude_none=True)
            status, answer = await send_to_target(
                send_to, body, checked, sent, registry, scope_of(request)
            )
            return _JSON(answer, status_code=status)
        return await _send(request, body, checked, *send_to)

    async def import_run(request: Request) -> Response:
        refused = _cross_site(request, "application/x-ndjson")
        if refused is not None:
            return _error(403, refused)
        body = await _bounded_body(request, max_import_bytes)
        if body is None:
            return _error(
                413,
                f"the run to import is more than {_size(max_import_bytes)}: import a "
                "shorter recording, or inspect the file with `agui-pipes inspect FILE`",
            )
        try:
            run = _imported(body, request.query_params.get("name") or "imported run", registry)
        except _BadRequest as bad:
            return _error(400, str(bad))
        run.scope = scope_of(request)
        registry.admit(run)
        return _JSON({"id": run.id, **run.listing()})

    async def unknown_api(request: Request) -> Response:
        return _error(404, f"no API endpoint {request.url.path}; see docs/inspector.md")

    routes = [
        Route("/", page),
        Route("/favicon.ico", favicon),
        Route("/api/runs", api(list_runs)),
        Route("/api/runs/{run}/summary", api(summary)),
        Route("/api/runs/{run}/events", api(events)),
        Route("/api/runs/{run}/events/{index}", api(event)),
        Route("/api/runs/{run}/fold", api(fold)),
        Route("/api/runs/{run}/stages/{n}", api(stage)),
        Route("/api/runs/{run}/export", export),
        Route("/api/send", send, methods=["POST"]),
        Route("/api/import", import_run, methods=["POST"]),
        Route("/api/{rest:path}", unknown_api),
        Mount("/static", StaticFiles(directory=STATIC, check_dir=False), name="static"),
    ]
    app = Starlette(routes=routes)
    access = Access(authorize, logging.getLogger("agui_pipes.inspector"))

    async def authorized(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await app(scope, receive, send)
            return
        principal = await access.principal(scope, send)  # before anything is served
        if principal is not None:
            await app({**scope, _PRINCIPAL: principal}, receive, send)

    return authorized


_PRINCIPAL = "agui_pipes.principal"
"""Where the ASGI scope of an inspector request carries its principal."""


MAX_SEND_BYTES = 1024 * 1024
"""The largest run input ``POST api/send`` takes."""


def _size(count: int) -> str:
    return f"{count / MIB:g} MiB" if count >= MIB else f"{count:,} bytes"


async def _bounded_body(request: Request, limit: int) -> bytes | None:
    """The request's body, or None as soon as it passes ``limit`` bytes (not read on)."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        return None
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
    return b"".join(chunks)


def _imported(body: bytes, name: str, registry: RecentRuns) -> InspectedRun:
    """The run an export's NDJSON holds (its request line taken as its request)."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as error:
        raise _BadRequest(
            f"the file is not UTF-8 text (byte {error.start}): import an NDJSON export, "
            "one AG-UI event a line"
        ) from None
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines:
        raise _BadRequest("the file has no events: import an NDJSON export, one event a line")
    try:
        request, events = split_request(lines)
    except RequestError as error:
        raise _BadRequest(str(error)) from None
    if not events:
        raise _BadRequest("the file holds a request but no events: nothing to inspect")
    if not any(_json_object(line) for line in events[:50]):
        raise _BadRequest(
            "the file is not NDJSON of AG-UI events (none of its first lines is a JSON "
            "object): import what *export* saved, one event a line, e.g. "
            '{"type": "RUN_STARTED", ...}'
        )
    run = InspectedRun(name[:200], max_events=registry.max_events, max_bytes=registry.max_run_bytes)
    for line in events:
        run.add(line)
    run.close()
    run.request = request
    return run


def _json_object(line: str) -> bool:
    try:
        return isinstance(orjson.loads(line), dict)
    except orjson.JSONDecodeError:
        return False


def _cross_site(request: Request, content_type: str = "application/json") -> str | None:
    """Why a state-changing request is refused as possibly cross-site, or None.

    A browser always sends ``Origin`` on a POST; it must name this server (scheme,
    host and port as the request reached it). A JSON content type is required too, so
    a cross-site page cannot send one without a CORS preflight this app never answers.
    """
    origin = request.headers.get("origin")
    host = request.headers.get("host")
    if origin is None or host is None or origin != f"{request.url.scheme}://{host}":
        return (
            "refused: a run can be sent only from the inspector's own page (the Origin "
            "header must name this server)"
        )
    if request.headers.get("content-type", "").split(";")[0].strip() != content_type:
        return f"refused: send it as Content-Type: {content_type}"
    return None


def _run_input(body: bytes) -> Any:
    """The body as a ``RunAgentInput``, or the 400 saying what is wrong with it."""
    from ag_ui.core import RunAgentInput
    from pydantic import ValidationError

    if len(body) > MAX_SEND_BYTES:
        return _error(400, f"the run input is {len(body)} bytes, more than {MAX_SEND_BYTES}")
    try:
        return RunAgentInput.model_validate(orjson.loads(body))
    except orjson.JSONDecodeError as error:
        return _error(400, f"the run input is not JSON: {error}")
    except ValidationError as error:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'input'}: {e['msg']}"
            for e in error.errors()[:5]
        )
        return _error(400, f"not a RunAgentInput: {problems}")


async def _send(request: Request, body: bytes, run_input: Any, app: ASGIApp, path: str) -> Response:
    """Validate a ``RunAgentInput`` and POST it to ``app`` at ``path`` in process.

    The caller's credentials go with it, so the agent endpoint authorizes it as
    that caller and records the run under that caller's scope. Answers once the
    run ended (the page watches it live meanwhile), with the endpoint's status.
    """
    import httpx

    headers = {"content-type": "application/json", "accept": "text/event-stream"}
    if "authorization" in request.headers:
        headers["authorization"] = request.headers["authorization"]
    transport = httpx.ASGITransport(app=app)
    sending = SENT_REQUEST.set(run_input.model_dump(mode="json", by_alias=True, exclude_none=True))
    try:
        async with httpx.AsyncClient(transport=transport, base_url="http://inspector") as client:
            answer = await client.post(path, content=body, headers=headers, timeout=None)
    finally:
        SENT_REQUEST.reset(sending)
    frames = answer.text.count("\ndata:") + answer.text.startswith("data:")
    if answer.status_code >= 400:
        return _error(answer.status_code, f"the agent refused the run: {answer.text[:500]}")
    return _JSON(
        {
            "status": answer.status_code,
            "threadId": run_input.thread_id,
            "runId": run_input.run_id,
            "events": frames,
        }
    )


def _side(request: Request, run: InspectedRun) -> InspectedRun:
    """The run as received (``side=input``, the default) or as the client receives it.

    Without a chain both sides are the same stream; both sides share the pipeline record.
    """
    side = request.query_params.get("side") or "input"
    if side not in ("input", "output"):
        raise _BadRequest(f"query parameter `side` must be input or output, got {side!r}")
    if side == "output" and run.output is not None:
        return run.output
    return run


def _path_index(request: Request, name: str) -> int:
    raw = request.path_params[name]
    value = _integer(raw) if len(raw) <= 20 else None
    if value is None or not 0 <= value <= MAX_OFFSET:
        raise _BadRequest(
            f"`{raw[:40]}` in the path is not an index: give an integer from 0 to {MAX_OFFSET}"
        )
    return value


def with_inspector(app: ASGIApp, inspector: ASGIApp, prefix: str = "/inspect") -> ASGIApp:
    """``app`` with ``inspector`` answering under ``prefix`` (lifespan events go to ``app``)."""
    prefix = prefix.rstrip("/")

    async def dispatch(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] in ("http", "websocket"):
            root: str = scope.get("root_path", "")
            path: str = scope["path"]
            relative = path[len(root) :] if root and path.startswith(root) else path
            if relative == prefix:
                await _redirect(scope, send, root + prefix + "/")
                return
            if relative.startswith(prefix + "/"):
                await inspector({**scope, "root_path": root + prefix}, receive, send)
                return
        await app(scope, receive, send)

    return dispatch


async def _redirect(scope: Scope, send: Send, location: str) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": 307,
            "headers": [(b"location", location.encode()), (b"content-length", b"0")],
        }
    )
    await send({"type": "http.response.body", "body": b""})
