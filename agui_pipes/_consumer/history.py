"""Thread history: every run of a thread, folded into one short valid run.

A UI that reloads a page needs the thread's conversation and state, not a
replay of every token of every run — and a replay of several runs is itself
fragile (a consumer that treats RUN_ERROR as terminal drops everything after
a failed run, ag-ui #2408). :func:`thread_history` folds all the runs in
order with the consumer's own application rules (:func:`agui_pipes.fold`,
chunks expanded first) and states the result as one run:

* ``RUN_STARTED`` — the thread id, and a run id of its own (see below);
* ``MESSAGES_SNAPSHOT`` — the folded messages (always, even empty: a
  snapshot also tells a client which stale messages to drop);
* ``STATE_SNAPSHOT`` — the folded state, only when some run carried a
  STATE_SNAPSHOT or STATE_DELTA (a thread that never touched its state sends
  none, so a client keeps the state it has);
* ``RUN_FINISHED`` — plain success, except when the thread's last run ended
  in an interrupt: the history then ends with that same interrupt outcome,
  so a reloaded UI still knows it must answer it before the thread goes on.

A run that failed (RUN_ERROR) or was cut (no terminal event) keeps what it
produced: its messages as far as they got, a message still open included,
its tool calls with or without results, and its state changes.

The user's own turns are in the history because a server records them: each
run's RUN_STARTED carries ``input`` with the messages the client sent that
the thread did not hold yet (its new user turns and tool results), and the
fold adds an input message whose id it does not hold, as the reference client
does.

:class:`HistoryFold` is the same fold kept open: a server extends it by the
runs that ended since (``add``) instead of folding the whole thread again, and
states any page of it (``page``): the messages a window of runs introduced.
``snapshot()`` states the open fold as bytes and ``HistoryFold.restore`` opens
it again, so a server can keep a thread's fold in its event log and, after a
restart, fold only the runs that ended since instead of the whole thread.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any, Final

import orjson
from ag_ui.core import (
    BaseEvent,
    MessagesSnapshotEvent,
    RunFinishedEvent,
    RunFinishedInterruptOutcome,
    RunStartedEvent,
    StateDeltaEvent,
    StateSnapshotEvent,
)

from .._foundation.errors import ProtocolViolation
from .._foundation.limits import Limits
from .._protocol.chunks import ChunkExpander
from .._protocol.decode import DecodeWarning, as_object, decode_event
from .consume import Folder, WireItem

__all__ = ["SNAPSHOT_FORMAT", "HistoryFold", "HistoryPage", "SnapshotInvalid", "thread_history"]

SNAPSHOT_FORMAT: Final = "agui_pipes.history/1"
"""What ``HistoryFold.snapshot`` writes and ``restore`` reads; a snapshot of another
format is refused (``SnapshotInvalid``), and the thread is folded from its runs."""


class SnapshotInvalid(ValueError):
    """Bytes that are not a history snapshot this version reads (another format, corrupt)."""


class _Watch:
    """Feeds the fold one run after another, noting what the history run needs."""

    def __init__(self, thread_id: str) -> None:
        self.thread_id = thread_id
        self.touched_state = False
        self.last_run_id: str | None = None
        self.run = 0
        self.warnings: list[DecodeWarning] = []

    def events(self, runs: Iterable[Iterable[WireItem]]) -> Iterator[BaseEvent]:
        for index, run in enumerate(runs):
            yield from self.run_events(index, run)

    def run_events(self, index: int, run: Iterable[WireItem]) -> Iterator[BaseEvent]:
        """The events of run #``index``, decoded and chunks expanded."""
        self.run = index
        # One expander per run: a chunk stream left open by a cut run must not
        # swallow the next run's first chunks.
        expand = ChunkExpander().expand
        for position, item in enumerate(run):
            event = self._event(item, index, position)
            if event is None:
                continue
            try:
                expanded = expand(event)
            except ProtocolViolation as exc:
                raise ValueError(
                    f"thread_history: run #{index} has a chunk stream no consumer could "
                    f"assemble: {exc}"
                ) from exc
            for out in expanded:
                self._note(out, index)
                yield out

    def _event(self, item: object, index: int, position: int) -> BaseEvent | None:
        """An event as stored: a model, or its wire form (decoded; unknown types dropped)."""
        if isinstance(item, BaseEvent):
            return item
        if not isinstance(item, dict | str | bytes | bytearray | memoryview):
            raise TypeError(
                f"thread_history: run #{index}, item #{position} is a {type(item).__name__}; "
                "give ag_ui.core events or their wire form (a JSON object, text or bytes)"
            )
        try:
            return decode_event(as_object(item, position), position, self.warnings)  # type: ignore[arg-type]
        except ProtocolViolation as exc:
            raise ValueError(f"thread_history: run #{index} does not decode: {exc}") from exc

    def _note(self, event: BaseEvent, index: int) -> None:
        cls = event.__class__
        if cls is StateSnapshotEvent or cls is StateDeltaEvent:
            self.touched_state = True
        elif cls is RunStartedEvent:
            started: RunStartedEvent = event  # type: ignore[assignment]
            if started.thread_id != self.thread_id:
                raise ValueError(
                    f"thread_history: run #{index} ('{started.run_id}') belongs to thread "
                    f"'{started.thread_id}', not '{self.thread_id}'; pass only the runs of "
                    "one thread"
                )
            self.last_run_id = started.run_id
        elif cls is RunFinishedEvent:
            finished: RunFinishedEvent = event  # type: ignore[assignment]
            if finished.thread_id != self.thread_id:
                raise ValueError(
                    f"thread_history: run #{index} finishes on thread '{finished.thread_id}', "
                    f"not '{self.thread_id}'; pass only the runs of one thread"
                )


