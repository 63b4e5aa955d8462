"""Built-in stages, one module each (see docs/architecture.md for the YAML names)."""

from .expand_chunks import ExpandChunks
from .filter_tool_calls import FilterToolCalls
from .verify import Verify

__all__ = [
    "ExpandChunks",
    "FilterToolCalls",
    "Verify",
]
