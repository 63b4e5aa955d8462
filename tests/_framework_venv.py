"""Isolated virtualenvs for frameworks that cannot share the test venv, and their servers.

Some frameworks pin versions the project's own test venv cannot hold (an older
``ag-ui-protocol``, another starlette or pydantic). Their tests build a venv of
their own — agui_pipes from this checkout (editable) plus the framework's pins —
once, cached under ``~/.cache/agui-pipes-frameworks/<name>-<digest>`` (the digest
covers the pins, this checkout's path and its pyproject, so a change rebuilds),
and run the framework side in a subprocess serving on a free port.

    python = framework_python("agent-framework", ["agent-framework-core==1.23.0"], ...)
    with framework_server(python, "tests.integrations._maf_app", "own") as served: ...

The cache directory is ``$AGUI_PIPES_FRAMEWORK_CACHE`` when set. Building one
is minutes (pip); a venv that failed to build is removed, and the failure is an
error naming pip's output, never a skip.
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

__all__ = ["REPO_ROOT", "FrameworkVenvError", "Served", "framework_python", "framework_server"]

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


def framework_python(
    name: str,
    requirements: Sequence[str],
    no_deps: Sequence[str] = (),
    extras: str = "server,http",
) -> Path:
    """The python of the venv holding agui_pipes[extras] + ``requirements`` (+ ``no_deps``,
    installed without their dependency check), built on first use."""
    digest = hashlib.sha256()
    for part in (
        sys.version,
        str(REPO_ROOT),
        (REPO_ROOT / "pyproject.toml").read_text(),
        extras,
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
        steps = [
            [sys.executable, "-m", "venv", str(root)],
            [str(python), "-m", "pip", "install", "-q", "-e", f"{REPO_ROOT}[{extras}]"],
        ]
        if requirements:
            steps.append([str(python), "-m", "pip", "install", "-q", *requirements])
        if no_deps:
            steps.append([str(python), "-m", "pip", "install", "-q", "--no-deps", *no_deps])
        for step in steps:
            done = subprocess.run(step, capture_output=True, text=True, check=False)
            if done.returncode != 0:
                shutil.rmtree(root, ignore_errors=True)
                raise FrameworkVenvError(
                    f"building the {name} venv failed at {' '.join(step[2:5])}:\n"
                    f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
                )
        (root / _READY).write_text("\n".join([*requirements, *no_deps]) + "\n")
    return python


@contextlib.contextmanager
def framework_server(python: Path, module: str, *args: str, within: float = 60.0) -> Iterator[str]:
    """Run ``python -m module *args`` from the repository root until the block ends.

    The module serves on a free port of 127.0.0.1 and prints ``PORT <n>`` once it
    listens; this yields its ``Served`` (``url`` is ``http://127.0.0.1:<n>``).
    """
    process = subprocess.Popen(
        [str(python), "-m", module, *args],
        cwd=REPO_ROOT,
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
