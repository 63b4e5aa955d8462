"""Requests that cannot forge: declared tools, tool results and the thread's past checked.

A RunAgentInput is the client's word about the conversation; this module
decides how much of it a server takes (``ServerOptions.allow_tools`` and
``history``, and with a store the tool results), before the agent or the
upstream is called and before anything is written to the event log:

* ``allow_tools`` — a frontend tool the request declares (``tools``) whose
  name matches none of the glob patterns is 422 ``tool_not_allowed``;
* with a store, a ``tool`` message — or a resume entry whose payload or
  metadata names a ``toolCallId`` — answering a tool call the thread never
  issued is 422 ``unknown_tool_call``. Issued means recorded by the server
  in the thread's runs (a ``TOOL_CALL_START`` or ``TOOL_CALL_CHUNK``, or an
  assistant message's tool call in a ``MESSAGES_SNAPSHOT``): an assistant
  message in the request's own ``messages`` proves nothing, the client
  wrote it;
* ``history="server"`` — the request's messages must start with the stored
  thread history's (the fold of its ended runs, compared by id, role,
  content, tool calls and tool call id as canonical JSON) and may add only
  ``user`` and ``tool`` messages; otherwise 409 ``history_mismatch`` names
  the first index that differs. The agent (or the upstream) gets the
  server's messages followed by the new ones.

The issued ids are read incrementally (``IssuedCalls``): each ended run's
events are scanned once per process and its calls kept per thread (for the
most recent ``MAX_THREADS`` threads); a POST reads the thread's run list and
only the runs not scanned yet, or the store not at all when every id it
answers is known. A live run is scanned each time (it may still grow).
"""

from __future__ import annotations

import json
import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterable, Sequence
from fnmatch import fnmatchcase
from typing import TYPE_CHECKING, Any, Final

from ag_ui.core import Message, RunAgentInput
from pydantic import TypeAdapter

from ..store import EventLog, RunBroken, RunStatus, StoreError, UnknownRun
from ._http import BadRequest
from ._options import ServerOptions
from ._store_health import store_unavailable
from ._thread_histories import ThreadHistories

if TYPE_CHECKING:
    from ._durable import DurableRuns

__all__ = ["HISTORY_MODES", "MAX_THREADS", "IssuedCalls", "RequestTrust", "request_trust"]

HISTORY_MODES: Final = ("client", "server")
"""``ServerOptions.history``: whose account of the thread's past a run gets."""

MAX_THREADS: Final = 4096
"""Threads whose issued tool call ids a process keeps (least recently used go first)."""

_MESSAGE: Final = TypeAdapter(Message)
_ISSUING: Final = (b'"TOOL_CALL_START"', b'"TOOL_CALL_CHUNK"', b'"MESSAGES_SNAPSHOT"')


def request_trust(options: ServerOptions, durable: DurableRuns | None) -> RequestTrust:
    """The ``RequestTrust`` of a server with these options and event log (raise if they
    cannot work together)."""
    history = options.history
    if history not in HISTORY_MODES:
        raise ValueError(f"history must be 'client' or 'server', got {history!r}")
    if history == "server" and durable is None:
        raise ValueError(
            "history='server' takes the thread's past from the event log: give store=... "
            "(--store URL) too"
        )
    patterns = _patterns(options.allow_tools)
    if durable is None:
        return RequestTrust(patterns, history, None)
    return RequestTrust(patterns, history, durable.store, durable.histories)


def _patterns(allow_tools: object) -> tuple[str, ...] | None:
    if allow_tools is None:
        return None
    if isinstance(allow_tools, str) or not isinstance(allow_tools, Iterable):
        raise TypeError(
            "allow_tools must be a tuple of glob patterns (say ('search', 'ui_*')) or None, "
            f"got {allow_tools!r}"
        )
    patterns = tuple(allow_tools)
    for pattern in patterns:
        if not isinstance(pattern, str) or not pattern:
            raise TypeError(f"allow_tools holds {pattern!r}: each pattern is a non-empty string")
    return patterns


