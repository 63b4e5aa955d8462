"""Which integration serves a framework's object: the registry ``serve --agent`` reads.

Each entry names an integration module, the top-level packages whose objects
it may serve and, for a usage message, what it accepts. An object is offered
to an integration only when a class in its MRO comes from one of those
packages, so looking one up imports no framework but the object's own.

The contract an integration module keeps (``agui_pipes.integrations.<name>``):
a function ``producer_for(obj) -> Producer | None`` — the producer serving
``obj``, or None when ``obj`` is not a kind it serves. A new integration is one
module with that function and one entry in ``INTEGRATIONS``.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

if TYPE_CHECKING:
    from ..server._producer import Producer

__all__ = ["INTEGRATIONS", "Integration", "accepted_kinds", "producer_for"]


@dataclass(frozen=True)
class Integration:
    """One framework's integration, as the registry knows it."""

    name: str
    """The framework, as docs/integrations.md names it ("langgraph")."""
    module: str
    """The integration module, which defines ``producer_for(obj)``."""
    packages: tuple[str, ...]
    """Top-level packages whose objects the module may serve."""
    accepts: str
    """What it serves, for a usage message ("a compiled LangGraph graph")."""


INTEGRATIONS: tuple[Integration, ...] = (
    Integration(
        "pydantic-ai",
        "agui_pipes.integrations.pydantic_ai",
        ("pydantic_ai",),
        "a pydantic-ai Agent",
    ),
    Integration(
        "langgraph",
        "agui_pipes.integrations.langgraph",
        ("langgraph", "ag_ui_langgraph"),
        "a compiled LangGraph graph or an ag-ui-langgraph LangGraphAgent",
    ),
    Integration(
        "strands",
        "agui_pipes.integrations.strands",
        ("strands", "ag_ui_strands"),
        "a Strands Agent or an ag-ui-strands StrandsAgent",
    ),
    Integration(
        "llamaindex",
        "agui_pipes.integrations.llamaindex",
        ("llama_index",),
        "a LlamaIndex Workflow (an AGUIChatWorkflow)",
    ),
    Integration("agno", "agui_pipes.integrations.agno", ("agno",), "an Agno Agent or Team"),
    Integration("crewai", "agui_pipes.integrations.crewai", ("crewai",), "a CrewAI Flow"),
)


def producer_for(obj: object) -> Producer | None:
    """The producer an installed integration makes of ``obj``, or None if none serves it."""
    roots = {getattr(cls, "__module__", "").partition(".")[0] for cls in type(obj).__mro__}
    for integration in INTEGRATIONS:
        if roots.isdisjoint(integration.packages):
            continue
        module = importlib.import_module(integration.module)
        make = cast("Callable[[object], Producer | None]", module.producer_for)
        found = make(obj)
        if found is not None:
            return found
    return None


def accepted_kinds() -> list[str]:
    """What the integrations serve, one phrase each (for a usage message)."""
    return [integration.accepts for integration in INTEGRATIONS]
