"""Built-in stages, one module each (see docs/architecture.md for the YAML names)."""

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .coalesce_deltas import CoalesceDeltas
    from .compact import Compact
    from .drop_events import DropEvents, KeepEvents
    from .expand_chunks import ExpandChunks
    from .filter_tool_calls import FilterToolCalls
    from .redact import Redact
    from .repair import Repair, RepairFix, RepairLimitExceeded, RepairReport
    from .state_diff import StateDiff
    from .state_filter import StateFilter
    from .strip_raw_events import StripRawEvents
    from .subagent_visibility import SubagentVisibility
    from .timestamp import Timestamp
    from .tool_result_to_state import ToolResultToState
    from .trace import Trace
    from .verify import Verify
else:
    from .._lazy import attach

    __getattr__, __dir__ = attach(
        __name__,
        {
            "CoalesceDeltas": ".coalesce_deltas",
            "Compact": ".compact",
            "DropEvents": ".drop_events",
            "KeepEvents": ".drop_events",
            "ExpandChunks": ".expand_chunks",
            "FilterToolCalls": ".filter_tool_calls",
            "Redact": ".redact",
            "Repair": ".repair",
            "RepairFix": ".repair",
            "RepairLimitExceeded": ".repair",
            "RepairReport": ".repair",
            "StateDiff": ".state_diff",
            "StateFilter": ".state_filter",
            "StripRawEvents": ".strip_raw_events",
            "SubagentVisibility": ".subagent_visibility",
            "Timestamp": ".timestamp",
            "ToolResultToState": ".tool_result_to_state",
            "Trace": ".trace",
            "Verify": ".verify",
        },
    )

__all__ = [
    "CoalesceDeltas",
    "Compact",
    "DropEvents",
    "ExpandChunks",
    "FilterToolCalls",
    "KeepEvents",
    "Redact",
    "Repair",
    "RepairFix",
    "RepairLimitExceeded",
    "RepairReport",
    "StateDiff",
    "StateFilter",
    "StripRawEvents",
    "SubagentVisibility",
    "Timestamp",
    "ToolResultToState",
    "Trace",
    "Verify",
]
