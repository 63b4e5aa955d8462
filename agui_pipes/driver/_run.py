"""``run(agent, input)``: an agent turned into a well-formed AG-UI event stream.

Structured concurrency is the shape: ``async with run(agent, input) as
events`` starts the agent as a task in a task group owned by the block, and
leaving the block — normally, early, or with an exception — cancels the
agent if it is still running and waits for its cleanup, so no task outlives
the block on asyncio or trio.

The agent emits synchronously into an anyio memory stream (unbounded by
default; ``event_buffer=N`` bounds it, and overflowing it is
EVENT_BUFFER_FULL). Emit cannot wait, so backpressure is applied at the
agent's awaits instead: while ``backpressure`` events wait for the consumer,
the agent is held at its next await (``_pace``). Every emitted event goes
through the transformers, then the producer verifier, then into the stream.

The guarantee: the first event is RUN_STARTED and the last is exactly one of
RUN_FINISHED / RUN_ERROR, whatever the agent does. The terminal phase is
where that is enforced — a RUN_FINISHED the verifier rejects becomes
RUN_ERROR PROTOCOL_VIOLATION, anything a transformer puts after the terminal
event is dropped, and if the transformers swallow the terminal event the
driver sends a RUN_ERROR past them.
"""

from __future__ import annotations

import inspect
import logging
import math
import sys
from collections.abc import Callable, Mapping, Sequence
from types import TracebackType
from typing import Any, Protocol

import anyio
import anyio.abc
from ag_ui.core import (
    BaseEvent,
    EventType,
    RunAgentInput,
    RunErrorEvent,
    RunFinishedEvent,
    RunStartedEvent,
)
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from pydantic import ValidationError

from .._foundation.errors import StreamRejected
from .._foundation.limits import Limits
from .._foundation.limits_scope import resolve_limits, using_limits
from .._foundation.principal import Principal, current_principal
from .._pipeline.chain import TransformerChain
from .._pipeline.transformer import Stage, StreamTransformer
from ._agent import AgentLike, not_awaitable, resolve_agent
from ._cancel import CancelToken
from ._context import RunContext, async_misuse, unfinished_scope
from ._core import RunCore, to_json
from ._errors import ErrorCode, RunError
from ._outcome import RunOutcome
from ._pace import Pacer, paced
from ._pipeline import Observe, Pipeline
from ._verify import producer_observer

__all__ = ["DEFAULT_BACKPRESSURE", "Run", "RunEvents", "RunSink", "Transformers", "run"]

_log = logging.getLogger("agui_pipes.driver")

Transformers = StreamTransformer | Sequence[Stage] | Callable[[], StreamTransformer] | None
"""What ``run(..., transformers=)`` takes: a stage, a list of stages, a factory, or None."""
_TERMINAL = (EventType.RUN_FINISHED, EventType.RUN_ERROR)
DEFAULT_BACKPRESSURE = 256
"""Events waiting for the consumer at which the agent is held at its next await."""
_CHECKPOINT_EVERY = 64
"""The consumer side yields to the scheduler at least this often while events are buffered."""


class RunSink(Protocol):
    """Takes a run's events in the agent's own task, instead of the run's event stream.

    For a consumer that would only turn each event into bytes for a socket (the
    agent endpoint): handing events over through the stream costs a wake-up of
    the consumer's task per agent wake-up, which is most of the cost of serving
    an agent that awaits once per token. ``deliver`` must not block; it raises
    ``anyio.BrokenResourceError`` when nothing can be delivered any more (the run
    then fails as on a vanished consumer). ``behind``/``wait_for_room`` replace the
    driver's own backpressure: the agent is held at its next await while
    ``behind()``.
    """

    def deliver(self, event: BaseEvent) -> None: ...

    def behind(self) -> bool: ...

    async def wait_for_room(self) -> None: ...


