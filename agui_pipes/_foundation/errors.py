"""The exceptions the pipeline machinery raises.

Two families, because callers route on them differently:

* ``StreamRejected`` — a stage looked at the stream and refused it on purpose
  (a protocol violation, a policy). It surfaces *as itself*, annotated with
  the stage and the event position, so ``except ProtocolViolation`` keeps
  working through any depth of chains. ``ProtocolViolation`` is the family
  of rejections for an invalid stream.
* ``StageError`` — a stage broke (a bug, an unexpected exception). The
  original exception is chained as ``__cause__``; the wrapper names the stage
  and the event so the failing input can be found in a long recording.
"""

from __future__ import annotations

from typing import ClassVar

from ag_ui.core import BaseEvent

__all__ = ["AguiPipesError", "ProtocolViolation", "StageError", "StreamRejected"]


class AguiPipesError(Exception):
    """Base class of every exception agui_pipes raises on purpose."""


def _where(
    stage: str | None, event: BaseEvent | None, index: int | None, *, at_event: bool = False
) -> str:
    """``stage X, event #N (TYPE)``; without an event, ``index`` is the end of stream.

    ``index`` is 0-based (the first event is #0). At the end of stream it is
    the index of the last event, so "after N events" is a count; ``at_event``
    says the index names an event that has no decoded form (a malformed one).
    """
    parts = []
    if stage is not None:
        parts.append(f"stage {stage}")
    if event is not None:
        parts.append(
            f"event #{index} ({event.type.value})"
            if index is not None
            else f"event {event.type.value}"
        )
    elif at_event and index is not None:
        parts.append(f"event #{index}")
    elif index is not None and index >= 0:
        parts.append(f"end of stream after {index + 1} event{'s' if index else ''}")
    elif index is not None:
        parts.append("end of stream")
    return ", ".join(parts)


class StreamRejected(AguiPipesError):
    """A stage refused the stream deliberately.

    ``stage``, ``event`` and ``index`` are filled in by the chain that ran the
    stage (when the raiser did not set them), ``index`` being the position of
    the *source* event that led to the rejection (0-based). Without an
    ``event`` the rejection happened at the end of the stream and ``index`` is
    the last event's (``-1``: the stream had none) — except for subclasses
    whose ``at_event`` is true (a malformed event, which has no decoded form).
    """

    at_event: ClassVar[bool] = False
    """True when ``index`` always names an event, even with no ``event`` to show."""

    stage: str | None
    event: BaseEvent | None
    index: int | None

    def __init__(
        self,
        message: str,
        *,
        stage: str | None = None,
        event: BaseEvent | None = None,
        index: int | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.stage = stage
        self.event = event
        self.index = index

    def __str__(self) -> str:
        where = _where(
            self.stage, None, self.index if self.event is None else None, at_event=self.at_event
        )
        if self.event is not None and self.index is not None:
            where = _where(self.stage, self.event, self.index)
        return f"{self.message} [{where}]" if where else self.message


class ProtocolViolation(StreamRejected):
    """The stream broke the AG-UI protocol; it should be abandoned.

    Raised by the verifier (``agui_pipes.verify.VerificationError``), by chunk
    expansion and by decoding (a malformed described field).
    ``except ProtocolViolation`` catches every way a stream can be refused as
    invalid.
    """


class StageError(AguiPipesError):
    """A stage raised an unexpected exception while processing an event.

    ``event`` is ``None`` when the failure happened in ``finish()`` (end of
    stream). The original exception is ``__cause__``.
    """

    def __init__(
        self,
        stage: str,
        event: BaseEvent | None,
        index: int | None,
        cause: BaseException,
        phase: str | None = None,
    ) -> None:
        self.stage = stage
        self.event = event
        self.index = index
        self.cause = cause
        self.__cause__ = cause
        self.phase = phase or ("finish()" if event is None else "transform()")
        where = _where(stage, event, index) if phase is None else f"stage {stage}"
        super().__init__(f"{where}: {self.phase} raised {type(cause).__name__}: {cause}")
