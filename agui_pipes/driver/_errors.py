"""The one error type of the run driver, and the codes it puts on RUN_ERROR.

Everything the driver and ``RunContext`` raise is a ``RunError``; whatever else
escapes an agent is wrapped as ``AGENT_ERROR``. A single class with a stable
``code`` (rather than a subclass per failure) is deliberate: the code is what
lands on the wire, callers route on a handful of codes, and a new failure mode
then never changes what ``except`` clauses have to name.
"""

from __future__ import annotations

import enum
from typing import TYPE_CHECKING, Any

from .._foundation.errors import AguiPipesError

if TYPE_CHECKING:
    from ag_ui.core import BaseEvent

__all__ = ["ErrorCode", "RunError"]


class ErrorCode(str, enum.Enum):
    """The stable codes carried by ``RUN_ERROR.code``."""

    PROTOCOL = "PROTOCOL"
    """A core type rejected a value (an interrupt outcome with no interrupts, say)."""
    SERIALIZATION = "SERIALIZATION"
    """State, tool arguments or a tool result would not convert to or from JSON."""
    PROTOCOL_VIOLATION = "PROTOCOL_VIOLATION"
    """The emitted stream broke an ordering rule (the verifier rejected an event)."""
    CANCELLED = "CANCELLED"
    """The run was cancelled: its cancel token tripped."""
    DISCONNECTED = "DISCONNECTED"
    """The consumer stopped reading the event stream."""
    AGENT_ERROR = "AGENT_ERROR"
    """The agent's own code failed (``RunError.agent(...)`` or any foreign exception)."""
    EVENT_BUFFER_FULL = "EVENT_BUFFER_FULL"
    """A bounded event buffer filled up because the consumer reads slower than the agent emits."""
    INVALID_RESUME = "INVALID_RESUME"
    """An answer in ``input.resume`` is missing or does not match its interrupt's schema."""


class RunError(AguiPipesError):
    """A run failure with a stable ``code``; the run ends in RUN_ERROR carrying both.

    ``str(error)`` is the RUN_ERROR message. ``verification`` holds the
    verifier's ``VerificationError`` for ``PROTOCOL_VIOLATION`` raised by the
    ordering check (``None`` for violations the driver detects itself).
    """

    def __init__(
        self, code: ErrorCode | str, message: str, *, verification: Any | None = None
    ) -> None:
        super().__init__(message)
        self.code: str = code.value if isinstance(code, ErrorCode) else str(code)
        self.message = message
        self.verification = verification

    # -- constructors, one per code ------------------------------------------

    @classmethod
    def agent(cls, error: BaseException | str) -> RunError:
        """Wrap the agent's own failure: code AGENT_ERROR, message ``agent error: ...``."""
        error_text = error if isinstance(error, str) else (str(error) or type(error).__name__)
        wrapped = cls(ErrorCode.AGENT_ERROR, f"agent error: {error_text}")
        if isinstance(error, BaseException):
            wrapped.__cause__ = error
        return wrapped

    @classmethod
    def protocol(cls, message: str) -> RunError:
        """A value the protocol types reject (code PROTOCOL)."""
        return cls(ErrorCode.PROTOCOL, message)

    @classmethod
    def serialization(cls, message: str) -> RunError:
        """A value that would not convert to or from JSON (code SERIALIZATION)."""
        return cls(ErrorCode.SERIALIZATION, message)

    @classmethod
    def violation(cls, message: str, *, verification: Any | None = None) -> RunError:
        """The emitted stream broke an ordering rule (code PROTOCOL_VIOLATION)."""
        return cls(ErrorCode.PROTOCOL_VIOLATION, message, verification=verification)

    @classmethod
    def cancelled(cls, reason: str | None = None) -> RunError:
        """The run's cancel token tripped (code CANCELLED), with the canceller's reason if any."""
        return cls(ErrorCode.CANCELLED, reason or "the run was cancelled")

    @classmethod
    def disconnected(cls) -> RunError:
        """Nobody reads the event stream any more (code DISCONNECTED)."""
        return cls(ErrorCode.DISCONNECTED, "the consumer stopped reading the event stream")

    @classmethod
    def buffer_full(cls, size: int, event: BaseEvent) -> RunError:
        """The bounded event buffer overflowed (code EVENT_BUFFER_FULL)."""
        return cls(
            ErrorCode.EVENT_BUFFER_FULL,
            f"the event buffer is full ({size} events waiting) while emitting "
            f"{event.type.value}: the consumer reads slower than the agent emits; "
            "raise event_buffer, pass event_buffer=None for an unbounded buffer, "
            "or await between emits",
        )

    # -- routing ---------------------------------------------------------------

    def is_cancelled(self) -> bool:
        """True for CANCELLED: stop, the run was called off (nothing is broken)."""
        return self.code == ErrorCode.CANCELLED.value

    def is_disconnected(self) -> bool:
        """True for DISCONNECTED: stop, nobody is listening (nothing is broken)."""
        return self.code == ErrorCode.DISCONNECTED.value

    @property
    def rule(self) -> Any | None:
        """The verifier rule that was broken (a ``Rule``), for verifier rejections."""
        return getattr(self.verification, "rule", None)

    def __repr__(self) -> str:
        return f"RunError({self.code!r}, {self.message!r})"