def _coerce_input(value: RunAgentInput | Mapping[str, Any]) -> RunAgentInput:
    if isinstance(value, RunAgentInput):
        return value
    if isinstance(value, Mapping):
        data = dict(value)
        data.setdefault("messages", [])
        try:
            return RunAgentInput.model_validate(data)
        except ValidationError as exc:
            first = exc.errors()[0]
            raise ValueError(
                f"run() input is not a valid RunAgentInput: {first['msg']} at "
                f"{'.'.join(str(p) for p in first['loc'])}; it needs at least threadId and runId"
            ) from exc
    raise TypeError(
        f"run() input must be an ag_ui.core.RunAgentInput or a mapping, got {type(value).__name__}"
    )


def _build_chain(transformers: Transformers) -> StreamTransformer | None:
    if transformers is None:
        return None
    if isinstance(transformers, Stage):
        chain: Any = transformers
    elif isinstance(transformers, Sequence):
        chain = TransformerChain(transformers)
    elif callable(transformers):
        chain = transformers()
    else:
        raise TypeError(
            f"transformers must be a stage, a list of stages or a factory returning one, got "
            f"{type(transformers).__name__}"
        )
    if isinstance(chain, TransformerChain):
        if not chain.is_sync:
            raise TypeError(
                "the run driver emits synchronously, so its transformers must all be "
                "synchronous StreamTransformer stages; run async stages or operators over "
                "the driver's output with chain.apply(events) instead"
            )
        return chain if len(chain) else None
    if isinstance(chain, StreamTransformer):
        return chain
    raise TypeError(
        f"transformers must be synchronous StreamTransformer stages, got "
        f"{type(chain).__name__}; run async stages over the driver's output with "
        "chain.apply(events)"
    )


def _unwrap(exc: Exception) -> Exception:
    """The lone exception inside (nested) single-member exception groups, else ``exc``."""
    while True:
        inner = getattr(exc, "exceptions", None)
        if not isinstance(inner, tuple) or len(inner) != 1 or not isinstance(inner[0], Exception):
            return exc
        exc = inner[0]


class RunEvents:
    """The event stream of one run: ``async for event in events``.

    ``aclose()`` stops reading without leaving the ``async with``: the
    agent's next emit then fails with DISCONNECTED and the agent unwinds.
    """

    __slots__ = ("_pacer", "_receive", "cancel_token", "run_id")

    def __init__(
        self,
        receive: MemoryObjectReceiveStream[BaseEvent],
        run_id: str,
        token: CancelToken,
        pacer: Pacer,
    ) -> None:
        self._receive = receive
        self._pacer = pacer
        self.run_id = run_id
        self.cancel_token = token

    def __aiter__(self) -> RunEvents:
        return self

    async def __anext__(self) -> BaseEvent:
        # Buffered events are taken without a scheduler round each (that round
        # would dominate the cost per event); a periodic full receive keeps the
        # consumer a good citizen (a checkpoint) during long bursts. The
        # pacer's count of taken events is this loop's counter; an agent held
        # for backpressure is woken off the fast path — at a checkpoint, or
        # once the buffer is empty — so taking a buffered event costs no check.
        pacer = self._pacer
        taken = pacer.taken = pacer.taken + 1
        if taken % _CHECKPOINT_EVERY:
            try:
                return self._receive.receive_nowait()
            except anyio.WouldBlock:
                pass
            except (anyio.EndOfStream, anyio.ClosedResourceError):
                raise StopAsyncIteration from None
        if pacer.room is not None:
            pacer.took(taken - 1)
        try:
            return await self._receive.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            raise StopAsyncIteration from None

    async def aclose(self) -> None:
        """Stop reading; the agent's next emit fails with DISCONNECTED."""
        self._pacer.release()
        self._receive.close()