def thread_history(
    thread_id: str,
    runs: Iterable[Iterable[WireItem]],
    *,
    run_id: str | None = None,
    limits: Limits | None = None,
) -> list[BaseEvent]:
    """The thread's runs (oldest first) as one run: its messages and state (see module doc).

    Each run is a sequence of ``ag_ui.core`` events or of their wire form (JSON
    objects, text or bytes — what an event log stores), decoded as a consumer
    decodes them: an unknown event type is dropped.

    ``run_id`` names the history run; by default it is ``"history:"`` followed
    by the id of the last run that started (``"history"`` when none did), so
    it changes exactly when the thread gained a run, and it never equals a
    real run's id (a run id is never reused on a thread). ``limits`` bounds
    the folded state and activities as in :func:`agui_pipes.fold`.

    Raises ``ValueError`` when a run belongs to another thread, holds an item
    that does not decode or a chunk stream no consumer could assemble, and
    ``TypeError`` for an item that is neither an event nor a wire form.
    """
    history = HistoryFold(thread_id, limits=limits)
    for index, run in enumerate(runs):
        history.add(str(index), run)
    return history.events(run_id)


_NEW_THREAD: Final = object()
"""The state a fold starts from when no snapshot gives one: a new thread's (``{}``)."""


class _IntroducingFolder(Folder):
    """A ``Folder`` that notes, for each message id, the run that introduced it."""

    def __init__(self, limits: Limits | None, state: Any = _NEW_THREAD) -> None:
        self.introduced: dict[str, int] = {}
        self.current_run = 0
        super().__init__({} if state is _NEW_THREAD else state, None, limits)

    def _index(self, message: dict[str, Any]) -> None:
        super()._index(message)
        self.introduced.setdefault(message["id"], self.current_run)


class HistoryPage:
    """One page of a thread's history: its events and the cursor of the page before it.

    ``events`` are the history run (module doc) holding the messages the
    page's runs introduced, in the thread's order; the state and an
    interrupt outcome only on the newest page (they are the thread's now).
    ``runs`` are the keys of the page's runs, oldest first; ``next`` is the key to
    pass as ``before`` for the older page, None on the oldest.
    """

    __slots__ = ("events", "next", "runs")

    def __init__(self, events: list[BaseEvent], runs: list[str], next_key: str | None) -> None:
        self.events = events
        self.runs = runs
        self.next = next_key


