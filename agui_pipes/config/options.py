"""The options model of every built-in stage, as written in a chain file.

One pydantic model per YAML ``type``. The model is the single source of truth
for a stage's declarative surface: the loader validates with it, ``chain_schema()``
turns it into JSON Schema, ``agui-pipes list`` and the generated
docs/yaml-reference.md render its fields. So a field's ``description`` is
user documentation, and the first line of a model's docstring is the stage's
one-line summary everywhere.

Field names equal the keyword arguments of the stage's constructor (see
docs/architecture.md), which is what lets the registry build a stage with
``Stage(**options)`` and nothing in between.

Validation that spans fields (exactly one of ``allow``/``deny``; ``pointer``
only with ``mode: at``) lives here rather than in the stage so the mistake is
reported against the line of the chain file, before anything runs.
"""

# No ``from __future__ import annotations`` here: pydantic would evaluate every field's
# annotation from its string when each model is defined (an ``eval`` per field), which was
# a seventh of this module's import, paid by every `agui-pipes run` whose chain names a
# built-in. The four validators that return their own model quote it.
import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic.config import JsonDict

from .._foundation.limits import Limits
from .._lazy import public_dir
from ._no_options import NoOptions

__all__ = [
    "CoalesceDeltasOptions",
    "CompactOptions",
    "CompatOptions",
    "DropEventsOptions",
    "EventFamily",
    "ExpandChunksOptions",
    "FilterToolCallsOptions",
    "InterruptBridgeOptions",
    "KeepEventsOptions",
    "NoOptions",
    "OpenTelemetryOptions",
    "RedactOptions",
    "RepairOptions",
    "StateDiffOptions",
    "StateFilterOptions",
    "StripRawEventsOptions",
    "SubagentVisibilityOptions",
    "TimestampOptions",
    "ToolResultToStateOptions",
    "VerifyOptions",
    "is_json_pointer",
]
__dir__ = public_dir(__all__)


class _Options(BaseModel):
    # extra="forbid" is what turns a typo into "unknown option" instead of a
    # silently ignored key; frozen keeps one validated instance shareable
    # between the chains a factory builds. defer_build: a chain validates the
    # options of the few stages it names, so the validators of the others are
    # not built on every start of the CLI (half this module's import time).
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)


def _example(example: JsonDict) -> ConfigDict:
    """Model config carrying one example (shown in the schema, the docs and `list`)."""
    return ConfigDict(
        extra="forbid", frozen=True, defer_build=True, json_schema_extra={"examples": [example]}
    )


def is_json_pointer(text: str) -> bool:
    """True when ``text`` is an RFC 6901 JSON Pointer (``""`` or ``/a/b~1c``)."""
    if text == "":
        return True
    if not text.startswith("/"):
        return False
    return re.search(r"~(?![01])", text) is None


def _limits_field() -> Limits | None:
    """The ``limits`` option of the stages that follow the state (one wording for both)."""
    default: Limits | None = Field(
        None,
        description=(
            "Bounds on the state the stage follows: `max_nodes` (values), `max_bytes` "
            "(compact JSON), `max_depth` (nesting); what would cross them is skipped as a "
            "consumer with those limits skips it. Unset: the server's limits, else "
            "1000000 / 64 MiB / 1024."
        ),
    )
    return default


def _non_empty_names(names: list[str], what: str) -> list[str]:
    if not names:
        raise ValueError(f"give at least one {what}")
    for i, name in enumerate(names):
        if not name:
            raise ValueError(f"{what} #{i + 1} is empty")
    return names


class ExpandChunksOptions(NoOptions):
    """Rewrite *_CHUNK shorthand events into explicit START / CONTENT / END events.

    Put it first in a chain when the source may send chunks, so every later
    stage sees one shape.
    """


