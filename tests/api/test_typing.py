"""User code in the documented forms passes ``mypy --strict``; typed misuse is refused.

tests/api/typed_agents.py holds the agent forms (bare ``ctx: RunContext``, a
state model, agent objects, ``run``, ``collect``, ``AgentEndpoint``) and the
misuses mypy must refuse, each marked with the ``type: ignore[code]`` it
needs: ``--warn-unused-ignores`` turns a misuse that stops being refused
into a failure here. The examples (the FastAPI app among them) and the
docs' own agent and FastAPI snippets are checked as they are.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
CHECKED = [
    ROOT / "tests" / "api" / "typed_agents.py",
    *sorted((ROOT / "examples").glob("*.py")),
    *sorted((ROOT / "examples" / "agents").glob("*.py")),
]


DOC_SNIPPETS = {
    # (page, heading the snippet follows): its first ```python block
    "driver_hello": ("driver.md", "# The run driver"),
    "serving_fastapi": ("serving.md", "### FastAPI"),
}


def doc_snippet(page: str, heading: str) -> str:
    text = (ROOT / "docs" / page).read_text()
    start = text.index(f"{heading}\n")
    found = re.search(r"```python\n(.*?)```", text[start:], re.DOTALL)
    assert found is not None, f"no python block after {heading!r} in docs/{page}"
    return found.group(1)


def mypy(files: list[Path], cache: Path) -> subprocess.CompletedProcess[str]:
    pytest.importorskip("mypy")
    env = {**os.environ, "MYPYPATH": str(ROOT)}
    return subprocess.run(
        [
            sys.executable, "-m", "mypy",
            "--config-file", str(ROOT / "pyproject.toml"),
            "--strict", "--warn-unused-ignores",
            "--cache-dir", str(cache),
            *(str(f) for f in files),
        ],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("mypy_cache")


def test_documented_forms_pass_and_misuse_is_refused(cache: Path, tmp_path: Path) -> None:
    assert (ROOT / "examples" / "fastapi_app.py") in CHECKED
    snippets = []
    for name, (page, heading) in DOC_SNIPPETS.items():
        snippet = tmp_path / f"{name}.py"
        snippet.write_text(doc_snippet(page, heading))
        snippets.append(snippet)
    assert "app.routes.append(Route(" in snippets[1].read_text()
    result = mypy([*CHECKED, *snippets], cache)
    assert result.returncode == 0, result.stdout + result.stderr
    checked = len(CHECKED) + len(snippets)
    assert f"Success: no issues found in {checked} source files" in result.stdout


def test_a_sync_agent_is_refused_with_the_expected_types(tmp_path: Path, cache: Path) -> None:
    user_code = tmp_path / "user_agent.py"
    user_code.write_text(
        "from agui_pipes import RunContext, RunOutcome\n"
        "from agui_pipes.testing import collect\n"
        "\n"
        "def agent(ctx: RunContext) -> RunOutcome:\n"
        "    return RunOutcome.success()\n"
        "\n"
        "async def test() -> None:\n"
        '    await collect(agent, {"threadId": "t", "runId": "r"})\n'
    )
    result = mypy([user_code], cache)
    assert result.returncode == 1, result.stdout
    assert (
        'user_agent.py:8: error: Argument 1 to "collect" has incompatible type '
        '"Callable[[RunContext[Any]], RunOutcome]"; expected "AgentObject | AgentFunction"'
        "  [arg-type]"
    ) in result.stdout
