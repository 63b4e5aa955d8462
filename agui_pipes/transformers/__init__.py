"""Built-in stages, one module each, listed once in ``_stagekit/builtins.py``.

How to add one: docs/writing-transformers.md ("Adding a built-in stage").
"""

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    # For type checkers only (``X as X`` re-exports); at run time the names come
    # lazily from the list of built-ins, and a test keeps the two equal.
    from .coalesce_deltas import CoalesceDeltas as CoalesceDeltas
    from .compact import Compact as Compact
    from .compat import Compat as Compat
    from .drop_events import DropEvents as DropEvents
    from .drop_events import KeepEvents as KeepEvents
    from .expand_chunks import ExpandChunks as ExpandChunks
    from .filter_tool_calls import FilterToolCalls as FilterToolCalls
    from .interrupt_bridge import InterruptBridge as InterruptBridge
    from .redact import Redact as Redact
    from .repair import Repair as Repair
    from .repair import RepairFix as RepairFix
    from .repair import RepairLimitExceeded as RepairLimitExceeded
    from .repair import RepairReport as RepairReport
    from .state_diff import StateDiff as StateDiff
    from .state_filter import StateFilter as StateFilter
    from .strip_raw_events import StripRawEvents as StripRawEvents
    from .subagent_visibility import SubagentVisibility as SubagentVisibility
    from .timestamp import Timestamp as Timestamp
    from .tool_result_to_state import ToolResultToState as ToolResultToState
    from .trace import OpenTelemetry as OpenTelemetry
    from .verify import Verify as Verify
else:
    from .._lazy import attach
    from .._stagekit.builtins import transformer_exports

    __getattr__, __dir__ = attach(__name__, transformer_exports())
    __all__ = sorted(transformer_exports())
    del attach, transformer_exports