class Run:
    """The async context manager ``run()`` returns; entering it starts the agent.

    It takes ``run()``'s arguments, and ``sink``: a ``RunSink`` that every
    event is handed to in the agent's task (the event stream then only ends
    when the run does) and that paces the agent instead of ``backpressure``.
    """

    def __init__(
        self,
        agent: AgentLike,
        run_input: RunAgentInput | Mapping[str, Any],
        *,
        transformers: Transformers = None,
        verify: bool = True,
        echo_input: bool = False,
        event_buffer: int | None = None,
        backpressure: int | None = DEFAULT_BACKPRESSURE,
        cancel_token: CancelToken | None = None,
        limits: Limits | None = None,
        sink: RunSink | None = None,
        principal: Principal | None = None,
    ) -> None:
        if backpressure is not None and (
            not isinstance(backpressure, int) or isinstance(backpressure, bool) or backpressure < 1
        ):
            raise ValueError(
                f"backpressure must be a positive number of events or None (never hold the "
                f"agent), got {backpressure!r}"
            )
        if event_buffer is not None and (
            not isinstance(event_buffer, int) or isinstance(event_buffer, bool) or event_buffer < 1
        ):
            raise ValueError(
                f"event_buffer must be a positive number of events or None (unbounded), "
                f"got {event_buffer!r}"
            )
        if cancel_token is not None and not isinstance(cancel_token, CancelToken):
            raise TypeError(
                f"cancel_token must be an agui_pipes.CancelToken, got {type(cancel_token).__name__}"
            )
        self._function, self._state_model = resolve_agent(agent)
        self._input = _coerce_input(run_input)
        self._limits = resolve_limits(limits)
        self._principal = current_principal() if principal is None else principal
        with using_limits(self._limits):  # stages built here default to the run's limits
            self._chain = _build_chain(transformers)
        self._observe: Observe | None = producer_observer() if verify else None
        self._echo_input = echo_input
        self._buffer = event_buffer
        self._backpressure = backpressure
        self._pacer = Pacer(sys.maxsize if backpressure is None else backpressure)
        self._sink = sink
        """Given: every event goes to it, the event stream only ends; it paces the agent."""
        self._token = cancel_token if cancel_token is not None else CancelToken()
        self._task_group: anyio.abc.TaskGroup | None = None
        self._send: MemoryObjectSendStream[BaseEvent] | None = None
        self._receive: MemoryObjectReceiveStream[BaseEvent] | None = None
        self._done = False
        self._entered = False

    # -- the consumer's side ---------------------------------------------------------

    async def __aenter__(self) -> RunEvents:
        if self._entered:
            raise RuntimeError("a run can be entered once; call run(agent, input) again")
        self._entered = True
        size = math.inf if self._buffer is None else self._buffer
        self._send, self._receive = anyio.create_memory_object_stream[BaseEvent](size)
        task_group = anyio.create_task_group()
        await task_group.__aenter__()
        self._task_group = task_group
        task_group.start_soon(self._drive, name=f"agui_pipes run {self._input.run_id}")
        return RunEvents(self._receive, self._input.run_id, self._token, self._pacer)

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        task_group = self._task_group
        assert task_group is not None
        assert self._receive is not None
        if not self._done:
            # The consumer left before the run ended: stop the agent now. The
            # token reaches anything the agent started outside this task group.
            self._token.cancel()
            task_group.cancel_scope.cancel()
        self._pacer.release()
        self._receive.close()
        self._task_group = None
        # The driver task never raises (it turns every failure into RUN_ERROR),
        # so the task group is only waited for: the consumer's own exception,
        # if any, propagates as itself rather than wrapped in an exception group.
        await task_group.__aexit__(None, None, None)
        return None

    def __aiter__(self) -> Any:
        raise TypeError(
            "run() is an async context manager: write "
            "`async with run(agent, input) as events: async for event in events: ...`"
        )

    # -- the agent's side ------------------------------------------------------------

    async def _drive(self) -> None:
        send = self._send
        assert send is not None
        pipeline = Pipeline(
            send.send_nowait if self._sink is None else self._sink.deliver,
            chain=self._chain,
            observe=self._observe,
            token=self._token,
            buffer_size=self._buffer,
            pacer=self._pacer,
            limits=self._limits,
        )
        core = RunCore(self._input, pipeline, self._state_model, self._principal)
        try:
            terminal = await self._run_agent(core)
            await self._finish(pipeline, terminal)
            self._done = True
        finally:
            send.close()

    def _started_event(self) -> RunStartedEvent:
        run_input = self._input
        fields: dict[str, Any] = {"thread_id": run_input.thread_id, "run_id": run_input.run_id}
        if run_input.parent_run_id is not None:
            fields["parent_run_id"] = run_input.parent_run_id
        if self._echo_input:
            fields["input"] = run_input
        return RunStartedEvent(**fields)

    async def _run_agent(self, core: RunCore) -> BaseEvent:
        """Start, run the agent, and return the terminal event it earned."""
        pipeline = core.pipeline
        error: RunError | None = None
        outcome: object = None
        try:
            pipeline.start(self._started_event())
            core.decode_state()
            ctx: RunContext[Any] = RunContext(core, None)
            pending = self._function(ctx)
            if not inspect.isawaitable(pending):
                raise RunError.agent(not_awaitable(self._function, pending))
            if self._sink is not None:
                pending = paced(pending, self._sink)
            elif self._backpressure is not None:
                pending = paced(pending, self._pacer)
            outcome = await pending
        except RunError as exc:
            error = exc
        except Exception as exc:
            inner = _unwrap(exc)
            if isinstance(inner, RunError):
                error = inner
            else:
                fix = async_misuse(inner)
                error = RunError.agent(inner if fix is None else fix)
                if fix is not None:
                    error.__cause__ = inner
        return self._terminal(core, error, outcome)

    def _terminal(self, core: RunCore, error: RunError | None, outcome: object) -> BaseEvent:
        pipeline = core.pipeline
        if pipeline.failure is not None:
            error = pipeline.failure  # the first failure on the way out is the real one
        if error is None:
            if outcome is None:
                outcome = RunOutcome.success()
            if not isinstance(outcome, RunOutcome):
                error = RunError.protocol(
                    f"the agent returned a {type(outcome).__name__}; return a RunOutcome "
                    "(RunOutcome.success(), .interrupt([...]) or .cancelled())"
                )
            elif pipeline.token.is_cancelled() and outcome.kind != "cancelled":
                error = RunError.cancelled(pipeline.token.reason)
            elif core.open_scopes:
                sub_id, name = next(iter(core.open_scopes.items()))
                error = unfinished_scope(sub_id, name)
        if error is not None:
            return _run_error(error.code, error.message)
        assert isinstance(outcome, RunOutcome)
        fields: dict[str, Any] = {"thread_id": core.input.thread_id, "run_id": core.run_id}
        wire = outcome.to_wire()
        if wire is not None:
            fields["outcome"] = wire
        if outcome.result is not None:
            try:
                fields["result"] = to_json(outcome.result, "the run's result")
            except RunError as failure:
                return _run_error(failure.code, failure.message)
        return RunFinishedEvent(**fields)

    async def _finish(self, pipeline: Pipeline, terminal: BaseEvent) -> None:
        """Send the terminal event through the transformers and the verifier, with fallbacks."""
        outputs: list[BaseEvent]
        try:
            outputs = list(pipeline.tail(terminal))
        except StreamRejected as exc:
            outputs = [_replacement(terminal, ErrorCode.PROTOCOL_VIOLATION, str(exc))]
        except Exception as exc:
            outputs = [_replacement(terminal, ErrorCode.AGENT_ERROR, f"agent error: {exc}")]
        ended = False
        for out in outputs:
            if ended:
                _log.warning(
                    "dropped %s a transformer put after the terminal event", out.type.value
                )
                continue
            checked = self._checked(pipeline, out)
            if checked is None:
                continue
            try:
                await self._hand_over(checked)
            except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                return  # nobody is reading any more
            ended = checked.type in _TERMINAL
        if not ended:
            if terminal.type is EventType.RUN_ERROR:
                fallback = terminal
            else:
                fallback = _run_error(
                    ErrorCode.PROTOCOL_VIOLATION,
                    "the transformers dropped the run's RUN_FINISHED; a run must end with "
                    "RUN_FINISHED or RUN_ERROR, so the driver ends it here",
                )
            try:
                await self._hand_over(fallback)
            except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                return

    async def _hand_over(self, event: BaseEvent) -> None:
        if self._sink is not None:
            self._sink.deliver(event)
        else:
            assert self._send is not None
            await self._send.send(event)

    def _checked(self, pipeline: Pipeline, event: BaseEvent) -> BaseEvent | None:
        """Verify one terminal-phase event: replace a rejected RUN_FINISHED, drop others."""
        observe = pipeline.observe
        if observe is None:
            return event
        try:
            observe(event)
            return event
        except RunError as rejection:
            if event.type is EventType.RUN_FINISHED:
                replacement = _run_error(rejection.code, rejection.message)
                try:
                    observe(replacement)
                except RunError:
                    _log.warning("the verifier also rejects the replacement RUN_ERROR")
                return replacement
            if event.type is EventType.RUN_ERROR:
                _log.warning(
                    "the verifier rejects the final RUN_ERROR (%s); sending it anyway",
                    rejection.message,
                )
                return event
            _log.warning(
                "dropped %s at the end of the run: %s", event.type.value, rejection.message
            )
            return None


