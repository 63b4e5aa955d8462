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
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

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
from .consume import WireItem, fold

__all__ = ["thread_history"]


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
    if not isinstance(thread_id, str):
        raise TypeError(f"thread_history: thread_id must be a string, got {thread_id!r}")
    watch = _Watch(thread_id)
    result = fold(watch.events(runs), limits=limits)
    if run_id is None:
        run_id = "history" if watch.last_run_id is None else f"history:{watch.last_run_id}"
    events: list[BaseEvent] = [
        RunStartedEvent(thread_id=thread_id, run_id=run_id),
        MessagesSnapshotEvent.model_validate({"messages": result.messages}),
    ]
    if watch.touched_state:
        events.append(StateSnapshotEvent(snapshot=result.state))
    finished: dict[str, Any] = {"threadId": thread_id, "runId": run_id}
    if result.outcome == "interrupt" and result.interrupts:
        outcome = RunFinishedInterruptOutcome.model_validate(
            {"type": "interrupt", "interrupts": result.interrupts}
        )
        finished["outcome"] = outcome
    events.append(RunFinishedEvent.model_validate(finished))
    return events
