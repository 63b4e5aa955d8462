"""Framework agents as agui_pipes producers: one small module per framework.

Each module turns a framework's own AG-UI adapter into a *producer* —
``producer(run_input, principal)`` returning the run's ``ag_ui.core`` events —
for :func:`agui_pipes.server.producer_gateway` / ``build_app(producer=...)``,
which serve it in-process with everything a gateway offers (docs/integrations.md):

* :mod:`agui_pipes.integrations.pydantic_ai` — a pydantic-ai ``Agent``
  (``pydantic-ai-slim[ag-ui]``, its ``AGUIAdapter``);
* :mod:`agui_pipes.integrations.langgraph` — a LangGraph graph through
  ``ag-ui-langgraph``'s ``LangGraphAgent``;
* :mod:`agui_pipes.integrations.adk` — a Google ADK agent through ``ag-ui-adk``;
* :mod:`agui_pipes.integrations.strands` — an AWS Strands agent through ``ag-ui-strands``;
* :mod:`agui_pipes.integrations.llamaindex` — a LlamaIndex workflow through
  ``llama-index-protocols-ag-ui``.

The framework is imported by its module only, so importing this package
needs none of them.
"""

from __future__ import annotations

from .._lazy import public_dir

__all__: list[str] = []
__dir__ = public_dir(__all__)