def _run_error(code: ErrorCode | str, message: str) -> RunErrorEvent:
    value = code.value if isinstance(code, ErrorCode) else code
    return RunErrorEvent(message=message, code=value)


def _replacement(terminal: BaseEvent, code: ErrorCode, message: str) -> BaseEvent:
    """What goes out when the transformers fail on the terminal event itself."""
    _log.warning("the transformers failed on %s: %s", terminal.type.value, message)
    return terminal if terminal.type is EventType.RUN_ERROR else _run_error(code, message)


def run(
    agent: AgentLike,
    input: RunAgentInput | Mapping[str, Any],
    *,
    transformers: Transformers = None,
    verify: bool = True,
    echo_input: bool = False,
    event_buffer: int | None = None,
    backpressure: int | None = DEFAULT_BACKPRESSURE,
    cancel_token: CancelToken | None = None,
    limits: Limits | None = None,
    principal: Principal | None = None,
) -> Run:
    """Run ``agent`` on ``input`` as an AG-UI event stream.

    Use it as::

        async with run(agent, input) as events:
            async for event in events:
                ...

    ``agent`` is an object with ``async def run(self, ctx)`` or an
    ``async def agent(ctx)`` returning a ``RunOutcome`` (``None`` counts as
    success). ``input`` is a ``RunAgentInput`` or a mapping of its fields
    (``messages`` defaults to empty).

    * ``transformers`` — synchronous stages run on every emitted event: a
      stage, a list of stages, a ``TransformerChain`` (used for this one run)
      or a factory returning one.
    * ``verify`` — check every outgoing event with the producer ordering
      verifier (on by default); a rejection ends the run in RUN_ERROR
      PROTOCOL_VIOLATION.
    * ``echo_input`` — put the input on RUN_STARTED.input.
    * ``event_buffer`` — bound the events waiting for the consumer; an emit
      that would exceed it fails with EVENT_BUFFER_FULL. ``None``: unbounded.
    * ``backpressure`` — while this many events wait for the consumer, the
      agent is held at its next ``await`` until the consumer has taken half
      of them (emit itself cannot wait). ``None``: never held.
    * ``cancel_token`` — a ``CancelToken`` to cancel the run from outside;
      leaving the ``async with`` early trips it too.
    * ``limits`` — bounds on the state the run publishes (values, bytes,
      nesting; None: the limits in effect, normally ``DEFAULT_LIMITS``). A
      state past them fails with PROTOCOL_VIOLATION, rule ``limit-exceeded``,
      before anything is sent; stages built from a ``transformers`` factory
      default to them too.
    * ``principal`` — who the run is for, as ``ctx.principal`` (None: the
      principal current where the run is created — a server's, see
      ``agui_pipes.server.auth.current_principal`` — else ``ANONYMOUS``).
    """
    return Run(
        agent,
        input,
        transformers=transformers,
        verify=verify,
        echo_input=echo_input,
        event_buffer=event_buffer,
        backpressure=backpressure,
        cancel_token=cancel_token,
        limits=limits,
        principal=principal,
    )
