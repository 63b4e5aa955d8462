"""The join stream: a live run as a cold client can take it up (``?join=1``).

``GET runs/{runId}?join=1``, a retried run POST and ``GET threads/{id}?join=1``
answer with :func:`joined_frames`: the run's stored events folded into a join
head (:class:`~agui_pipes.RunJoin`: ``RUN_STARTED``, ``MESSAGES_SNAPSHOT``,
``STATE_SNAPSHOT``, the starts of the items still open), then the live tail
with its normal ids. Only the head's last frame carries an id — the id of
the last folded entry — so a client cut inside the head has no cursor and
joins again, and one cut after it resumes the tail with ``Last-Event-ID``.

The log is read in pages (``EventLog.follow_batch``) and folded as it is
read: memory is the fold (the run's messages and state), not the log.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Any

from .._consumer.join import RunJoin
from .._protocol.decode import DecodeWarning, as_object, decode_event
from ..codecs import encode_json, encode_sse
from ..store import EventLog, format_event_id, sse_frame

if TYPE_CHECKING:
    from ag_ui.core import RunAgentInput

__all__ = ["JOIN_PROPS_KEY", "joined_frames", "joins_thread"]


async def joined_frames(
    store: EventLog,
    epoch: str,
    tenant: str,
    run_id: str,
    tail: Callable[[int], AsyncIterator[bytes]],
    *,
    messages: list[dict[str, Any]] | None = None,
    state: Any = None,
    generation: str = "",
) -> AsyncIterator[bytes]:
    """The join stream of ``run_id``: its head, then ``tail(after)`` (module doc).

    ``tail(seq)`` yields the run's framed entries after ``seq`` to its end;
    ``messages`` and ``state`` seed the fold (a retried POST's input, or the
    thread's history before this run); ``generation`` is the run's, for the
    SSE id of the head's last frame (``StoredRun.generation``).
    """
    join = RunJoin(messages=messages, state=state)
    warnings: list[DecodeWarning] = []
    after = 0
    page = store.follow_batch
    while True:
        entries = await store.read(run_id, after=after, limit=page, scope=tenant)
        for seq, data in entries:
            event = decode_event(as_object(data, seq), seq, warnings)
            if event is not None:
                join.feed(event)
            after = seq
        # A short page is the end of what is stored now: the tail follows from
        # there, so a run that grows faster than it is read is still joined.
        if len(entries) < page:
            break
    head = join.head()
    if head:
        *first, last = head
        frames = [encode_sse(event) for event in first]
        frames.append(
            sse_frame(encode_json(last), format_event_id(epoch, run_id, after, generation))
            if after
            else encode_sse(last)
        )
        yield b"".join(frames)
    if not join.ended:
        async for frame in tail(after):
            yield frame


JOIN_PROPS_KEY = "aguiPipes"
"""The ``forwardedProps`` key of agui_pipes' own requests: ``{"join": "thread"}``."""


def joins_thread(run_input: RunAgentInput) -> bool:
    """Whether a run POST asks to join its thread rather than start a run.

    ``forwardedProps: {"aguiPipes": {"join": "thread"}}`` — what a stock
    client sends on page load to take up whatever is live on the thread (the
    thread's history when nothing is). Its ``runId`` and messages are unused.
    """
    props = run_input.forwarded_props
    if not isinstance(props, dict):
        return False
    ours = props.get(JOIN_PROPS_KEY)
    return isinstance(ours, dict) and ours.get("join") == "thread"