class IssuedCalls:
    """The tool call ids each thread's stored runs issued, read once per run (module doc)."""

    def __init__(self, max_threads: int = MAX_THREADS) -> None:
        self._max = max_threads
        # (scope, thread) -> (ids of the ended runs scanned, tool call ids they issued)
        self._threads: OrderedDict[tuple[str, str], tuple[set[str], set[str]]] = OrderedDict()

    async def unknown(
        self, store: EventLog, scope: str, thread_id: str, wanted: Sequence[str]
    ) -> list[str]:
        """Those of ``wanted`` that no run of the thread issued, in their order."""
        key = (scope, thread_id)
        scanned, issued = self._threads.get(key) or (set(), set())
        self._threads[key] = (scanned, issued)
        self._threads.move_to_end(key)
        while len(self._threads) > self._max:
            self._threads.popitem(last=False)
        if all(call in issued for call in wanted):
            return []
        live: set[str] = set()
        for record in await store.thread_runs(thread_id, scope=scope):
            if record.run_id in scanned or record.status is RunStatus.BROKEN:
                continue
            try:
                entries = await store.read(record.run_id, scope=scope)
            except (RunBroken, UnknownRun):
                continue  # broken or pruned since listed: it issues nothing now
            target = issued if record.status.ended else live
            for _, data in entries:
                _note_calls(data, target)
            if record.status.ended:
                scanned.add(record.run_id)
        return [call for call in wanted if call not in issued and call not in live]


def _note_calls(data: bytes, into: set[str]) -> None:
    """Add the tool call ids one stored event issues (most events are not even parsed)."""
    if not any(marker in data for marker in _ISSUING):
        return
    event = json.loads(data)
    kind = event.get("type")
    if kind in ("TOOL_CALL_START", "TOOL_CALL_CHUNK"):
        call = event.get("toolCallId")
        if isinstance(call, str):
            into.add(call)
    elif kind == "MESSAGES_SNAPSHOT":
        for message in event.get("messages") or ():
            if isinstance(message, dict) and message.get("role") == "assistant":
                for tool_call in message.get("toolCalls") or ():
                    if isinstance(tool_call, dict) and isinstance(tool_call.get("id"), str):
                        into.add(tool_call["id"])


class RequestTrust:
    """What a server takes of a request's tools, tool results and messages (module doc).

    ``store`` gives the opened event log (None: a server without one, which
    checks only ``allow_tools``).
    """

    def __init__(
        self,
        allow_tools: tuple[str, ...] | None,
        history: str,
        store: Callable[[], Awaitable[EventLog]] | None,
        histories: ThreadHistories | None = None,
    ) -> None:
        self._allow = allow_tools
        self._server_history = history == "server"
        self._store = store
        self._histories = histories or ThreadHistories()
        self._issued = IssuedCalls()

    async def checked(
        self, body: bytes, run_input: RunAgentInput, scope: str
    ) -> tuple[bytes, RunAgentInput]:
        """The request as the server takes it, or raise ``BadRequest`` (nothing written)."""
        self._check_tools(run_input)
        if self._store is None:
            return body, run_input
        try:
            store = await self._store()
            past: list[dict[str, Any]] | None = None
            if self._server_history:
                past = await self._histories.messages(store, scope, run_input.thread_id)
                _check_history(past, run_input.messages)
            fresh = run_input.messages[len(past) :] if past is not None else run_input.messages
            wanted = _answered_calls(fresh, run_input)
            if wanted:
                unknown = await self._issued.unknown(store, scope, run_input.thread_id, wanted)
                if unknown:
                    raise _unknown_call(unknown[0], run_input.thread_id)
        except StoreError as exc:
            raise store_unavailable(
                exc, logging.getLogger("agui_pipes.server"), "reading the thread's history"
            ) from exc
        except ValueError as exc:  # the stored runs do not fold
            raise BadRequest(
                500, "history_failed", f"the thread's stored runs do not fold: {exc}"
            ) from exc
        if past is None or not past:
            return body, run_input
        return _with_past(body, run_input, past)

    def _check_tools(self, run_input: RunAgentInput) -> None:
        patterns = self._allow
        if patterns is None:
            return
        for tool in run_input.tools or ():
            if not any(fnmatchcase(tool.name, pattern) for pattern in patterns):
                shown = ", ".join(repr(p) for p in patterns) or "none"
                raise BadRequest(
                    422,
                    "tool_not_allowed",
                    f"the request declares the frontend tool {tool.name!r}, which the server's "
                    f"allow_tools ({shown}) does not allow; drop it from `tools`, or add a "
                    "pattern matching it to allow_tools (--allow-tools)",
                )