class RepairOptions(_Options):
    """Rewrite a producer's broken stream into a valid one, recording every change.

    Each fix (an END moved or synthesized, a second terminal dropped, a state
    operation rewritten, ...) is listed in the stage's report and logged;
    past `max_fixes` the stream is rejected instead. See docs/repair.md.
    """

    model_config = _example({"max_fixes": 20, "emit": True})

    max_fixes: int = Field(
        100,
        ge=0,
        description=(
            "Reject the stream (rule `repair-limit`) once it needs more fixes than this "
            "(in Python, `None` means no limit)."
        ),
    )
    emit: bool = Field(
        False,
        description="Also send one CUSTOM event `agui_pipes.repair` per fix, inside its run.",
    )
    report_limit: int = Field(
        1000, ge=0, description="How many fixes the report lists (all are counted)."
    )
    thread_id: str | None = Field(
        None,
        description="Thread id of a RUN_STARTED that must be synthesized (default: the "
        "first event's, else generated).",
    )
    run_id: str | None = Field(
        None,
        description="Run id of a RUN_STARTED that must be synthesized (default: the first "
        "event's, else generated).",
    )


class VerifyOptions(_Options):
    """Check the stream against the AG-UI ordering rules and act on a violation.

    `consumer` accepts every stream a 1.0 client accepts; `producer` adds the
    stricter rules a well-behaved server keeps (known tool-call ids, results
    after their call ended, nothing open at RUN_FINISHED).
    """

    model_config = _example({"profile": "producer", "on_violation": "run_error"})

    profile: Literal["consumer", "producer"] = Field(
        "consumer", description="Which rule set to enforce."
    )
    on_violation: Literal["raise", "run_error", "warn"] = Field(
        "raise",
        description=(
            "`raise` rejects the stream (exit 1 in the CLI), `run_error` ends it with a "
            "RUN_ERROR event, `warn` logs and passes the event on."
        ),
    )
    allow_truncated: bool = Field(
        False,
        description="Accept a stream that stops without RUN_FINISHED / RUN_ERROR.",
    )
    debug: bool = Field(
        False,
        description="End violation messages with a dump of everything still open (slower).",
    )
    enabled: bool = Field(
        True,
        description=(
            "`false` turns the stage into a pass-through, e.g. `enabled: ${VERIFY:-true}`."
        ),
    )


class FilterToolCallsOptions(_Options):
    """Remove tool calls by name, leaving no trace of a removed call anywhere in the stream.

    Give exactly one of `allow` (only these tools pass) or `deny` (every tool but
    these passes). A removed call's arguments, end, result and mentions in
    snapshots go with it.
    """

    model_config = _example({"deny": ["internal_*", "debug_dump"]})

    allow: list[str] | None = Field(
        None,
        description="Tool names or glob patterns (`search_*`) that pass; all other calls go.",
    )
    deny: list[str] | None = Field(
        None,
        description="Tool names or glob patterns (`internal_*`) that are removed; all others pass.",
    )
    state_messages: list[str] | None = Field(
        None,
        description=(
            "JSON Pointers to message lists kept inside the state (`/messages`), in the "
            "AG-UI/OpenAI or the LangChain shape: removed calls and their results are "
            "scrubbed from them in STATE_SNAPSHOT, STATE_DELTA and the RUN_STARTED echo."
        ),
    )

    @field_validator("allow", "deny")
    @classmethod
    def _names(cls, names: list[str] | None) -> list[str] | None:
        return None if names is None else _non_empty_names(names, "tool name")

    @field_validator("state_messages")
    @classmethod
    def _state_pointers(cls, pointers: list[str] | None) -> list[str] | None:
        if pointers is None:
            return None
        if not pointers:
            raise ValueError("give at least one JSON Pointer such as `/messages`, or omit it")
        for i, pointer in enumerate(pointers):
            if not is_json_pointer(pointer):
                raise ValueError(
                    f"entry #{i + 1} {pointer!r} is not a JSON Pointer: it must be empty or "
                    "start with `/`, and `~` may only appear as `~0` or `~1`, e.g. `/messages`"
                )
        return pointers

    @model_validator(mode="after")
    def _exactly_one(self) -> "FilterToolCallsOptions":
        if (self.allow is None) == (self.deny is None):
            both = "both are" if self.allow is not None else "neither is"
            raise ValueError(f"give exactly one of `allow` or `deny` ({both} set)")
        return self


