"""The Microsoft Agent Framework versions its tests run (their own venv: tests/_framework_venv.py).

agent-framework-ag-ui 1.7.0 declares ag-ui-protocol<0.2; agui_pipes needs 1.x, so it is
installed without its dependency check, beside the dependencies it declares otherwise.
"""

REQUIREMENTS = [
    "agent-framework-core==1.23.0",
    "fastapi>=0.121.0,<0.142.0",
    "sse-starlette>=3.4.5,<4",
    "httpx>=0.28.1,<1",
    "uvicorn>=0.30.0,<1",
]
NO_DEPS = ["agent-framework-ag-ui==1.7.0"]
