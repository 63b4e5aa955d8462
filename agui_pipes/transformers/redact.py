"""Redact: replace text matching regular expressions before it reaches the client.

Secrets (API keys, card numbers, internal hostnames) leak into model output,
tool arguments and tool results. Redacting per event is not enough, because a
streamed secret is split across deltas ("sk-ab" + "c123..."), and neither half
matches. So for streamed items — text message content, reasoning message
content, tool-call arguments, and the chunk forms of each — the stage keeps a
small **hold-back buffer** per item: it releases text only up to a point no
match can still reach, holding back the last ``hold_back`` characters and any
match that touches the end of what has arrived (it may continue). The held
text is released, redacted, right before the item's END (for chunk streams:
before whatever closes the item's lane), before a RUN_ERROR, and at the end
of the stream. Explicit CONTENT / ARGS events are held and released *whole*:
an event whose text holds no match leaves unchanged (no copy — the common
case costs a regex scan), and a released stretch holding a match becomes one
event carrying the redacted text (the first event's fields; later events'
metadata in that stretch is not kept). Chunk streams release held text by
rewriting deltas, because a chunk opener cannot be held back.

Holding CONTENT / ARGS back moves where they close chunk lanes on the client,
so the stage follows the lanes of its output too (``LaneMirror``) and names
the item of any chunk that would otherwise resolve differently downstream.

Whole values are redacted in place: tool results (string content and text
parts), state (every string inside STATE_SNAPSHOT and STATE_DELTA values and
the RUN_STARTED ``state`` echo; ``state=False`` leaves state alone), activity
content, and messages in MESSAGES_SNAPSHOT and the RUN_STARTED echo (content,
text parts, tool-call arguments). By option also the ``message`` of RUN_ERROR
and SUBAGENT_ERROR (``errors=True``: exception texts quote connection strings
and keys) and every string inside a CUSTOM ``value`` (``custom=True``). RAW
payloads and ``rawEvent`` are not inspected — drop them with StripRawEvents.

A JSON Patch ``test`` operation whose value holds a match is dropped rather
than redacted: the client may hold the unredacted value (state it sent
itself), and a redacted test would then fail there and take the whole delta
with it. The rest of the delta still applies; only the guard is lost.

A secret longer than ``hold_back`` characters is still caught as long as its
pattern matches a prefix of it that reaches the end of the buffer (for example
``sk-[A-Za-z0-9]{20,}``); the guarantee for arbitrary patterns is for matches
of up to ``hold_back + 1`` characters. The cost is latency: text reaches the
client ``hold_back`` characters late.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import ag_ui.core as ag
from ag_ui.core import BaseEvent

from .._lazy import public_dir
from .._pipeline.transformer import StreamTransformer
from .._stagekit.chunk_lanes import CHUNK_CLASSES, CLOSING_CLASSES, ChunkAssignment, ChunkItem
from .._stagekit.dispatch import HandlerTable
from .._stagekit.lane_mirror import LaneMirror, fill_chunk

__all__ = ["Redact"]
__dir__ = public_dir(__all__)

_Handler = Callable[[Any], Sequence[BaseEvent]]

_CONTENT: dict[type[BaseEvent], tuple[str, str]] = {
    ag.TextMessageContentEvent: ("text", "message_id"),
    ag.ToolCallArgsEvent: ("tool", "tool_call_id"),
    ag.ReasoningMessageContentEvent: ("reasoning", "message_id"),
}
_END: dict[type[BaseEvent], tuple[str, str]] = {
    ag.TextMessageEndEvent: ("text", "message_id"),
    ag.ToolCallEndEvent: ("tool", "tool_call_id"),
    ag.ReasoningMessageEndEvent: ("reasoning", "message_id"),
}


class _Queue:
    """The delta events of one explicit item not yet released, and their text."""

    __slots__ = ("ends", "events", "text")

    def __init__(self) -> None:
        self.events: list[BaseEvent] = []
        self.ends: list[int] = []
        self.text = ""

    def push(self, event: BaseEvent, delta: str) -> None:
        self.events.append(event)
        self.text += delta
        self.ends.append(len(self.text))


class Redact(StreamTransformer):
    """Replace text matching regular expressions in message content, tool arguments and results.

    ``Redact([r"sk-[A-Za-z0-9]{20,}", r"\\b\\d{16}\\b"], replacement="[secret]")``.
    Patterns are Python regular expressions; the replacement is literal text.
    State strings are redacted too (``state=False`` turns that off); ``errors=True``
    adds RUN_ERROR / SUBAGENT_ERROR messages, ``custom=True`` CUSTOM values.
    """

    def __init__(
        self,
        patterns: Iterable[str] | str,
        replacement: str = "[REDACTED]",
        hold_back: int = 64,
        state: bool = True,
        errors: bool = False,
        custom: bool = False,
    ) -> None:
        sources = [patterns] if isinstance(patterns, str) else list(patterns)
        if not sources:
            raise ValueError("Redact: give at least one pattern, e.g. Redact([r'sk-\\w{20,}'])")
        compiled: list[re.Pattern[str]] = []
        for i, source in enumerate(sources):
            try:
                compiled.append(re.compile(source))
            except (re.error, TypeError) as exc:
                raise ValueError(
                    f"Redact: pattern #{i + 1} {source!r} is not a valid regular expression: {exc}"
                ) from None
        if not isinstance(hold_back, int) or hold_back < 0:
            raise ValueError(f"Redact: hold_back must be an integer >= 0, got {hold_back!r}")
        for option, flag in (("state", state), ("errors", errors), ("custom", custom)):
            if not isinstance(flag, bool):
                raise ValueError(f"Redact: {option} must be True or False, got {flag!r}")
        self._in_state = state
        self._patterns = tuple(compiled)
        self._replacement = str(replacement)
        self._hold = hold_back
        # Held CONTENT / ARGS events reach the client later than they arrived, and
        # they close chunk lanes there: the output's lanes are followed apart from
        # the input's, so a chunk keeps meaning the same item (LaneMirror).
        self._mirror = LaneMirror()
        self._lanes = self._mirror.source
        # explicit items: (kind, id) -> the delta events held back, released whole
        self._queues: dict[tuple[str, str], _Queue] = {}
        # chunk items: key -> (held text, template chunk to release it with, its item)
        self._held: dict[tuple[str, str, str], tuple[str, BaseEvent, ChunkItem]] = {}
        handlers: HandlerTable = {}
        for cls in CLOSING_CLASSES:
            handlers[cls] = self._closing
        for cls in _CONTENT:
            handlers[cls] = self._content
        for cls in _END:
            handlers[cls] = self._end
        self._chunk_handler: _Handler = self._chunk
        for cls in CHUNK_CLASSES:
            handlers[cls] = self._chunk_handler
        handlers[ag.ToolCallResultEvent] = self._result
        if state:
            handlers[ag.StateSnapshotEvent] = self._state_snapshot
            handlers[ag.StateDeltaEvent] = self._state_delta
        if errors:
            handlers[ag.SubagentErrorEvent] = self._subagent_error
        if custom:
            handlers[ag.CustomEvent] = self._custom
        handlers[ag.ActivitySnapshotEvent] = self._activity_snapshot
        handlers[ag.ActivityDeltaEvent] = self._activity_delta
        handlers[ag.MessagesSnapshotEvent] = self._messages_snapshot
        handlers[ag.RunStartedEvent] = self._run_started
        handlers[ag.RunErrorEvent] = self._run_error_message if errors else self._run_error
        self._handlers = handlers

    # -- text machinery ------------------------------------------------------

    def _matches(self, text: str) -> list[tuple[int, int]]:
        """Non-overlapping match spans of every pattern, leftmost (then longest) first."""
        spans: list[tuple[int, int]] = []
        for pattern in self._patterns:
            spans.extend(
                (m.start(), m.end()) for m in pattern.finditer(text) if m.end() > m.start()
            )
        if len(self._patterns) > 1:
            spans.sort(key=lambda s: (s[0], -s[1]))
        merged: list[tuple[int, int]] = []
        end = -1
        for start, stop in spans:
            if start >= end:
                merged.append((start, stop))
                end = stop
        return merged

    def _replace(self, text: str, spans: list[tuple[int, int]], upto: int) -> str:
        out: list[str] = []
        position = 0
        for start, stop in spans:
            if stop > upto:
                break
            out.append(text[position:start])
            out.append(self._replacement)
            position = stop
        out.append(text[position:upto])
        return "".join(out)

    def redact_text(self, text: str) -> str:
        """``text`` with every match replaced (no hold-back)."""
        spans = self._matches(text)
        return self._replace(text, spans, len(text)) if spans else text

    def _stream(
        self, key: tuple[str, str, str], delta: str, template: BaseEvent, item: ChunkItem
    ) -> str:
        """Add ``delta`` to the item's buffer; return the redacted text safe to release."""
        held = self._held.pop(key, None)
        text = held[0] + delta if held is not None else delta
        spans = self._matches(text)
        cut = max(0, len(text) - self._hold)
        for start, stop in spans:
            if stop > cut or stop == len(text):
                cut = min(cut, start)
                break
        if cut < len(text):
            self._held[key] = (text[cut:], template, item)
        return self._replace(text, spans, cut)

    def _release(self, key: tuple[str, str, str]) -> BaseEvent | None:
        """The held text of an item as one more delta event (None when nothing is held)."""
        held = self._held.pop(key, None)
        if held is None:
            return None
        text, template, item = held
        update: dict[str, Any] = {"delta": self.redact_text(text), "raw_event": None}
        update["tool_call_id" if type(template) is ag.ToolCallChunkEvent else "message_id"] = key[2]
        # Named in full: where it lands, a held CONTENT released late may have
        # closed its lane on the client, and then this chunk opens the item again.
        return fill_chunk(template.model_copy(update=update), item)

    def _value(self, value: Any) -> tuple[Any, bool]:
        """A JSON value with every string redacted, and whether anything changed."""
        if isinstance(value, str):
            new = self.redact_text(value)
            return new, new != value
        if isinstance(value, dict):
            changed = False
            out: dict[Any, Any] = {}
            for k, v in value.items():
                out[k], c = self._value(v)
                changed = changed or c
            return (out, True) if changed else (value, False)
        if isinstance(value, list):
            items = [self._value(v) for v in value]
            if any(c for _, c in items):
                return [v for v, _ in items], True
            return value, False
        return value, False

    def _content_value(self, content: Any) -> tuple[Any, bool]:
        """Message/result content: a string, or parts whose text parts are redacted."""
        if isinstance(content, str):
            new = self.redact_text(content)
            return new, new != content
        if isinstance(content, list):
            out = []
            changed = False
            for part in content:
                if getattr(part, "type", None) == "text" and isinstance(part.text, str):
                    new = self.redact_text(part.text)
                    if new != part.text:
                        part = part.model_copy(update={"text": new})
                        changed = True
                out.append(part)
            return (out, True) if changed else (content, False)
        return content, False

    # -- dispatch --------------------------------------------------------------

    def transform(self, event: BaseEvent) -> Sequence[BaseEvent]:
        # Not TableDispatch.transform: the output lanes follow what a handler other
        # than the chunk handler (which follows them itself) emitted.
        handler = self._handlers.get(type(event))
        if handler is None:
            return (event,)
        out = handler(event)
        if handler is not self._chunk_handler:
            self._follow(out)
        return out

    def _follow(self, out: Sequence[BaseEvent]) -> None:
        """Apply what is emitted to the output's lanes (released chunks name their item)."""
        output = self._mirror.output
        for emitted in out:
            if type(emitted) in CHUNK_CLASSES:
                output.assign(emitted)
            elif output.open:
                output.observe(emitted)

    def finish(self) -> Sequence[BaseEvent]:
        return self._release_all()

    def _release_all(self) -> list[BaseEvent]:
        out: list[BaseEvent] = []
        for queue in self._queues.values():
            out.extend(self._drain(queue, final=True))
        self._queues.clear()
        for key in list(self._held):
            released = self._release(key)
            if released is not None:
                out.append(released)
        return out

    def _closing(self, event: BaseEvent) -> Sequence[BaseEvent]:
        """An event that may close chunk lanes: release their held text first."""
        if not self._lanes.open:
            return (event,)
        before = dict(self._lanes.open)
        self._lanes.observe(event)
        flushed = self._release_items(
            item for lane, item in before.items() if self._lanes.open.get(lane) is not item
        )
        return (*flushed, event) if flushed else (event,)

    def _release_items(self, items: Iterable[ChunkItem]) -> list[BaseEvent]:
        out = []
        for item in items:
            released = self._release(("chunk", item.kind.__name__, item.id))
            if released is not None:
                out.append(released)
        return out

    def _content(self, event: BaseEvent) -> Sequence[BaseEvent]:
        out = self._closing(event)
        bucket, attr = _CONTENT[type(event)]
        key = (bucket, getattr(event, attr))
        queue = self._queues.get(key)
        if queue is None:
            queue = self._queues[key] = _Queue()
        queue.push(event, event.delta)  # type: ignore[attr-defined]
        released = self._drain(queue, final=False)
        if not queue.events:
            del self._queues[key]
        return (*out[:-1], *released)

    def _end(self, event: BaseEvent) -> Sequence[BaseEvent]:
        out = self._closing(event)
        bucket, attr = _END[type(event)]
        queue = self._queues.pop((bucket, getattr(event, attr)), None)
        if queue is None:
            return out
        return (*out[:-1], *self._drain(queue, final=True), event)

    def _drain(self, queue: _Queue, *, final: bool) -> list[BaseEvent]:
        """Release the held delta events no match can still reach.

        Events are released whole and unchanged when their text holds no match
        (the common case costs no copy); the released stretch that does hold a
        match becomes one event (the first one's fields, the redacted text).
        """
        text = queue.text
        spans = self._matches(text)
        if final:
            count, boundary = len(queue.events), len(text)
        else:
            cut = max(0, len(text) - self._hold)
            for start, stop in spans:
                if stop > cut or stop == len(text):
                    cut = min(cut, start)
                    break
            count = boundary = 0
            for i, end in enumerate(queue.ends):
                if end > cut:
                    break
                if not any(start < end < stop for start, stop in spans):
                    count, boundary = i + 1, end
            if count == 0:
                return []
        released = queue.events[:count]
        inside = [span for span in spans if span[1] <= boundary]
        queue.events = queue.events[count:]
        queue.ends = [end - boundary for end in queue.ends[count:]]
        queue.text = text[boundary:]
        if not inside:
            return released
        merged = released[0].model_copy(
            update={"delta": self._replace(text, inside, boundary), "raw_event": None}
        )
        return [merged]

    def _chunk(self, event: BaseEvent) -> Sequence[BaseEvent]:
        assignment = self._lanes.peek(event)
        before: list[BaseEvent] = []
        if assignment.opened and assignment.item is not None:
            replaced = self._lanes.open.get(assignment.item.lane)
            if replaced is not None:
                before = self._release_items([replaced])
        assignment = self._lanes.assign(event)
        self._follow(before)
        delta: str | None = event.delta  # type: ignore[attr-defined]
        item = assignment.item
        if delta is None:
            return (*before, self._emit_chunk(event, assignment))
        if item is None:
            emit = self.redact_text(delta)
        else:
            emit = self._stream(("chunk", item.kind.__name__, item.id), delta, event, item)
        if emit == delta:
            return (*before, self._emit_chunk(event, assignment))
        if (
            emit == ""
            and not assignment.opened
            and event.metadata is None
            and event.raw_event is None
        ):
            return tuple(before)
        return (*before, self._emit_chunk(event.model_copy(update={"delta": emit}), assignment))

    def _emit_chunk(self, event: BaseEvent, assignment: ChunkAssignment) -> BaseEvent:
        return self._mirror.kept_assigned(event, assignment)

    def _result(self, event: ag.ToolCallResultEvent) -> Sequence[BaseEvent]:
        out = self._closing(event)
        content, changed = self._content_value(event.content)
        if not changed:
            return out
        return (*out[:-1], event.model_copy(update={"content": content}))

    def _state_snapshot(self, event: ag.StateSnapshotEvent) -> Sequence[BaseEvent]:
        out = self._closing(event)
        snapshot, changed = self._value(event.snapshot)
        if not changed:
            return out
        return (*out[:-1], event.model_copy(update={"snapshot": snapshot}))

    def _patch(self, operations: Sequence[Any]) -> tuple[list[Any], bool]:
        changed = False
        out = []
        for op in operations:
            if hasattr(op, "value"):
                value, c = self._value(op.value)
                if c:
                    changed = True
                    if op.op == "test":
                        continue  # see the module docstring: a redacted test may fail
                    op = op.model_copy(update={"value": value})
            out.append(op)
        return out, changed

    def _state_delta(self, event: ag.StateDeltaEvent) -> Sequence[BaseEvent]:
        out = self._closing(event)
        delta, changed = self._patch(event.delta)
        if not changed:
            return out
        return (*out[:-1], event.model_copy(update={"delta": delta}))

    def _activity_snapshot(self, event: ag.ActivitySnapshotEvent) -> Sequence[BaseEvent]:
        content, changed = self._value(event.content)
        return (event.model_copy(update={"content": content}),) if changed else (event,)

    def _activity_delta(self, event: ag.ActivityDeltaEvent) -> Sequence[BaseEvent]:
        patch, changed = self._patch(event.patch)
        return (event.model_copy(update={"patch": patch}),) if changed else (event,)

    def _messages(self, messages: Sequence[Any]) -> tuple[list[Any], bool]:
        out = []
        changed = False
        for message in messages:
            update: dict[str, Any] = {}
            content = getattr(message, "content", None)
            if content is not None:
                new, c = (
                    self._value(content) if isinstance(content, dict)
                    else self._content_value(content)
                )  # fmt: skip
                if c:
                    update["content"] = new
            if isinstance(message, ag.AssistantMessage) and message.tool_calls:
                calls = []
                calls_changed = False
                for call in message.tool_calls:
                    arguments = self.redact_text(call.function.arguments)
                    if arguments != call.function.arguments:
                        function = call.function.model_copy(update={"arguments": arguments})
                        call = call.model_copy(update={"function": function})
                        calls_changed = True
                    calls.append(call)
                if calls_changed:
                    update["tool_calls"] = calls
            if update:
                message = message.model_copy(update=update)
                changed = True
            out.append(message)
        return out, changed

    def _messages_snapshot(self, event: ag.MessagesSnapshotEvent) -> Sequence[BaseEvent]:
        out = self._closing(event)
        messages, changed = self._messages(event.messages)
        if not changed:
            return out
        return (*out[:-1], event.model_copy(update={"messages": messages}))

    def _run_started(self, event: ag.RunStartedEvent) -> Sequence[BaseEvent]:
        self._held.clear()
        self._queues.clear()
        self._mirror.reset()
        echo = event.input
        if not isinstance(echo, ag.RunAgentInput):
            return (event,)
        update: dict[str, Any] = {}
        messages, changed = self._messages(echo.messages)
        if changed:
            update["messages"] = messages
        if echo.state is not None and self._in_state:
            state, changed = self._value(echo.state)
            if changed:
                update["state"] = state
        if not update:
            return (event,)
        return (event.model_copy(update={"input": echo.model_copy(update=update)}),)

    def _run_error(self, event: ag.RunErrorEvent) -> Sequence[BaseEvent]:
        """A run that blew up: release everything held (explicit items stay open, legally)."""
        out = self._closing(event)
        extra = self._release_all()
        return (*extra, *out) if extra else out

    def _run_error_message(self, event: ag.RunErrorEvent) -> Sequence[BaseEvent]:
        out = self._run_error(event)
        message = self.redact_text(event.message)
        if message == event.message:
            return out
        return (*out[:-1], event.model_copy(update={"message": message}))

    def _subagent_error(self, event: ag.SubagentErrorEvent) -> Sequence[BaseEvent]:
        out = self._closing(event)
        message = self.redact_text(event.message)
        if message == event.message:
            return out
        return (*out[:-1], event.model_copy(update={"message": message}))

    def _custom(self, event: ag.CustomEvent) -> Sequence[BaseEvent]:
        out = self._closing(event)
        value, changed = self._value(event.value)
        if not changed:
            return out
        return (*out[:-1], event.model_copy(update={"value": value}))
