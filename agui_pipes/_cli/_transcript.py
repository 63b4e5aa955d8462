"""A readable, optionally colored transcript of an AG-UI event stream, for terminals.

Used by ``agui-pipes demo`` (and reusable for any stream): text and reasoning
are written as they stream, tool calls read like function calls, state
changes are summarised, and everything a subagent does is indented under it,
nested subagents deeper. It is a *view*, not an encoding: use ``--raw`` for
the events themselves.

Color follows the usual conventions: on when the output is a terminal, off
when it is not, and off whenever ``NO_COLOR`` is set (https://no-color.org).
"""

from __future__ import annotations

import json
import os
from typing import Any, TextIO

import ag_ui.core as ag
from ag_ui.core import BaseEvent
from pydantic import BaseModel

from ..events import attribution

__all__ = ["Transcript", "use_color"]

_CODES = {
    "dim": "2",
    "bold": "1",
    "italic": "3",
    "red": "31",
    "green": "32",
    "yellow": "33",
    "blue": "34",
    "magenta": "35",
    "cyan": "36",
}
_DEPTH_COLORS = ("blue", "magenta", "green", "yellow", "cyan")
_MAX_VALUE = 160


def use_color(stream: TextIO, choice: str = "auto") -> bool:
    """Whether to color output on ``stream`` (``choice``: auto | always | never).

    A non-empty ``NO_COLOR`` wins over everything, ``--color always`` included:
    it is the user's standing choice (https://no-color.org), a flag may come
    from a script or an alias they did not write.
    """
    if os.environ.get("NO_COLOR") or choice == "never":
        return False
    if choice == "always":
        return True
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