class HistoryFold:
    """A thread's history folded run by run and kept open, to be extended and paged.

    ``add(key, run)`` folds one more run (oldest first; ``key`` names it, a
    stored run id); ``messages_ids()`` are the ids of the messages the
    thread holds; ``page(before=, limit=)`` states a window of runs as a
    history run; ``events()`` the whole history, as :func:`thread_history`
    gives it. Not thread-safe: one caller at a time (a server holds a lock).
    """

    def __init__(self, thread_id: str, *, limits: Limits | None = None) -> None:
        if not isinstance(thread_id, str):
            raise TypeError(f"thread_history: thread_id must be a string, got {thread_id!r}")
        self.thread_id = thread_id
        self.keys: list[str] = []
        """The keys of the runs folded, oldest first."""
        self._watch = _Watch(thread_id)
        self._folder = _IntroducingFolder(limits)
        self._started: list[str | None] = []  # per run: the run id its RUN_STARTED named

    def add(self, key: str, run: Iterable[WireItem]) -> None:
        """Fold one more run (see :func:`thread_history` for what raises)."""
        index = len(self.keys)
        folder = self._folder
        folder.current_run = index
        before = self._watch.last_run_id
        apply = folder.apply
        for event in self._watch.run_events(index, run):
            apply(event)
        started = self._watch.last_run_id
        self._started.append(started if started != before else None)
        self.keys.append(key)

    def snapshot(self) -> bytes:
        """The fold as it stands, as bytes ``HistoryFold.restore`` opens again (JSON)."""
        return _snapshot(self)

    @classmethod
    def restore(cls, thread_id: str, data: bytes, *, limits: Limits | None = None) -> HistoryFold:
        """The fold a ``snapshot()`` of ``thread_id``'s history stated, open to ``add`` to.

        Adding runs to it gives what adding them to the fold that was
        snapshotted would. Raises ``SnapshotInvalid`` for bytes that are not
        such a snapshot (another format, another thread, cut or corrupt).
        """
        return _restore(thread_id, data, limits)

    def message_ids(self) -> set[str]:
        """The ids of the messages the history holds now."""
        return {message["id"] for message in self._folder.messages}

    def events(self, run_id: str | None = None) -> list[BaseEvent]:
        """The whole history as one run (what :func:`thread_history` returns)."""
        return self._events(self._messages(0, len(self.keys)), True, run_id)

    def page(self, *, before: str | None = None, limit: int) -> HistoryPage:
        """The ``limit`` runs before the run keyed ``before`` (default: the newest).

        Raises ``KeyError`` when ``before`` names no folded run.
        """
        end = len(self.keys) if before is None else self.keys.index(before)
        start = max(0, end - limit)
        newest = end == len(self.keys)
        run_id = None
        for started in reversed(self._started[start:end]):
            if started is not None:
                run_id = f"history:{started}"
                break
        if run_id is None:
            run_id = "history"
        events = self._events(self._messages(start, end), newest, run_id)
        return HistoryPage(events, self.keys[start:end], self.keys[start] if start else None)

    def _messages(self, start: int, end: int) -> list[dict[str, Any]]:
        folder = self._folder
        folder._flush()  # the deltas buffered by the last run, joined
        if start == 0 and end == len(self.keys):
            return folder.messages
        introduced = folder.introduced
        return [m for m in folder.messages if start <= introduced.get(m["id"], 0) < end]

    def _events(
        self, messages: list[dict[str, Any]], newest: bool, run_id: str | None
    ) -> list[BaseEvent]:
        folder, thread_id = self._folder, self.thread_id
        if run_id is None:
            last = self._watch.last_run_id
            run_id = "history" if last is None else f"history:{last}"
        events: list[BaseEvent] = [
            RunStartedEvent(thread_id=thread_id, run_id=run_id),
            MessagesSnapshotEvent.model_validate({"messages": messages}),
        ]
        if newest and self._watch.touched_state:
            events.append(StateSnapshotEvent(snapshot=folder.state))
        finished: dict[str, Any] = {"threadId": thread_id, "runId": run_id}
        if newest and folder.outcome == "interrupt" and folder.interrupts:
            outcome = RunFinishedInterruptOutcome.model_validate(
                {"type": "interrupt", "interrupts": folder.interrupts}
            )
            finished["outcome"] = outcome
        events.append(RunFinishedEvent.model_validate(finished))
        return events


