"""Framework agents as agui_pipes producers: one small module per framework.

Each module turns a framework's own AG-UI adapter into a *producer* —
``producer(run_input, principal)`` returning the run's ``ag_ui.core`` events —
for ``AgentEndpoint(producer=...)`` / ``build_app(producer=...)``, which serve
it in-process with everything the endpoint offers (docs/integrations.md):

* :mod:`agui_pipes.integrations.pydantic_ai` — a pydantic-ai ``Agent``
  (``pydantic-ai-slim[ag-ui]``, its ``AGUIAdapter``);
* :mod:`agui_pipes.integrations.langgraph` — a LangGraph graph through
  ``ag-ui-langgraph``'s ``LangGraphAgent``;
* :mod:`agui_pipes.integrations.adk` — a Google ADK agent through ``ag-ui-adk``;
* :mod:`agui_pipes.integrations.strands` — an AWS Strands agent through ``ag-ui-strands``;
* :mod:`agui_pipes.integrations.llamaindex` — a LlamaIndex workflow through
  ``llama-index-protocols-ag-ui``;
* :mod:`agui_pipes.integrations.agno` — an Agno agent or team through its AGUI interface;
* :mod:`agui_pipes.integrations.agent_framework` — a Microsoft Agent Framework agent or
  workflow through ``agent-framework-ag-ui``.

``producer_for(obj)`` finds the integration serving a framework's object (what
``agui-pipes serve --agent module:attr`` uses; the registry is
``_registry.INTEGRATIONS``). The framework is imported by its module only, so
importing this package needs none of them.
"""

from __future__ import annotations

from .._lazy import public_dir, publish
from ._registry import INTEGRATIONS, Integration, accepted_kinds, producer_for

publish(__name__, Integration, accepted_kinds, producer_for)

__all__ = ["INTEGRATIONS", "Integration", "accepted_kinds", "producer_for"]
__dir__ = public_dir(__all__)