class ToolResultToStateOptions(_Options):
    """Turn one tool's results into state updates: a snapshot, a JSON Patch, or a value at a path.

    A result that does not parse (or is not a patch in `delta` mode) passes
    through untouched and no state event is made.
    """

    model_config = _example({"tool": "search", "mode": "at", "pointer": "/search/results"})

    tool: str = Field(..., min_length=1, description="Name of the tool whose results become state.")
    mode: Literal["snapshot", "delta", "at"] = Field(
        "snapshot",
        description=(
            "`snapshot`: the result JSON replaces the state; `delta`: the result is an "
            "RFC 6902 patch; `at`: the result JSON is set at `pointer` inside the state."
        ),
    )
    pointer: str | None = Field(
        None,
        description="RFC 6901 JSON Pointer (e.g. `/search/results`); required with `mode: at`.",
    )
    replace_result: bool = Field(
        False,
        description=(
            "Drop the TOOL_CALL_RESULT itself (default: keep it, followed by the state event)."
        ),
    )
    limits: Limits | None = _limits_field()

    @field_validator("pointer")
    @classmethod
    def _pointer(cls, pointer: str | None) -> str | None:
        if pointer is not None and not is_json_pointer(pointer):
            raise ValueError(
                f"{pointer!r} is not a JSON Pointer: it must be empty or start with `/`, "
                "and `~` may only appear as `~0` (for ~) or `~1` (for /), e.g. `/items/0`"
            )
        return pointer

    @model_validator(mode="after")
    def _pointer_with_at(self) -> "ToolResultToStateOptions":
        if self.mode == "at" and self.pointer is None:
            raise ValueError("`mode: at` needs a `pointer` (e.g. `pointer: /results`)")
        if self.mode != "at" and self.pointer is not None:
            raise ValueError(f"`pointer` only applies to `mode: at` (mode is `{self.mode}`)")
        return self


class SubagentVisibilityOptions(_Options):
    """Choose how subagent activity reaches the client: attributed, inlined, or hidden.

    `inline` produces the pre-subagent shape for clients that cannot decode
    SUBAGENT_* events; `hidden` keeps only the parent's own events (shared
    state always passes).
    """

    model_config = _example({"mode": "inline"})

    mode: Literal["attributed", "inline", "hidden"] = Field(
        "attributed",
        description=(
            "`attributed`: as emitted; `inline`: lifecycle events dropped and tags "
            "stripped; `hidden`: only the parent's events."
        ),
    )


EventFamily = Literal[
    "text",
    "tool_call",
    "reasoning",
    "state",
    "messages_snapshot",
    "activity",
    "step",
    "raw",
    "custom",
    "subagent",
]
"""The event families of DropEvents / KeepEvents (a test keeps this equal to the stage's)."""


class _FamiliesOptions(_Options):
    families: list[EventFamily] = Field(
        ...,
        description=(
            "Event families; the run lifecycle (RUN_STARTED / RUN_FINISHED / RUN_ERROR) is "
            "not one and always passes."
        ),
    )

    @field_validator("families")
    @classmethod
    def _families(cls, families: list[EventFamily]) -> list[EventFamily]:
        if not families:
            raise ValueError("give at least one event family")
        return families


class DropEventsOptions(_FamiliesOptions):
    """Drop every event of the given families (a dropped entity's continuations go with it).

    Where a dropped family also lives inside MESSAGES_SNAPSHOT or the RUN_STARTED
    input echo (reasoning, activity and tool messages), it is removed there too.
    """

    model_config = _example({"families": ["reasoning", "activity"]})


