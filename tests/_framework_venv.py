"""Isolated virtualenvs for frameworks that cannot share the test venv, and their servers.

Some frameworks pin versions the project's own test venv cannot hold (an older
``ag-ui-protocol``, another starlette or pydantic). Their tests build a venv of
their own — agui_pipes' dependencies (its pyproject's, with the named extras) plus
the framework's pins, not agui_pipes itself — once, cached under
``~/.cache/agui-pipes-frameworks/<name>-<digest>``, and run the framework side in a
subprocess serving on a free port, with the checkout on its ``PYTHONPATH``. The
digest covers the Python, the dependency lines and the pins, never the checkout's
path: a fresh clone (CI's) reuses a venv built from another one, and a changed pin
or dependency rebuilds it.

    python = framework_python("agent-framework", ["agent-framework-core==1.23.0"], ...)
    with framework_server(python, "tests.integrations._maf_app", "own") as served: ...

``pins`` is a whole frozen set installed with ``--no-deps`` first, so that no
resolver runs (pip only confirms the project's dependencies are satisfied);
``requirements`` are resolved by pip; ``no_deps`` are installed last without
their dependency check. The cache directory is ``$AGUI_PIPES_FRAMEWORK_CACHE``
when set. A venv that failed to build is removed, and the failure is an error
naming pip's output, never a skip.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "REPO_ROOT",
    "FrameworkVenvError",
    "Served",
    "framework_python",
    "framework_server",
    "project_requirements",
]

REPO_ROOT = Path(__file__).resolve().parent.parent
_READY = ".agui-pipes-ready"


@dataclass(frozen=True)
class Served:
    """A framework server subprocess: its base URL and process id (for its CPU time)."""

    url: str
    pid: int


class FrameworkVenvError(RuntimeError):
    """Building the venv or starting the framework's server failed (with its output)."""


def _cache_root() -> Path:
    configured = os.environ.get("AGUI_PIPES_FRAMEWORK_CACHE")
    return Path(configured) if configured else Path.home() / ".cache" / "agui-pipes-frameworks"


def project_requirements(extras: str) -> list[str]:
    """agui_pipes' dependencies from the checkout's pyproject, with those of ``extras``
    (comma-separated; an extra naming ``agui-pipes[...]`` is followed)."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - the test venvs run 3.11+
        import tomli as tomllib
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]
    optional: dict[str, list[str]] = project.get("optional-dependencies", {})
    found: list[str] = list(project["dependencies"])
    pending = [extra.strip() for extra in extras.split(",") if extra.strip()]
    seen: set[str] = set()
    while pending:
        extra = pending.pop(0)
        if extra in seen:
            continue
        seen.add(extra)
        if extra not in optional:
            raise FrameworkVenvError(f"pyproject.toml has no extra {extra!r}")
        for line in optional[extra]:
            if line.replace("_", "-").startswith("agui-pipes["):
                pending.extend(line[line.index("[") + 1 : line.index("]")].split(","))
            elif line not in found:
                found.append(line)
    return found


def framework_python(
    name: str,
    requirements: Sequence[str] = (),
    no_deps: Sequence[str] = (),
    extras: str = "server,http",
    pins: Sequence[str] = (),
) -> Path:
    """The python of the venv holding agui_pipes' dependencies (with ``extras``'),
    ``pins`` (a frozen set, no resolver), ``requirements`` and ``no_deps`` (installed
    without their dependency check), built on first use. agui_pipes itself is not
    installed: :func:`framework_server` puts the checkout on the path."""
    project = project_requirements(extras)
    digest = hashlib.sha256()
    for part in (
        sys.version,
        "--pins",
        *pins,
        "--project",
        *project,
        "--requirements",
        *requirements,
        "--no-deps",
        *no_deps,
    ):
        digest.update(part.encode() + b"\0")
    root = _cache_root() / f"{name}-{digest.hexdigest()[:16]}"
    python = root / "bin" / "python"
    if (root / _READY).is_file():
        return python
    root.parent.mkdir(parents=True, exist_ok=True)
    with open(root.parent / f"{root.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another test process may be building it
        if (root / _READY).is_file():
            return python
        shutil.rmtree(root, ignore_errors=True)
        pip = [str(python), "-m", "pip", "install", "-q"]
        steps = [[sys.executable, "-m", "venv", str(root)]]
        if pins:
            # No bytecode compiled at install: only what is imported gets compiled, on use.
            steps.append([*pip, "--no-deps", "--no-compile", *pins])
        # With the pins in place every line is already satisfied: pip checks, fetches nothing.
        steps.append([*pip, *project, *requirements])
        if no_deps:
            steps.append([*pip, "--no-deps", *no_deps])
        for step in steps:
            done = subprocess.run(step, capture_output=True, text=True, check=False)
            if done.returncode != 0:
                shutil.rmtree(root, ignore_errors=True)
                raise FrameworkVenvError(
                    f"building the {name} venv failed at {' '.join(step[2:6])}:\n"
                    f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
                )
        (root / _READY).write_text("\n".join([*pins, *project, *requirements, *no_deps]) + "\n")
    return python


@contextlib.contextmanager
def framework_server(python: Path, module: str, *args: str, within: float = 60.0) -> Iterator[str]:
    """Run ``python -m module *args`` from the repository root until the block ends.

    The module serves on a free port of 127.0.0.1 and prints ``PORT <n>`` once it
    listens; this yields its ``Served`` (``url`` is ``http://127.0.0.1:<n>``).
    """
    # agui_pipes is not installed in a framework venv: it is this checkout's.
    path = os.environ.get("PYTHONPATH")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO_ROOT), *([path] if path else [])])}
    process = subprocess.Popen(
        [str(python), "-m", module, *args],
        cwd=REPO_ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert process.stdout is not None
        seen: list[str] = []
        deadline = time.monotonic() + within
        port = None
        while port is None:
            line = process.stdout.readline()
            if not line:
                process.wait(5)
                raise FrameworkVenvError(
                    f"{module} exited ({process.returncode}) before listening:\n" + "".join(seen)
                )
            seen.append(line)
            if line.startswith("PORT "):
                port = int(line.split()[1])
            elif time.monotonic() > deadline:
                raise FrameworkVenvError(f"{module} did not listen in {within}s:\n" + "".join(seen))
        # Keep reading its output, so a chatty server never blocks on a full pipe.
        drain = threading.Thread(target=seen.extend, args=(process.stdout,), daemon=True)
        drain.start()
        yield Served(f"http://127.0.0.1:{port}", process.pid)
    finally:
        process.terminate()
        try:
            process.wait(15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(5)
        if process.stdout is not None:
            process.stdout.close()