def _answered_calls(messages: Sequence[Message], run_input: RunAgentInput) -> list[str]:
    """The tool call ids the request answers: its tool messages', then its resume entries'."""
    wanted = [m.tool_call_id for m in messages if m.role == "tool"]
    for entry in run_input.resume or ():
        for part in (entry.payload, entry.metadata):
            call = part.get("toolCallId") if isinstance(part, dict) else None
            if isinstance(call, str):
                wanted.append(call)
    return list(dict.fromkeys(wanted))


def _unknown_call(call: str, thread_id: str) -> BadRequest:
    return BadRequest(
        422,
        "unknown_tool_call",
        f"the request answers tool call {call!r}, which no run of thread {thread_id!r} "
        "issued: a tool result must answer a tool call the server sent on this thread "
        "(an assistant message the client writes itself does not issue one); drop the "
        "result, or start the run that issues the call first",
    )


def _canonical(message: dict[str, Any]) -> str:
    """What a message is, for comparing: id, role, content, tool calls, the call it answers."""
    calls = []
    for call in message.get("toolCalls") or ():
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict):
            function = {}
        calls.append([call.get("id"), function.get("name"), function.get("arguments")])
    shown = {
        "id": message.get("id"),
        "role": message.get("role"),
        "content": message.get("content") or None,
        "toolCalls": calls,
        "toolCallId": message.get("toolCallId"),
    }
    return json.dumps(shown, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _check_history(past: list[dict[str, Any]], messages: Sequence[Message]) -> None:
    """Raise 409 ``history_mismatch`` unless ``messages`` is ``past`` then user/tool messages."""
    given = [m.model_dump(by_alias=True, exclude_none=True, mode="json") for m in messages]
    for index, stored in enumerate(past):
        if index >= len(given):
            raise _mismatch(
                index,
                f"the request has {len(given)} messages, the thread's stored history "
                f"{len(past)}: a client may not drop earlier turns",
            )
        if _canonical(given[index]) != _canonical(stored):
            raise _mismatch(
                index,
                f"message #{index} (id {given[index].get('id')!r}) is not the stored "
                f"history's message #{index} (id {stored.get('id')!r}): a client may not "
                "edit earlier turns",
            )
    for index in range(len(past), len(given)):
        role = given[index].get("role")
        if role not in ("user", "tool"):
            raise _mismatch(
                index,
                f"message #{index} is a new {role!r} message: after the stored history a "
                "client may add only user and tool messages",
            )


def _mismatch(index: int, why: str) -> BadRequest:
    return BadRequest(
        409,
        "history_mismatch",
        f"the request's messages diverge from the thread's stored history at index "
        f"{index}: {why}. The server keeps this thread's history (history='server'): "
        "send the messages of GET threads/{threadId} unchanged, followed by the new ones",
        [{"index": index}],
    )


def _with_past(
    body: bytes, run_input: RunAgentInput, past: list[dict[str, Any]]
) -> tuple[bytes, RunAgentInput]:
    """The request with the server's messages in place of the client's copy of them."""
    fresh = run_input.messages[len(past) :]
    messages = [_MESSAGE.validate_python(message) for message in past] + list(fresh)
    parsed = json.loads(body)
    parsed["messages"] = past + parsed["messages"][len(past) :]
    rewritten = json.dumps(parsed, ensure_ascii=False, separators=(",", ":")).encode()
    return rewritten, run_input.model_copy(update={"messages": messages})
