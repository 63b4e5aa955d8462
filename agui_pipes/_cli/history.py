"""``agui-pipes history --store URL THREAD_ID`` — a thread's history, read from the event log.

Reads the store directly (no server needed: the same SQLite file or Redis a
server writes to) and folds the thread's ended runs with
``agui_pipes.thread_history``, as ``GET {path}/threads/{threadId}`` does:
one short valid run (RUN_STARTED, MESSAGES_SNAPSHOT, STATE_SNAPSHOT when the
thread has state, RUN_FINISHED).

``--format ndjson`` (default) and ``sse`` print that run's events, ready to feed
a client or ``agui-pipes verify``; ``transcript`` prints the conversation for a
person: each message with its role, tool calls as calls, then the state.

Runs still live (being produced) are left out and named on stderr; broken runs
(their log is incomplete) too. Exit status: 0 printed; 2 usage, store or data
error, and a thread the store does not know.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, TextIO

import anyio

__all__ = ["register"]

EXIT_OK = 0
EXIT_ERROR = 2


def register(subparsers: Any) -> None:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "history",
        help="print a thread's history from an event log (ndjson, sse or a transcript)",
        description=(
            "Fold the ended runs of THREAD_ID, read from the event log at --store, into "
            "one run (its messages and state) and print it."
        ),
    )
    parser.add_argument("thread_id", metavar="THREAD_ID", help="the thread to show")
    parser.add_argument(
        "--store",
        required=True,
        metavar="URL",
        help="the event log: memory:, sqlite:///runs.db, redis://host:6379/0",
    )
    parser.add_argument(
        "--format",
        choices=["ndjson", "sse", "transcript"],
        default="ndjson",
        help="ndjson or sse: the history run's events; transcript: a readable conversation",
    )
    parser.set_defaults(handler=_history)


def _error(message: str) -> int:
    print(f"agui-pipes history: {message}", file=sys.stderr)
    return EXIT_ERROR


def _history(args: argparse.Namespace) -> int:
    from ..store import open_store

    try:
        store = open_store(args.store)
    except ValueError as exc:
        return _error(str(exc))
    try:
        return anyio.run(_print, store, args.thread_id, args.format, sys.stdout)
    except OSError as exc:
        return _error(f"cannot use the store {args.store}: {exc}")


async def _print(store: Any, thread_id: str, form: str, out: TextIO) -> int:
    from .._consumer.history import thread_history
    from ..codecs import encode_ndjson, encode_sse
    from ..store import RunBroken, RunStatus, StoreError, UnknownRun
    from ..store._base import DEFAULT_SCOPE

    try:
        async with store:
            # The operator reads any thread: the store says whose it is.
            scope = await store.thread_scope(thread_id) or DEFAULT_SCOPE
            runs = await store.thread_runs(thread_id, scope=scope)
            if not runs:
                return _error(
                    f"no thread {thread_id!r} in the event log (never recorded, or removed "
                    "by retention); check the id and the --store URL"
                )
            wire: list[list[bytes]] = []
            for record in runs:
                if record.status is RunStatus.LIVE:
                    print(
                        f"note: run {record.run_id!r} is still live; it is not in the history",
                        file=sys.stderr,
                    )
                    continue
                try:
                    if record.status is RunStatus.BROKEN:
                        stored = None
                    else:
                        entries = await store.read(record.run_id, scope=scope)
                        stored = [data for _, data in entries]
                except (RunBroken, UnknownRun):
                    stored = None
                if stored is not None:
                    wire.append(stored)
                else:
                    print(
                        f"note: run {record.run_id!r} has no complete log (broken or "
                        "removed); it is not in the history",
                        file=sys.stderr,
                    )
    except StoreError as exc:
        return _error(f"the event log failed: {exc}")
    try:
        events = thread_history(thread_id, wire)
    except ValueError as exc:
        return _error(f"the thread's stored runs do not fold: {exc}")
    if form == "transcript":
        _transcript(events, out)
    else:
        encode = encode_sse if form == "sse" else encode_ndjson
        for event in events:
            out.write(encode(event).decode())
    out.flush()
    return EXIT_OK


def _transcript(events: list[Any], out: TextIO) -> None:
    """The conversation as a person reads it: role, text, tool calls, then the state."""
    from ag_ui.core import MessagesSnapshotEvent, StateSnapshotEvent

    for event in events:
        if isinstance(event, MessagesSnapshotEvent):
            if not event.messages:
                out.write("(no messages)\n")
            for message in event.messages:
                wire = message.model_dump(by_alias=True, exclude_none=True)
                _message(wire, out)
        elif isinstance(event, StateSnapshotEvent):
            out.write("state: " + json.dumps(event.snapshot, ensure_ascii=False) + "\n")


def _message(message: dict[str, Any], out: TextIO) -> None:
    role = message.get("role", "?")
    content = message.get("content")
    if role == "tool":
        out.write(f"tool ({message.get('toolCallId', '?')}): {_text(content)}\n")
        return
    if content not in (None, ""):
        text = _text(content).replace("\n", "\n  ")
        out.write(f"{role}: {text}\n")
    for call in message.get("toolCalls", []) or []:
        function = call.get("function", {})
        out.write(f"{role} calls {function.get('name', '?')}({function.get('arguments', '')})\n")


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # multimodal: the text parts, the rest by type
        parts = [
            part.get("text", "") if part.get("type") == "text" else f"[{part.get('type', '?')}]"
            for part in content
            if isinstance(part, dict)
        ]
        return " ".join(parts)
    return json.dumps(content, ensure_ascii=False)
