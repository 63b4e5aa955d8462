"""Module attributes ``serve --agent`` is pointed at in the Agent Framework's own venv.

``agent`` is a bare MAF ``Agent`` over tests/integrations/_maf_app.py's scripted
chat client (offline); ``workflow`` is a one-step ``Workflow`` of it. Used by
tests/integrations/test_agent_framework_registry.py.
"""

from __future__ import annotations

from agent_framework import WorkflowBuilder

from tests.integrations._maf_app import agent as _agent

agent = _agent()
workflow = WorkflowBuilder(start_executor=_agent()).build()