class KeepEventsOptions(_FamiliesOptions):
    """Keep only the run lifecycle and the given families; drop everything else."""

    model_config = _example({"families": ["text", "tool_call", "state"]})


class StripRawEventsOptions(NoOptions):
    """Drop RAW events and the `rawEvent` payload of every other event.

    Both carry provider-native payloads for debugging; on the way to a browser
    they cost bandwidth and can leak prompts, keys or internal ids.
    """


class CoalesceDeltasOptions(_Options):
    """Merge consecutive content deltas of the same message into fewer, larger events.

    Text, reasoning and tool-argument deltas (and their chunk forms) merge only
    with the delta right before them, so the client assembles the same messages
    from fewer events; the cost is a delta held until the next event arrives.
    """

    model_config = _example({"max_chars": 200})

    max_chars: int | None = Field(
        None,
        ge=1,
        description=(
            "Emit a merged delta once it reaches this many characters (no limit when unset)."
        ),
    )


class CompactOptions(_Options):
    """Merge each closed message's or tool call's deltas into one, and each run of state events.

    The consumer folds the same messages and state from far fewer events: for
    logs, history and replays. Deltas are held until their item ends, so keep
    it off live streams a user watches.
    """

    limits: Limits | None = _limits_field()


class RedactOptions(_Options):
    """Replace text matching regular expressions in message content, tool arguments and results.

    Streamed text is buffered per item so a secret split across deltas still
    matches; tool results, state, activity content and messages in snapshots
    are redacted whole, and by option error messages and CUSTOM values. RAW
    payloads are not inspected (use strip_raw_events).
    """

    model_config = _example(
        {"patterns": ["sk-[A-Za-z0-9]{20,}", "\\b\\d{16}\\b"], "replacement": "[secret]"}
    )

    patterns: list[str] = Field(
        ..., description="Python regular expressions; every match is replaced."
    )
    replacement: str = Field(
        "[REDACTED]", description="What a match is replaced with (literal text)."
    )
    hold_back: int = Field(
        64,
        ge=0,
        description=(
            "Characters of streamed text held back so a secret split across deltas is "
            "still caught (the latency cost)."
        ),
    )
    state: bool = Field(
        True,
        description=(
            "Redact every string in STATE_SNAPSHOT / STATE_DELTA values and the RUN_STARTED "
            "state echo (a patch `test` whose value holds a match is dropped)."
        ),
    )
    errors: bool = Field(
        False, description="Also redact the `message` of RUN_ERROR and SUBAGENT_ERROR."
    )
    custom: bool = Field(False, description="Also redact every string inside CUSTOM event values.")

    @field_validator("patterns")
    @classmethod
    def _patterns(cls, patterns: list[str]) -> list[str]:
        _non_empty_names(patterns, "pattern")
        for i, pattern in enumerate(patterns):
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ValueError(
                    f"pattern #{i + 1} {pattern!r} is not a valid regular expression: {exc}"
                ) from None
        return patterns


def _pointer_list(pointers: list[str] | None, what: str) -> list[str] | None:
    if pointers is None:
        return None
    if not pointers:
        raise ValueError(f"give at least one {what} pointer (or leave the option out)")
    for i, pointer in enumerate(pointers):
        if not is_json_pointer(pointer):
            raise ValueError(
                f"{what} pointer #{i + 1} {pointer!r} is not a JSON Pointer: it must start "
                "with `/` (e.g. `/config/secret`, `/messages/*/content`), and `~` may only "
                "appear as `~0` (for ~) or `~1` (for /)"
            )
    return pointers


