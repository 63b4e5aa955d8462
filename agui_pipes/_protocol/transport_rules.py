"""The transport rules ``agui-pipes verify URL`` checks, with the basis of each.

The AG-UI 1.0 rules say nothing of HTTP: they start at the events. A live
endpoint can still fail its clients below them — a status or content type an
SSE client refuses, a proxy holding the stream, an idle connection dropped, a
resume that replays the wrong frames. Each rule here names what requires it: a
section of the HTML Living Standard's Server-sent events (section 9.2), of RFC
9111 (HTTP caching), or, where no specification speaks, the reason.

Severities follow the event rules' meaning as far as a transport allows:

* ``error`` — a common client cannot read the run (an SSE client fails the
  connection);
* ``warning`` — clients read it, but the deployment misbehaves (a cache, a
  dropped idle connection, a broken resume): required by this check, and, as
  every warning, a rejection;
* ``hygiene`` — advised, or a check that could not be made (and why); never a
  rejection.

Plain data, so the catalogue (``findings.rule_catalogue``) and the docs table
can list these rules without loading an HTTP client.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

__all__ = [
    "BAD_BODY_JSON",
    "BAD_BODY_STATUS",
    "CACHE_CONTROL",
    "CONTENT_TYPE",
    "DISCONNECT",
    "EVENT_ID_CONTINUITY",
    "HTTP_STATUS",
    "KEEPALIVE",
    "NO_TRANSFORM",
    "RESUME",
    "TRANSPORT_RULES",
    "UNCHECKED",
    "X_ACCEL_BUFFERING",
    "TransportRule",
]


@dataclass(frozen=True)
class TransportRule:
    """One transport rule: its name, severity, what requires it, and what it says."""

    name: str
    severity: str
    basis: str
    """The specification section behind the rule, or ``reason: ...`` where none speaks."""
    meaning: str


HTTP_STATUS: Final = "http-status"
CONTENT_TYPE: Final = "content-type"
CACHE_CONTROL: Final = "cache-control"
NO_TRANSFORM: Final = "no-transform"
X_ACCEL_BUFFERING: Final = "x-accel-buffering"
KEEPALIVE: Final = "keepalive"
EVENT_ID_CONTINUITY: Final = "event-id-continuity"
RESUME: Final = "resume"
BAD_BODY_STATUS: Final = "bad-body-status"
BAD_BODY_JSON: Final = "bad-body-json"
DISCONNECT: Final = "disconnect"
UNCHECKED: Final = "transport-unchecked"

_RULES: Final = (
    TransportRule(
        HTTP_STATUS,
        "error",
        "HTML 9.2.3 Processing model: a status other than 200 fails an EventSource connection",
        "the run's POST is answered 200 (the reference client fails a run answered "
        "with an error status)",
    ),
    TransportRule(
        CONTENT_TYPE,
        "error",
        "HTML 9.2.3 Processing model: a Content-Type other than text/event-stream fails "
        "the connection",
        "the run is served as content-type text/event-stream",
    ),
    TransportRule(
        CACHE_CONTROL,
        "warning",
        "RFC 9111 5.2.2.4 no-cache / 5.2.2.5 no-store",
        "required: cache-control says no-cache (or no-store), so no cache or CDN in front "
        "of the agent holds the stream or answers from a stored copy",
    ),
    TransportRule(
        NO_TRANSFORM,
        "hygiene",
        "RFC 9111 5.2.2.6 no-transform",
        "advised: cache-control also says no-transform, so no proxy compresses (and so "
        "buffers) the stream",
    ),
    TransportRule(
        X_ACCEL_BUFFERING,
        "hygiene",
        "reason: nginx buffers a proxied response unless it carries X-Accel-Buffering: no",
        "advised: x-accel-buffering: no, so an nginx in front of the agent passes each "
        "frame on as it comes",
    ),
    TransportRule(
        KEEPALIVE,
        "warning",
        "HTML 9.2.7 Authoring notes: a comment line every 15 seconds or so keeps proxies "
        "from dropping an idle connection",
        "while the agent is silent, something (a keep-alive comment) arrives within "
        "--keepalive-within seconds",
    ),
    TransportRule(
        EVENT_ID_CONTINUITY,
        "warning",
        "HTML 9.2.4 The Last-Event-ID header; "
        "agui-pipes ids are `<epoch>.<generation>:<runId>:<seq>`",
        "when frames carry ids, every frame does, all of one run, numbered consecutively",
    ),
    TransportRule(
        RESUME,
        "warning",
        "HTML 9.2.4 The Last-Event-ID header: a reconnect names the last id it received",
        "GET runs/{runId} with Last-Event-ID of a frame answers exactly the frames after it",
    ),
    TransportRule(
        BAD_BODY_STATUS,
        "warning",
        "reason: a client shown a 200 and a broken stream cannot tell its request was "
        "wrong; the reference client reports a 4xx as `HTTP 422: ...`",
        "a body that is not a RunAgentInput is answered 4xx (422 or 400), not with a stream",
    ),
    TransportRule(
        BAD_BODY_JSON,
        "hygiene",
        "reason: the reference client reads an application/json error body into its "
        "error's payload",
        "that 4xx answer is a JSON body saying what was wrong",
    ),
    TransportRule(
        DISCONNECT,
        "warning",
        "reason: a run whose client left must end (finish, error or be cancelled), not "
        "hold the agent",
        "a run whose client disconnected after its first event is recorded as ended "
        "(RUN_FINISHED or RUN_ERROR)",
    ),
    TransportRule(
        UNCHECKED,
        "hygiene",
        "reason: the check needs what the server does not offer (durable routes, "
        "agui-pipes ids) or more time than --timeout left",
        "a transport check could not be made; the message says which and why",
    ),
)

TRANSPORT_RULES: Final[dict[str, TransportRule]] = {rule.name: rule for rule in _RULES}
"""Every transport rule by name, in the order the docs list them."""