def _short(value: Any, limit: int = _MAX_VALUE) -> str:
    """One line of at most ``limit`` characters; JSON text is shown compact and unescaped."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            pass
    text = (
        value
        if isinstance(value, str)
        else json.dumps(value, ensure_ascii=False, separators=(", ", ": "))
    )
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


class Transcript:
    """Feed events in stream order; ``close()`` at the end to finish the last line."""

    def __init__(self, out: TextIO, *, color: bool = False) -> None:
        self._out = out
        self._color = color
        self._depth: dict[str, int] = {}
        self._names: dict[str, str] = {}
        self._parents: dict[str, str | None] = {}
        self._tools: dict[str, str] = {}
        self._roles: dict[str, str] = {}
        self._line: tuple[str, str] | None = None  # (kind, id) of the line being streamed

    # -- output helpers -----------------------------------------------------------

    def _paint(self, text: str, *styles: str) -> str:
        if not self._color or not styles:
            return text
        codes = ";".join(_CODES[s] for s in styles)
        return f"\x1b[{codes}m{text}\x1b[0m"

    def _gutter(self, tag: str | None) -> str:
        depth = self._depth.get(tag, 0) if tag is not None else 0
        return "".join(
            self._paint("│ ", _DEPTH_COLORS[level % len(_DEPTH_COLORS)]) for level in range(depth)
        )

    def _end_line(self) -> None:
        if self._line is not None:
            self._out.write("\n")
            self._line = None

    def _say(self, tag: str | None, text: str) -> None:
        self._end_line()
        self._out.write(f"{self._gutter(tag)}{text}\n")

    def _stream(self, kind: str, key: str, tag: str | None, head: str, delta: str) -> None:
        """Append ``delta`` to the line of (kind, key), starting it with ``head`` if needed."""
        if self._line != (kind, key):
            self._end_line()
            self._out.write(f"{self._gutter(tag)}{head}")
            self._line = (kind, key)
        self._out.write(delta)

    def close(self) -> None:
        self._end_line()
        self._out.flush()

    # -- events -------------------------------------------------------------------

    def feed(self, event: BaseEvent) -> None:
        tag = attribution(event)
        handler = getattr(self, f"_on_{event.type.value.lower()}", None)
        if handler is not None:
            handler(event, tag)
        else:
            self._say(tag, self._paint(f"[{event.type.value}]", "dim"))
        if self._line is None:
            self._out.flush()

    def _role_head(self, message_id: str) -> str:
        role = self._roles.get(message_id, "assistant")
        return self._paint(f"{role}: ", "bold", "cyan" if role == "assistant" else "green")

    def _on_run_started(self, event: ag.RunStartedEvent, tag: str | None) -> None:
        self._say(None, self._paint(f"● run {event.run_id} (thread {event.thread_id})", "dim"))

    def _on_run_finished(self, event: ag.RunFinishedEvent, tag: str | None) -> None:
        outcome = getattr(event.outcome, "type", None) or "success"
        line = f"● run finished: {outcome}"
        if event.result is not None:
            line += f" → {_short(event.result)}"
        self._say(None, self._paint(line, "green", "bold"))

    def _on_run_error(self, event: ag.RunErrorEvent, tag: str | None) -> None:
        code = f" [{event.code}]" if event.code else ""
        self._say(None, self._paint(f"✖ run error{code}: {event.message}", "red", "bold"))

    def _on_text_message_start(self, event: ag.TextMessageStartEvent, tag: str | None) -> None:
        self._roles[event.message_id] = str(event.role or "assistant")
        self._stream("text", event.message_id, tag, self._role_head(event.message_id), "")

    def _on_text_message_content(self, event: ag.TextMessageContentEvent, tag: str | None) -> None:
        self._stream("text", event.message_id, tag, self._role_head(event.message_id), event.delta)

    def _on_text_message_end(self, event: ag.TextMessageEndEvent, tag: str | None) -> None:
        if self._line == ("text", event.message_id):
            self._end_line()

    def _on_text_message_chunk(self, event: ag.TextMessageChunkEvent, tag: str | None) -> None:
        key = event.message_id or (self._line[1] if self._line else "chunk")
        if event.role is not None and event.message_id is not None:
            self._roles[event.message_id] = str(event.role or "assistant")
        self._stream("text", key, tag, self._role_head(key), event.delta or "")

    def _on_reasoning_start(self, event: BaseEvent, tag: str | None) -> None:
        return None

    _on_reasoning_end = _on_reasoning_start

    def _on_reasoning_message_start(self, event: Any, tag: str | None) -> None:
        self._stream("reasoning", event.message_id, tag, self._paint("thinking: ", "dim"), "")

    def _on_reasoning_message_content(self, event: Any, tag: str | None) -> None:
        self._stream(
            "reasoning",
            event.message_id,
            tag,
            self._paint("thinking: ", "dim"),
            self._paint(event.delta, "dim", "italic"),
        )

    def _on_reasoning_message_end(self, event: Any, tag: str | None) -> None:
        if self._line == ("reasoning", event.message_id):
            self._end_line()

    def _on_reasoning_message_chunk(self, event: Any, tag: str | None) -> None:
        key = event.message_id or (self._line[1] if self._line else "chunk")
        self._stream(
            "reasoning",
            key,
            tag,
            self._paint("thinking: ", "dim"),
            self._paint(event.delta or "", "dim", "italic"),
        )

    def _on_reasoning_encrypted_value(self, event: Any, tag: str | None) -> None:
        self._say(tag, self._paint("thinking: (encrypted)", "dim"))

    def _tool_head(self, call_id: str) -> str:
        name = self._tools.get(call_id, call_id)
        return self._paint("→ ", "yellow") + self._paint(name, "bold", "yellow") + "("

    def _on_tool_call_start(self, event: ag.ToolCallStartEvent, tag: str | None) -> None:
        self._tools[event.tool_call_id] = event.tool_call_name
        self._stream("tool", event.tool_call_id, tag, self._tool_head(event.tool_call_id), "")

    def _on_tool_call_args(self, event: ag.ToolCallArgsEvent, tag: str | None) -> None:
        self._stream(
            "tool", event.tool_call_id, tag, self._tool_head(event.tool_call_id), event.delta
        )

    def _on_tool_call_end(self, event: ag.ToolCallEndEvent, tag: str | None) -> None:
        if self._line == ("tool", event.tool_call_id):
            self._out.write(")")
            self._end_line()

    def _on_tool_call_chunk(self, event: ag.ToolCallChunkEvent, tag: str | None) -> None:
        key = event.tool_call_id or (self._line[1] if self._line else "chunk")
        if event.tool_call_name and event.tool_call_id:
            self._tools[event.tool_call_id] = event.tool_call_name
        self._stream("tool", key, tag, self._tool_head(key), event.delta or "")

    def _on_tool_call_result(self, event: ag.ToolCallResultEvent, tag: str | None) -> None:
        name = self._tools.get(event.tool_call_id, event.tool_call_id)
        self._say(tag, self._paint(f"← {name}: ", "yellow") + _short(event.content))

    def _on_state_snapshot(self, event: ag.StateSnapshotEvent, tag: str | None) -> None:
        self._say(tag, self._paint("state = ", "magenta") + _short(event.snapshot))

    def _on_state_delta(self, event: ag.StateDeltaEvent, tag: str | None) -> None:
        parts = []
        for op in event.delta:
            fields = op.model_dump(exclude_unset=True) if isinstance(op, BaseModel) else op
            if isinstance(fields, dict):
                value = f" = {_short(fields['value'], 60)}" if "value" in fields else ""
                parts.append(f"{fields.get('op')} {fields.get('path')}{value}")
        self._say(tag, self._paint("state ", "magenta") + "; ".join(parts))

    def _on_messages_snapshot(self, event: ag.MessagesSnapshotEvent, tag: str | None) -> None:
        self._say(tag, self._paint(f"messages snapshot: {len(event.messages)} messages", "dim"))

    def _on_step_started(self, event: ag.StepStartedEvent, tag: str | None) -> None:
        self._say(tag, self._paint(f"▸ step {event.step_name}", "blue"))

    def _on_step_finished(self, event: ag.StepFinishedEvent, tag: str | None) -> None:
        self._say(tag, self._paint(f"▪ step {event.step_name} done", "dim"))

    def _on_subagent_started(self, event: ag.SubagentStartedEvent, tag: str | None) -> None:
        parent = event.parent_subagent_run_id
        self._depth[event.subagent_run_id] = self._depth.get(parent, 0) + 1 if parent else 1
        self._names[event.subagent_run_id] = event.name
        self._parents[event.subagent_run_id] = parent
        self._say(
            parent,
            self._paint(f"┌ subagent {event.name}", "bold", "blue")
            + self._paint(f" ({event.subagent_run_id})", "dim"),
        )

    def _subagent_end(self, sub_id: str, text: str, *styles: str) -> None:
        self._say(self._parents.get(sub_id), self._paint(text, *styles))

    def _on_subagent_finished(self, event: ag.SubagentFinishedEvent, tag: str | None) -> None:
        name = self._names.get(event.subagent_run_id, event.subagent_run_id)
        result = getattr(event, "result", None)
        suffix = f" → {_short(result)}" if result is not None else ""
        self._subagent_end(event.subagent_run_id, f"└ {name} finished{suffix}", "blue")

    def _on_subagent_error(self, event: ag.SubagentErrorEvent, tag: str | None) -> None:
        name = self._names.get(event.subagent_run_id, event.subagent_run_id)
        self._subagent_end(event.subagent_run_id, f"└ {name} failed: {event.message}", "red")

    def _on_raw(self, event: ag.RawEvent, tag: str | None) -> None:
        source = f" from {event.source}" if event.source else ""
        self._say(tag, self._paint(f"raw{source}: {_short(event.event, 80)}", "dim"))

    def _on_custom(self, event: ag.CustomEvent, tag: str | None) -> None:
        self._say(tag, self._paint(f"custom {event.name}: {_short(event.value, 80)}", "dim"))

    def _on_activity_snapshot(self, event: Any, tag: str | None) -> None:
        self._say(
            tag, self._paint(f"activity {event.activity_type}: {_short(event.content)}", "dim")
        )

    def _on_activity_delta(self, event: Any, tag: str | None) -> None:
        self._say(tag, self._paint(f"activity {event.activity_type} updated", "dim"))
