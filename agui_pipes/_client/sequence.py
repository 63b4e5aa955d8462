"""The ids of one run's frames, checked: each must continue the last one.

An agui-pipes server numbers a run's frames ``<epoch>.<generation>:<runId>:1``, ``:2``, ...
with no gap (docs/durable.md), and a resume answers with the frames after the
id the client sent. So the id every frame must carry is known in advance, and
anything else — a skipped number (events missing), a repeated one (an event
twice), another run's or another store epoch's id, or no id at all — means the
server is not giving the run it promises. The client stops there with
``OutOfSequence`` rather than fold a run that is not the one the server logged.

Whether a stream can be resumed is settled by the run's first frame: an id in
the ``<epoch>.<generation>:<runId>:<seq>`` form makes it resumable (and every later frame
must carry one); no id, or an id of another form (a server with its own
numbering), makes it a stream the client reads once and cannot resume.
"""

from __future__ import annotations

from dataclasses import replace

from ..store import BadEventId, EventId, parse_event_id
from .errors import OutOfSequence

__all__ = ["EventIds"]


class EventIds:
    """The ids of run ``run_id`` seen so far; ``accept`` checks the next frame's.

    ``after`` is the id of the last frame the caller already has (a resume by id
    after a restart): the next frame must continue it.
    """

    def __init__(self, run_id: str, after: str | None = None) -> None:
        self.run_id = run_id
        self.last: EventId | None = None
        self.last_text = ""  # the last accepted id as the server wrote it
        self.resumable: bool | None = None  # None until the first frame decides
        self.unusable = ""  # why the ids cannot be used to resume, when they cannot
        self.frames = 0
        if after is not None:
            try:
                self.last = parse_event_id(after)
            except BadEventId as exc:
                raise ValueError(f"last_event_id {after!r} is not an agui-pipes id: {exc}") from exc
            if self.last.run_id != run_id:
                raise ValueError(
                    f"last_event_id {after!r} belongs to run {self.last.run_id!r}, not {run_id!r}"
                )
            self.last_text = after
            self.resumable = True
            self.frames = self.last.seq

    def expected(self) -> str:
        """The id the next frame must carry (``<epoch>`` when no frame came yet)."""
        if self.last is None:
            return f"<epoch>.<generation>:{self.run_id}:1"
        return str(replace(self.last, seq=self.last.seq + 1))

    def accept(self, text: str) -> None:
        """Check the next frame's id; raise ``OutOfSequence`` if it is not the one due."""
        self.frames += 1
        if self.resumable is None:
            self._first(text)
            return
        if not self.resumable:
            return
        assert self.last is not None
        due = replace(self.last, seq=self.last.seq + 1)
        if not text:
            raise self._refuse(
                text,
                f"frame {self.frames} of run {self.run_id!r} has no id, though the server "
                f"numbered the frames before it (the last was {self.last_text!r})",
            )
        try:
            got = parse_event_id(text)
        except BadEventId as exc:
            raise self._refuse(text, f"frame {self.frames} of run {self.run_id!r}: {exc}") from exc
        if got != due:
            raise self._refuse(text, self._why(got, due))
        self.last, self.last_text = got, text

    def _first(self, text: str) -> None:
        if not text:
            self.resumable = False
            self.unusable = "the server sent no SSE ids, so it does not support resuming"
            return
        try:
            got = parse_event_id(text)
        except BadEventId:
            self.resumable = False
            self.unusable = (
                f"the server's SSE ids (the first: {text[:80]!r}) are not agui-pipes ids "
                "('<epoch>.<generation>:<runId>:<seq>'), so it does not support resuming"
            )
            return
        if got.run_id != self.run_id or got.seq != 1:
            raise self._refuse(
                text,
                f"the first frame of run {self.run_id!r} carries id {text!r}: "
                + ("another run's id" if got.run_id != self.run_id else "not the run's first"),
            )
        self.resumable = True
        self.last, self.last_text = got, text

    def _why(self, got: EventId, due: EventId) -> str:
        where = f"after {self.last_text!r} of run {self.run_id!r}"
        if got.run_id != due.run_id:
            return f"{where} came a frame of another run, {str(got)!r}"
        if got.epoch != due.epoch:
            return (
                f"{where} came {str(got)!r}, of another store epoch (the server's store "
                "was reset or replaced)"
            )
        if got.generation != due.generation:
            return (
                f"{where} came {str(got)!r}, of another run of that id (the server's store "
                "deleted the run and the id was used again)"
            )
        if got.seq > due.seq:
            missing = got.seq - due.seq
            return f"{where} came {str(got)!r}: a gap, {missing} event(s) missing"
        return f"{where} came {str(got)!r}: a duplicate, an event the client already had"

    def _refuse(self, got: str, why: str) -> OutOfSequence:
        expected = self.expected()
        return OutOfSequence(
            f"{why} (expected id {expected!r}, got {got!r}): the server is not sending the "
            "run it logged, so the client stops rather than show a run with events missing "
            "or twice",
            expected,
            got,
        )
