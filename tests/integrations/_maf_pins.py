"""The Microsoft Agent Framework versions its tests run (their own venv: tests/_framework_venv.py).

The pins are the ``agent-framework`` extra's (pyproject.toml). agent-framework-ag-ui 1.7.0
declares ag-ui-protocol<0.2 while agui_pipes needs 1.x, so it is installed after the extra
without its dependency check. ``redis`` is there for the approval tests' Redis store
(tests/integrations/test_agent_framework_approvals.py).
"""

EXTRAS = "server,http,agent-framework,redis"
REQUIREMENTS: list[str] = []
NO_DEPS = ["agent-framework-ag-ui==1.7.0"]
