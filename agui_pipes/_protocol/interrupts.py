"""The interrupt contract of a thread: may this run's input go ahead?

AG-UI 1.0 (concepts/interrupts): a run pauses by ending with
``RUN_FINISHED{outcome: {type: "interrupt", interrupts: [...]}}``; the next run
on the thread answers with ``input.resume = [{interruptId, status, payload?}]``.
Every open interrupt must be answered, exactly once; an answer to an id that
is not open is an error; an interrupt past its ``expiresAt`` cannot be
resolved; pending interrupts block new input. The stream verifier sees one
run; these rules span two, so they are checked here, on the *input* of the
next run, before any agent or upstream is called.

:class:`ThreadVerifier` holds what the rules need — the open interrupts (the
last run's interrupt outcome) and the ids answered before (bounded) — and
:meth:`ThreadVerifier.check` returns the run's effective answers or raises
:class:`InterruptRefused` with a stable ``code`` and an HTTP status:

=====================  ======  ================================================
code                   status  when
=====================  ======  ================================================
``interrupt_pending``  409     open interrupts left unanswered (resume missing
                               or incomplete), or new input while they are open
``unknown_interrupt``  422     an answer to an id the thread never had open
``interrupt_answered`` 409     an answer to an id a previous run already answered
``duplicate_answer``   422     the same id answered twice in one resume
``interrupt_expired``  409     a ``resolved`` answer after the interrupt's
                               ``expiresAt`` (``cancelled`` is still accepted)
``no_pending_interrupts`` 409  a resume on a thread with nothing open
``invalid_payload``    422     a payload that does not match the interrupt's
                               ``responseSchema``
=====================  ======  ================================================

With ``new_input="cancel"`` the open interrupts a run leaves unanswered are
answered ``cancelled`` for it instead (the returned answers carry them), so a
user who types instead of approving moves the thread on.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Container, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Literal

from ag_ui.core import (
    BaseEvent,
    Interrupt,
    ResumeEntry,
    RunAgentInput,
    RunErrorEvent,
    RunFinishedEvent,
    RunFinishedInterruptOutcome,
    RunStartedEvent,
)

from .._foundation.errors import AguiPipesError

__all__ = [
    "MAX_ANSWERED_IDS",
    "InterruptRefused",
    "NewInput",
    "ThreadVerifier",
]

NewInput = Literal["refuse", "cancel"]

MAX_ANSWERED_IDS = 10_000
"""Answered interrupt ids a thread verifier remembers (oldest forgotten first)."""


class InterruptRefused(AguiPipesError):
    """A run's input breaks the thread's interrupt contract (see the module's table)."""

    def __init__(
        self, code: str, status: int, message: str, interrupt_ids: Sequence[str] = ()
    ) -> None:
        super().__init__(message)
        self.code = code
        self.http_status = status
        self.message = message
        self.interrupt_ids = list(interrupt_ids)

    def __reduce__(self) -> Any:
        return (type(self), (self.code, self.http_status, self.message, self.interrupt_ids))


@dataclass(frozen=True)
class _Open:
    interrupt: Interrupt
    run_id: str
    expires: float | None


def _expiry(interrupt: Interrupt) -> float | None:
    """``expiresAt`` as a POSIX time; None when absent. A bad value is refused upstream."""
    text = interrupt.expires_at
    if text is None:
        return None
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError as exc:
        raise ValueError(
            f"interrupt {interrupt.id!r}: expiresAt {text!r} is not an ISO 8601 date-time"
        ) from exc
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return moment.timestamp()


def _shown(ids: Iterable[str]) -> str:
    listed = [repr(i if len(i) <= 80 else i[:77] + "...") for i in ids]
    if len(listed) > 5:
        listed = [*listed[:5], f"and {len(listed) - 5} more"]
    return ", ".join(listed)


class ThreadVerifier:
    """The interrupt contract of one thread (module doc).

    Feed it the thread's runs as they end — :meth:`observe` with each run's
    terminal event, or :meth:`from_runs` with the stored log — and ask
    :meth:`check` about the next run's input. :meth:`accept` records a checked
    input's answers once the run is admitted.

    ``now`` is the clock (POSIX seconds) for ``expiresAt``; ``new_input`` is
    what to do with a run that leaves open interrupts unanswered (``"refuse"``:
    409 ``interrupt_pending``; ``"cancel"``: answer them ``cancelled``);
    ``check_payloads`` validates each ``resolved`` payload against the
    interrupt's ``responseSchema`` (with ``jsonschema``).
    """

    def __init__(
        self,
        *,
        now: Callable[[], float] = time.time,
        new_input: NewInput = "refuse",
        check_payloads: bool = True,
        max_answered: int = MAX_ANSWERED_IDS,
    ) -> None:
        if new_input not in ("refuse", "cancel"):
            raise ValueError(f"new_input must be 'refuse' or 'cancel', got {new_input!r}")
        self._now = now
        self.new_input: NewInput = new_input
        self.check_payloads = check_payloads
        self._max_answered = max_answered
        self._open: dict[str, _Open] = {}
        self._answered: OrderedDict[str, str] = OrderedDict()

    # -- what the thread holds -----------------------------------------------

    @property
    def open_interrupts(self) -> list[Interrupt]:
        """The interrupts the next run must answer, in the order they were raised."""
        return [entry.interrupt for entry in self._open.values()]

    def observe(self, run_id: str, terminal: BaseEvent | None) -> None:
        """A run of the thread ended with ``terminal`` (None: cut, no terminal).

        The run answered what was open when it started (the check admitted it),
        so those become answered; an interrupt outcome opens its interrupts.
        """
        self._answer_all(run_id)
        if isinstance(terminal, RunFinishedEvent) and isinstance(
            terminal.outcome, RunFinishedInterruptOutcome
        ):
            for interrupt in terminal.outcome.interrupts:
                self._open[interrupt.id] = _Open(interrupt, run_id, _expiry(interrupt))

    def _answer_all(self, run_id: str) -> None:
        for interrupt_id in self._open:
            self._remember(interrupt_id, run_id)
        self._open.clear()

    def _remember(self, interrupt_id: str, run_id: str) -> None:
        self._answered[interrupt_id] = run_id
        self._answered.move_to_end(interrupt_id)
        while len(self._answered) > self._max_answered:
            self._answered.popitem(last=False)

    @classmethod
    def from_runs(cls, runs: Iterable[Sequence[BaseEvent]], **options: Any) -> ThreadVerifier:
        """A verifier that has observed ``runs`` (each a run's events, oldest run first)."""
        verifier = cls(**options)
        for events in runs:
            run_id = "-"
            terminal: BaseEvent | None = None
            for event in events:
                if isinstance(event, RunStartedEvent):
                    run_id = event.run_id
                elif isinstance(event, RunFinishedEvent | RunErrorEvent):
                    terminal = event
            verifier.observe(run_id, terminal)
        return verifier

    # -- the next run's input ------------------------------------------------

    def check(
        self, run_input: RunAgentInput, *, known_message_ids: Container[str] | None = None
    ) -> list[ResumeEntry]:
        """The run's effective answers, or :class:`InterruptRefused` (module table).

        ``known_message_ids`` are the ids of messages the thread already holds:
        with them, a user message the thread has not seen counts as new input
        (refused while interrupts are open and unanswered). Nothing changes
        here; call :meth:`accept` once the run is admitted.
        """
        answers = list(run_input.resume or ())
        seen: set[str] = set()
        duplicates: list[str] = []
        for answer in answers:
            if answer.interrupt_id in seen:
                duplicates.append(answer.interrupt_id)
            seen.add(answer.interrupt_id)
        if duplicates:
            raise InterruptRefused(
                "duplicate_answer",
                422,
                f"resume answers interrupt {_shown(dict.fromkeys(duplicates))} more than once; "
                "send exactly one entry per interrupt id",
                duplicates,
            )
        if answers and not self._open:
            self._refuse_stray(answers, none_open=True)
        stray = [a for a in answers if a.interrupt_id not in self._open]
        if stray:
            self._refuse_stray(stray, none_open=False)
        now = self._now()
        late = [
            a.interrupt_id
            for a in answers
            if a.status == "resolved"
            and (expires := self._open[a.interrupt_id].expires) is not None
            and now > expires
        ]
        if late:
            raise InterruptRefused(
                "interrupt_expired",
                409,
                f"interrupt {_shown(late)} expired (expiresAt passed); it can only be answered "
                "with status 'cancelled' now",
                late,
            )
        if self.check_payloads:
            for answer in answers:
                self._check_payload(answer)
        missing = [i for i in self._open if i not in seen]
        if missing:
            if self.new_input == "cancel":
                answers.extend(ResumeEntry(interrupt_id=i, status="cancelled") for i in missing)
            else:
                new = self._new_input(run_input, known_message_ids)
                why = (
                    "new input while interrupts are pending"
                    if new
                    else "every open interrupt must be answered by the next run"
                )
                raise InterruptRefused(
                    "interrupt_pending",
                    409,
                    f"{why}: interrupt {_shown(missing)} of run "
                    f"{self._open[missing[0]].run_id!r} has no answer; send input.resume with "
                    "one entry {interruptId, status: 'resolved' | 'cancelled'} per open interrupt",
                    missing,
                )
        return answers

    def _refuse_stray(self, stray: Sequence[ResumeEntry], *, none_open: bool) -> None:
        ids = [a.interrupt_id for a in stray]
        answered = [i for i in ids if i in self._answered]
        if answered:
            raise InterruptRefused(
                "interrupt_answered",
                409,
                f"interrupt {_shown(answered)} was already answered by run "
                f"{self._answered[answered[0]]!r}; an interrupt is answered once",
                answered,
            )
        if none_open:
            raise InterruptRefused(
                "no_pending_interrupts",
                409,
                f"resume answers interrupt {_shown(ids)}, but the thread has no pending "
                "interrupts; send the run without resume",
                ids,
            )
        raise InterruptRefused(
            "unknown_interrupt",
            422,
            f"resume answers interrupt {_shown(ids)}, which the thread never raised; the open "
            f"ones are {_shown(self._open)}",
            ids,
        )

    def _check_payload(self, answer: ResumeEntry) -> None:
        schema = self._open[answer.interrupt_id].interrupt.response_schema
        if schema is None or answer.status != "resolved":
            return
        try:
            import jsonschema
        except ImportError:  # pragma: no cover - an install without the extra
            raise ImportError(
                f"interrupt {answer.interrupt_id!r} has a responseSchema and checking payloads "
                "needs jsonschema: pip install 'agui-pipes[interrupts]' (or pass "
                "check_payloads=False to leave payloads to the agent)"
            ) from None
        try:
            jsonschema.validate(answer.payload, schema)
        except jsonschema.ValidationError as exc:
            where = "/".join(str(p) for p in exc.absolute_path) or "(the payload itself)"
            raise InterruptRefused(
                "invalid_payload",
                422,
                f"the payload answering interrupt {answer.interrupt_id!r} does not match its "
                f"responseSchema at {where}: {exc.message}",
                [answer.interrupt_id],
            ) from None
        except jsonschema.SchemaError as exc:
            raise InterruptRefused(
                "invalid_payload",
                422,
                f"interrupt {answer.interrupt_id!r} has a responseSchema that is not a valid "
                f"JSON Schema ({exc.message}); its payload cannot be checked",
                [answer.interrupt_id],
            ) from None

    @staticmethod
    def _new_input(run_input: RunAgentInput, known: Container[str] | None) -> bool:
        if known is None or not run_input.messages:
            return False
        last = run_input.messages[-1]
        return last.role == "user" and last.id not in known

    def accept(self, run_id: str, answers: Sequence[ResumeEntry]) -> None:
        """Record the answers of an admitted run (what :meth:`check` returned)."""
        for answer in answers:
            self._open.pop(answer.interrupt_id, None)
            self._remember(answer.interrupt_id, run_id)