def _snapshot_fields(data: bytes, thread_id: str) -> dict[str, Any]:
    """The decoded fields of a snapshot of ``thread_id``'s fold; ``SnapshotInvalid`` otherwise.

    Checked field by field: a snapshot comes back from a store, and one that
    was cut, written by another version or by something else entirely must be
    refused, not folded on.
    """
    try:
        doc = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise SnapshotInvalid(f"not JSON: {exc}") from None
    if not isinstance(doc, dict) or doc.get("format") != SNAPSHOT_FORMAT:
        found = doc.get("format") if isinstance(doc, dict) else type(doc).__name__
        raise SnapshotInvalid(f"format {found!r}, not {SNAPSHOT_FORMAT!r}")
    if doc.get("thread") != thread_id:
        raise SnapshotInvalid(f"a snapshot of thread {doc.get('thread')!r}, not {thread_id!r}")
    keys, started, introduced = doc.get("keys"), doc.get("started"), doc.get("introduced")
    messages, interrupts = doc.get("messages"), doc.get("interrupts")
    runs = len(keys) if isinstance(keys, list) else -1
    checks = (
        ("keys", isinstance(keys, list) and all(isinstance(k, str) for k in keys)),
        (
            "started",
            isinstance(started, list)
            and len(started) == runs
            and all(s is None or isinstance(s, str) for s in started),
        ),
        (
            "introduced",
            isinstance(introduced, dict)
            and all(type(i) is int and 0 <= i < runs for i in introduced.values()),
        ),
        (
            "messages",
            isinstance(messages, list)
            and all(isinstance(m, dict) and isinstance(m.get("id"), str) for m in messages),
        ),
        (
            "interrupts",
            isinstance(interrupts, list) and all(isinstance(i, dict) for i in interrupts),
        ),
        ("touched", isinstance(doc.get("touched"), bool)),
        ("lastRun", doc.get("lastRun") is None or isinstance(doc.get("lastRun"), str)),
        ("outcome", doc.get("outcome") is None or isinstance(doc.get("outcome"), str)),
    )
    for name, ok in checks:
        if not ok:
            raise SnapshotInvalid(f"its {name!r} field is missing or malformed")
    return doc


def _snapshot(history: HistoryFold) -> bytes:
    folder = history._folder
    folder._flush()  # the deltas buffered by the last run, joined
    return orjson.dumps(
        {
            "format": SNAPSHOT_FORMAT,
            "thread": history.thread_id,
            "keys": history.keys,
            "started": history._started,
            "introduced": folder.introduced,
            "messages": folder.messages,
            "state": folder.state,
            "touched": history._watch.touched_state,
            "lastRun": history._watch.last_run_id,
            "outcome": folder.outcome,
            "interrupts": folder.interrupts,
        }
    )


def _restore(thread_id: str, data: bytes, limits: Limits | None) -> HistoryFold:
    doc = _snapshot_fields(data, thread_id)
    history = HistoryFold(thread_id, limits=limits)
    folder = _IntroducingFolder(limits, state=doc.get("state"))
    folder.messages = doc["messages"]
    folder._index_all()
    folder.introduced = doc["introduced"]
    folder.outcome = doc["outcome"]
    folder.interrupts = doc["interrupts"]
    history._folder = folder
    history.keys = doc["keys"]
    history._started = doc["started"]
    history._watch.touched_state = doc["touched"]
    history._watch.last_run_id = doc["lastRun"]
    return history