class StateFilterOptions(_Options):
    """Keep only the allowed parts of the state, by JSON Pointer (`*` matches any key or index).

    With `allow`, only those subtrees (and the objects and arrays on the way to
    them) reach the client; `deny` removes subtrees (inside what `allow` keeps,
    when both are given). Snapshots, deltas and the RUN_STARTED state echo are
    filtered alike, so the client folds exactly the pruned state.
    """

    model_config = _example({"deny": ["/messages", "/config/api_key"]})

    allow: list[str] | None = Field(
        None,
        description=(
            "JSON Pointers of the subtrees that pass (`/todos`, `/messages/*/content`); "
            "everything else goes."
        ),
    )
    deny: list[str] | None = Field(
        None,
        description="JSON Pointers of the subtrees that are removed (`/messages/*/secret`).",
    )
    activities: bool = Field(
        False,
        description=(
            "Scope the content of activity messages (ACTIVITY_SNAPSHOT / ACTIVITY_DELTA) "
            "with the same pointers."
        ),
    )

    @field_validator("allow")
    @classmethod
    def _allow(cls, pointers: list[str] | None) -> list[str] | None:
        return _pointer_list(pointers, "allow")

    @field_validator("deny")
    @classmethod
    def _deny(cls, pointers: list[str] | None) -> list[str] | None:
        pointers = _pointer_list(pointers, "deny")
        if pointers is not None and "" in pointers:
            raise ValueError(
                "the empty pointer denies the whole state; to send no state, drop the "
                "`state` family with drop_events instead"
            )
        return pointers

    @model_validator(mode="after")
    def _one_list(self) -> "StateFilterOptions":
        if self.allow is None and self.deny is None:
            raise ValueError("give `allow` or `deny` (or both): lists of JSON Pointers")
        return self


class StateDiffOptions(_Options):
    """Send later state snapshots as JSON Patch deltas when that is smaller.

    Deltas are computed against the state the client holds and checked to
    reproduce the snapshot exactly; the baseline resets at every RUN_STARTED.
    """

    limits: Limits | None = _limits_field()


class TimestampOptions(NoOptions):
    """Stamp every event that has no `timestamp` with the current time (milliseconds).

    An event that already carries a timestamp keeps it.
    """


class OpenTelemetryOptions(_Options):
    """Trace every run as OpenTelemetry GenAI spans and metrics (needs the `otel` extra).

    A run is an `invoke_agent` span, a subagent a child `invoke_agent` span, a
    tool call an `execute_tool` span, a step a `step` span; messages and
    reasoning are span events; `usage` becomes `gen_ai.usage.*` attributes.
    Spans go to the globally configured tracer provider (`agui-pipes serve
    --otel` sets one up from the `OTEL_*` variables). Put it after the stages
    that hide things from the client: it traces what it sees. Without
    `capture_content` no free text of the stream leaves in a span: no tool
    arguments or results, step names, subagent descriptions or error messages.
    """

    model_config = _example({"agent_name": "trip_planner", "roll_up_usage": True})

    agent_name: str | None = Field(
        None,
        min_length=1,
        description=(
            "Name of the top-level agent: the run span is `invoke_agent <agent_name>` and "
            "carries `gen_ai.agent.name` (the stream does not name it)."
        ),
    )
    capture_content: bool = Field(
        False,
        description=(
            "Record tool-call arguments and results (`gen_ai.tool.call.arguments` / "
            "`.result`). Off by default: they may hold personal data or secrets."
        ),
    )
    delta_stats: bool = Field(
        False,
        description=(
            "See every delta: message lengths and delta counts on the span events, deltas in "
            "the events metric. Costs the relay's bypass of open messages' deltas."
        ),
    )
    roll_up_usage: bool = Field(
        False,
        description=(
            "Add the usage subagents report in SUBAGENT_FINISHED / SUBAGENT_ERROR "
            "`metadata.usage` into the run's RUN_FINISHED / RUN_ERROR `usage` (per provider "
            "and model)."
        ),
    )
    metrics: bool = Field(True, description="Record metrics too (false: spans only).")
    max_attribute_chars: int = Field(
        4096,
        ge=1,
        description=(
            "The longest string a span name, span attribute or span-event attribute carries; "
            "longer ones are cut (tool arguments and results with `capture_content`)."
        ),
    )
    max_spans_per_run: int = Field(
        1024,
        ge=1,
        description=(
            "Spans one run may open; past it no span is created and the run span counts "
            "them in `agui.spans.dropped`."
        ),
    )


