"""The built-in stages, listed once: what every other list of them is derived from.

``agui_pipes.transformers`` builds its lazy exports and ``__all__`` from this
list, the config registry its YAML ``type`` names (in this order, which is the
documentation order), the generated docs/yaml-reference.md follows the
registry, and the shared property test of the optimisation hooks runs every
entry. Adding a built-in stage is: its module in ``agui_pipes/transformers/``,
its options model in ``agui_pipes/config/options.py`` when it takes options,
and one entry here (docs/writing-transformers.md, "Adding a built-in stage").

Strings only, so reading the list imports no stage (and costs next to nothing).
"""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["BUILTINS", "Builtin", "transformer_exports"]


class Builtin(NamedTuple):
    """One built-in stage: its YAML name and where its class and options model live."""

    name: str
    """The YAML ``type`` (snake_case)."""
    stage: str
    """The class (or factory) exported by ``agui_pipes.transformers``."""
    module: str
    """The module in ``agui_pipes/transformers/`` that defines it."""
    options: str
    """Its options model in ``agui_pipes.config.options``."""
    exports: tuple[str, ...] = ()
    """Other public names of ``agui_pipes.transformers`` the module defines."""


BUILTINS: tuple[Builtin, ...] = (
    Builtin("expand_chunks", "ExpandChunks", "expand_chunks", "ExpandChunksOptions"),
    Builtin("verify", "Verify", "verify", "VerifyOptions"),
    Builtin(
        "repair",
        "Repair",
        "repair",
        "RepairOptions",
        exports=("RepairFix", "RepairLimitExceeded", "RepairReport"),
    ),
    Builtin("filter_tool_calls", "FilterToolCalls", "filter_tool_calls", "FilterToolCallsOptions"),
    Builtin(
        "tool_result_to_state",
        "ToolResultToState",
        "tool_result_to_state",
        "ToolResultToStateOptions",
    ),
    Builtin(
        "subagent_visibility",
        "SubagentVisibility",
        "subagent_visibility",
        "SubagentVisibilityOptions",
    ),
    Builtin("drop_events", "DropEvents", "drop_events", "DropEventsOptions"),
    Builtin("keep_events", "KeepEvents", "drop_events", "KeepEventsOptions"),
    Builtin("strip_raw_events", "StripRawEvents", "strip_raw_events", "StripRawEventsOptions"),
    Builtin("coalesce_deltas", "CoalesceDeltas", "coalesce_deltas", "CoalesceDeltasOptions"),
    Builtin("compact", "Compact", "compact", "CompactOptions"),
    Builtin("redact", "Redact", "redact", "RedactOptions"),
    Builtin("state_filter", "StateFilter", "state_filter", "StateFilterOptions"),
    Builtin("state_diff", "StateDiff", "state_diff", "StateDiffOptions"),
    Builtin("timestamp", "Timestamp", "timestamp", "TimestampOptions"),
    Builtin("opentelemetry", "OpenTelemetry", "trace", "OpenTelemetryOptions"),
    Builtin("compat", "Compat", "compat", "CompatOptions"),
    Builtin("interrupt_bridge", "InterruptBridge", "interrupt_bridge", "InterruptBridgeOptions"),
)


def transformer_exports() -> dict[str, str]:
    """``agui_pipes.transformers``' public names -> the module (relative) defining each."""
    return {
        name: f".{builtin.module}"
        for builtin in BUILTINS
        for name in (builtin.stage, *builtin.exports)
    }
