"""Rename tool calls on their way to the client (a worked agui_pipes plugin).

A backend's tool names are often implementation details (``pg_search_v2``)
that a client UI should not depend on. ``RenameTools`` maps them to stable
public names, leaving everything else untouched.

Declared in a chain file once this package is installed::

    transformers:
      - type: rename_tools
        names: {pg_search_v2: search, http_fetch_internal: fetch}
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from ag_ui.core import BaseEvent, ToolCallChunkEvent, ToolCallStartEvent
from pydantic import BaseModel, ConfigDict, Field, field_validator

from agui_pipes import StreamTransformer

__all__ = ["RenameTools"]


class RenameToolsOptions(BaseModel):
    """Options of `rename_tools`, as written in a chain file."""

    # extra="forbid" turns a misspelt option into a pointed config error.
    model_config = ConfigDict(extra="forbid", frozen=True)

    names: dict[str, str] = Field(
        ..., description="Tool name as the agent emits it -> name the client sees."
    )

    @field_validator("names")
    @classmethod
    def _non_empty(cls, names: dict[str, str]) -> dict[str, str]:
        if not names:
            raise ValueError("give at least one `old: new` pair")
        for old, new in names.items():
            if not new:
                raise ValueError(f"the new name for `{old}` is empty")
        return names


class RenameTools(StreamTransformer):
    """Rename tool calls: TOOL_CALL_START and named TOOL_CALL_CHUNK events get the public name."""

    Options = RenameToolsOptions
    """The plugin protocol: the registry validates a chain file's options with this model."""

    def __init__(self, names: Mapping[str, str]) -> None:
        self._names = dict(names)

    def transform(self, event: BaseEvent) -> Iterable[BaseEvent]:
        # Stateless: ids never change, only the name on the events that carry one.
        if isinstance(event, ToolCallStartEvent | ToolCallChunkEvent):
            new = self._names.get(event.tool_call_name or "")
            if new is not None:
                return (event.model_copy(update={"tool_call_name": new}),)
        return (event,)