class CompatOptions(_Options):
    """Translate between AG-UI 1.0 and a peer of an older protocol version.

    `up` (the default) is the consumer side: a pre-1.0 producer's THINKING_*
    events and binary content parts become 1.0, and for a producer at or below
    0.0.57 the subagent material is dropped with a warning. `down` serves an
    older client: the 1.0 stream is rewritten per era (subagents dropped for
    0.0.57, reasoning spelled THINKING_* for 0.0.45, content flattened for
    0.0.39). See docs/compat.md.
    """

    model_config = _example({"direction": "down", "peer": "0.0.45"})

    direction: Literal["up", "down"] = Field(
        "up",
        description=(
            "`up`: translate an older producer's stream into 1.0 (put it first). `down`: "
            "rewrite a 1.0 stream for an older client (put it last)."
        ),
    )
    peer: str | None = Field(
        None,
        description=(
            "The other party's protocol version, e.g. `0.0.45` or `1.0`: the producer's for "
            "`up`, the client's for `down`. Omitted: a current (1.0) peer."
        ),
    )

    @field_validator("peer")
    @classmethod
    def _peer(cls, peer: str | None) -> str | None:
        if peer is not None and re.fullmatch(r"\d+\.\d+(\.\d+)?", peer) is None:
            raise ValueError(
                f"peer must be a protocol version such as '0.0.45' or '1.0', got {peer!r}"
            )
        return peer


class InterruptBridgeOptions(_Options):
    """Translate an upstream's interrupt dialect to AG-UI 1.0 interrupts and back (gateway).

    `langgraph`: the legacy `CUSTOM on_interrupt` events of ag-ui-langgraph become the
    run's interrupt outcome, and the next run's `resume[]` goes upstream as
    `forwardedProps.command.resume`. `adk`: tool calls a run leaves without a result
    (ag-ui-adk stopping on frontend tools) become interrupts whose ids are the call
    ids, and `resume[]` goes upstream as one tool-result message per call. A run
    that already ends with an outcome passes unchanged. The request half runs in a
    gateway (`agui-pipes serve --upstream URL --config chain.yaml`) and in front of an
    in-process producer (`agui-pipes serve --agent module:attr --config chain.yaml`); put the stage
    before `strip_raw_events` (LangGraph's interrupt ids travel in `rawEvent`). See
    docs/interrupts.md.
    """

    model_config = _example({"dialect": "adk", "tools": ["approve_transfer"]})

    dialect: Literal["langgraph", "adk"] = Field(
        "langgraph", description="The upstream's interrupt dialect: `langgraph` or `adk`."
    )
    tools: list[str] | None = Field(
        None,
        description=(
            "`adk` only: the tools whose unanswered calls are interrupts. Unset: every "
            "tool call the run leaves without a result."
        ),
    )
    reason: str = Field(
        "tool_call",
        min_length=1,
        description="`adk` only: the `reason` of a pending tool call's interrupt.",
    )
    response_schema: dict[str, object] | None = Field(
        None,
        description=(
            "`adk` only: the `responseSchema` (JSON Schema) of a pending tool call's "
            "interrupt, which the thread's interrupt check validates answers against."
        ),
    )
    expires_in: float | None = Field(
        None,
        gt=0,
        description=(
            "`adk` only: seconds from the run's end until a pending tool call's interrupt "
            "expires (its `expiresAt`). Unset: it does not expire."
        ),
    )

    @model_validator(mode="after")
    def _adk_only(self) -> "InterruptBridgeOptions":
        if self.dialect == "langgraph":
            given = [
                name
                for name in ("tools", "response_schema", "expires_in")
                if getattr(self, name) is not None
            ]
            if given:
                raise ValueError(
                    f"{', '.join(given)} describe pending tool calls and apply to dialect "
                    "'adk' only; remove them, or set dialect: adk"
                )
        return self
