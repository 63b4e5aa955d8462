"""Which integration serves a framework's object: the registry ``serve --agent`` reads.

Each entry names an integration module, the top-level packages whose objects
it may serve and, for a usage message, what it accepts. An object is offered
to an integration only when a class in its MRO comes from one of those
packages (or their subpackages) — or from the integration module itself (a producer that module
built, with your options, is served as it is) — so looking one up imports no
framework but the object's own.

The contract an integration module keeps (``agui_pipes.integrations.<name>``):
a function ``producer_for(obj) -> Producer | None`` — the producer serving
``obj``, or None when ``obj`` is not a kind it serves. An integration whose
producer leaves a repair to the chain names the module's function making that
stage (``Integration.chain``): ``serve --agent`` puts it at the head of the
chain. A new integration is one module with that function and one entry in
``INTEGRATIONS``.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

if TYPE_CHECKING:
    from .._pipeline.transformer import Stage
    from ..server._producer import Producer

__all__ = ["INTEGRATIONS", "Integration", "Served", "accepted_kinds", "producer_for", "served_by"]


@dataclass(frozen=True)
class Integration:
    """One framework's integration, as the registry knows it."""

    name: str
    """The framework, as docs/integrations.md names it ("langgraph")."""
    module: str
    """The integration module, which defines ``producer_for(obj)``."""
    packages: tuple[str, ...]
    """Packages whose objects the module may serve (``"google.adk"``: that one and below)."""
    accepts: str
    """What it serves, for a usage message ("a compiled LangGraph graph")."""
    chain: str | None = None
    """The module's function making the stage its producers' streams need before any
    other (``"adk_chain"``), or None when the producer repairs its stream itself."""


@dataclass(frozen=True)
class Served:
    """What ``serve --agent`` serves for a framework's object."""

    producer: Producer
    integration: Integration
    chain: Callable[[], Stage] | None
    """The integration's own stage, to run first (None: none needed)."""


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
    Integration(
        "adk",
        "agui_pipes.integrations.adk",
        ("google.adk", "ag_ui_adk"),
        "a Google ADK agent (a BaseAgent such as an LlmAgent), an ag-ui-adk ADKAgent or "
        "an adk_producer(...)",
        chain="adk_chain",
    ),
    Integration(
        "agent-framework",
        "agui_pipes.integrations.agent_framework",
        ("agent_framework", "agent_framework_ag_ui"),
        "a Microsoft Agent Framework agent or Workflow (or its AgentFrameworkAgent / "
        "AgentFrameworkWorkflow)",
    ),
    Integration("crewai", "agui_pipes.integrations.crewai", ("crewai",), "a CrewAI Flow"),
)


def served_by(obj: object) -> Served | None:
    """What an installed integration serves ``obj`` with, or None if none serves it."""
    modules = {getattr(cls, "__module__", "") for cls in type(obj).__mro__}
    for integration in INTEGRATIONS:
        if not any(_within(module, integration) for module in modules):
            continue
        module = importlib.import_module(integration.module)
        make = cast("Callable[[object], Producer | None]", module.producer_for)
        found = make(obj)
        if found is None:
            continue
        chain = None
        if integration.chain is not None:
            chain = cast("Callable[[], Stage]", getattr(module, integration.chain))
        return Served(found, integration, chain)
    return None


def _within(module: str, integration: Integration) -> bool:
    """Whether a class of ``module`` is one ``integration`` may be offered."""
    if module == integration.module:
        return True
    return any(
        module == package or module.startswith(f"{package}.") for package in integration.packages
    )


def producer_for(obj: object) -> Producer | None:
    """The producer an installed integration makes of ``obj``, or None if none serves it."""
    served = served_by(obj)
    return None if served is None else served.producer


def accepted_kinds() -> list[str]:
    """What the integrations serve, one phrase each (for a usage message)."""
    return [integration.accepts for integration in INTEGRATIONS]
