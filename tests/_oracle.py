"""Differential oracle: replay AG-UI streams through the official TypeScript client.

The TypeScript client ``@ag-ui/client`` 1.0.0 is the peer agui_pipes must agree
with, so tests can ask it for a verdict on any stream. ``tests/harness/`` holds a
tiny node project pinning the client (``package.json`` + ``package-lock.json``)
and ``oracle.mjs``, which replays a *batch* of streams through
``AbstractAgent.runAgent()`` (optionally behind ``FilterToolCallsMiddleware``)
in one node process. Batching matters: starting node costs ~0.3 s, replaying a
stream a fraction of a millisecond, and property tests judge thousands of them.

API (import with ``from tests._oracle import ...``; the repository root is on
``sys.path`` under pytest)::

    ts_available() -> bool
        True when ``node`` and ``npm`` are on PATH. Only their absence may skip
        a test; every other problem is an error.
    ensure_installed() -> Path
        Runs ``npm ci`` into ``tests/harness/node_modules`` on first use (and again
        whenever the lockfile changes); returns the harness directory. Raises
        OracleError with npm's output when the install fails.
    run_oracle(cases, *, batch_size=1000, timeout=600.0) -> list[OracleResult]
        One result per case, in order. A case is a sequence of events (ag_ui.core
        models or wire dicts) or a mapping with exactly one of
        ``"stream": [...]`` (replayed in-process) or ``"url": "http://..."`` (the
        official ``HttpAgent`` POSTs a RunAgentInput there and reads SSE back;
        optional ``"headers"``; ``"method": "GET"`` makes it GET the url instead,
        for the durable routes; ``"prefixSse": text`` is SSE its fetch yields before
        the response body, as a resumed client joins a cut stream), plus optional
        ``"deny": [names]`` or
        ``"allow": [names]`` (FilterToolCallsMiddleware), ``"threadId"``,
        ``"runId"``, ``"initialMessages"``, ``"initialState"``, ``"tools"``,
        ``"context"``, ``"forwardedProps"``, ``"resume"`` (models or dicts),
        ``"abortAfterEvents": n`` (``agent.abortRun()`` once n events arrived)
        and ``"timeoutMs": n`` (abort and fail the case; default 30 s for urls).
    run_one(stream, *, deny=None, allow=None) -> OracleResult
        A single stream (prefer ``run_oracle`` for many).
    to_wire(event) -> dict
        The camelCase JSON object an event is on the wire (absent fields omitted).

An ``OracleResult`` is a dict ``{"outcome": "completed" | "failed", "error":
str | None, "events": [delivered wire events, chunks expanded], "messages":
[final messages], "state": final state, "warnings": [console output of the
client for that case]}``. A rejected stream is ``outcome == "failed"`` with the
client's message in ``error``; a stream that stops mid-run is *not* detected by
the client (it reports ``completed``).

pytest integration (``tests/conftest.py``): the ``ts_oracle`` fixture returns
``run_oracle`` after installing the harness, and skips the test when node/npm are
missing; tests marked ``@pytest.mark.node`` or using the fixture are skipped
under the same condition only.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import subprocess
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, TypedDict

from ag_ui.core import BaseEvent
from pydantic import BaseModel

__all__ = [
    "BUNDLE_DIR",
    "HARNESS_DIR",
    "OracleError",
    "OracleResult",
    "client_bundle",
    "ensure_installed",
    "run_one",
    "run_oracle",
    "to_wire",
    "ts_available",
]

HARNESS_DIR = Path(__file__).resolve().parent / "harness"
_SCRIPT = HARNESS_DIR / "oracle.mjs"
_STAMP = HARNESS_DIR / "node_modules" / ".agui-pipes-install.sha256"
_MIN_NODE_MAJOR = 18


class OracleError(RuntimeError):
    """The harness itself failed (install, node crash, malformed output) — not a verdict."""


class OracleResult(TypedDict):
    outcome: Literal["completed", "failed"]
    error: str | None
    events: list[dict[str, Any]]
    messages: list[dict[str, Any]]
    state: Any
    warnings: list[str]


def ts_available() -> bool:
    """True when node and npm are installed (the only reason a node test may skip)."""
    return shutil.which("node") is not None and shutil.which("npm") is not None


def _lock_digest() -> str:
    h = hashlib.sha256()
    for name in ("package.json", "package-lock.json"):
        h.update((HARNESS_DIR / name).read_bytes())
    return h.hexdigest()


def _installed(digest: str) -> bool:
    client = HARNESS_DIR / "node_modules" / "@ag-ui" / "client" / "package.json"
    return client.is_file() and _STAMP.is_file() and _STAMP.read_text().strip() == digest


@contextlib.contextmanager
def _install_lock() -> Iterator[None]:
    """Serialise installs between concurrent test processes (POSIX only; best effort)."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows
        yield
        return
    with (HARNESS_DIR / ".install.lock").open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _check_node() -> str:
    node = shutil.which("node")
    if node is None or shutil.which("npm") is None:
        raise OracleError(
            "node and npm are required for the TypeScript oracle (tests/harness); "
            "install Node.js >= 18 or run without the 'node' tests"
        )
    version = subprocess.run(
        [node, "--version"], capture_output=True, text=True, check=False
    ).stdout.strip()
    try:
        major = int(version.lstrip("v").split(".")[0])
    except ValueError:
        raise OracleError(f"cannot read the node version from {version!r} ({node})") from None
    if major < _MIN_NODE_MAJOR:
        raise OracleError(
            f"node {version} at {node} is too old for tests/harness; "
            f"Node.js >= {_MIN_NODE_MAJOR} is required"
        )
    return node


def ensure_installed() -> Path:
    """Install the pinned node dependencies once (``npm ci``) and return the harness dir."""
    _check_node()
    digest = _lock_digest()
    if _installed(digest):
        return HARNESS_DIR
    with _install_lock():
        if _installed(digest):
            return HARNESS_DIR
        npm = shutil.which("npm")
        assert npm is not None  # checked by _check_node
        env = {
            **os.environ,
            "npm_config_audit": "false",
            "npm_config_fund": "false",
            "npm_config_update_notifier": "false",
        }
        proc = subprocess.run(
            [npm, "ci", "--prefer-offline", "--ignore-scripts", "--no-progress"],
            cwd=HARNESS_DIR,
            capture_output=True,
            text=True,
            env=env,
            check=False,
        )
        if proc.returncode != 0:
            tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-25:])
            raise OracleError(
                f"`npm ci` in {HARNESS_DIR} failed (exit {proc.returncode}); the TypeScript "
                "oracle needs @ag-ui/client 1.0.0 from the npm registry. Check network/registry "
                f"access, or run `npm ci` there by hand to see the full error.\n{tail}"
            )
        _STAMP.write_text(digest + "\n")
    return HARNESS_DIR


BUNDLE_DIR = HARNESS_DIR / ".bundle"


def client_bundle() -> Path:
    """``@ag-ui/client`` bundled for a browser page (one ES module), built once per lockfile.

    The pinned client from the harness, bundled by the harness's pinned esbuild into
    ``tests/harness/.bundle/ag-ui-client.mjs``; a page imports it through an import map.
    """
    ensure_installed()
    target = BUNDLE_DIR / "ag-ui-client.mjs"
    stamp = BUNDLE_DIR / ".lock-digest"
    digest = _lock_digest()
    if target.exists() and stamp.exists() and stamp.read_text().strip() == digest:
        return target
    BUNDLE_DIR.mkdir(exist_ok=True)
    entry = BUNDLE_DIR / "entry.mjs"
    entry.write_text('export * from "@ag-ui/client";\n')
    proc = subprocess.run(
        [
            str(HARNESS_DIR / "node_modules" / ".bin" / "esbuild"),
            str(entry),
            "--bundle",
            "--format=esm",
            "--platform=browser",
            f"--outfile={target}",
        ],
        cwd=HARNESS_DIR,
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        raise OracleError(f"esbuild could not bundle @ag-ui/client:\n{proc.stderr[-2000:]}")
    stamp.write_text(digest + "\n")
    return target


def to_wire(event: BaseEvent) -> dict[str, Any]:
    """An event as the JSON object sent on the wire (camelCase, absent fields omitted)."""
    wire: dict[str, Any] = event.model_dump(mode="json", by_alias=True)
    return wire


def _wire_item(item: Any, where: str) -> Any:
    if isinstance(item, BaseModel):
        wire: dict[str, Any] = item.model_dump(mode="json", by_alias=True)
        return wire
    if isinstance(item, Mapping):
        return dict(item)
    raise TypeError(f"{where} is a {type(item).__name__}; expected an ag_ui.core model or a dict")


_CASE_KEYS = frozenset(
    {
        "stream",
        "url",
        "headers",
        "method",
        "prefixSse",
        "deny",
        "allow",
        "threadId",
        "runId",
        "initialMessages",
        "initialState",
        "tools",
        "context",
        "forwardedProps",
        "resume",
        "abortAfterEvents",
        "timeoutMs",
    }
)


def _wire_case(case: Any, index: int) -> dict[str, Any]:
    if isinstance(case, Mapping):
        unknown = set(case) - _CASE_KEYS
        if unknown:
            raise ValueError(
                f"case #{index} has unknown keys {sorted(unknown)}; known: {sorted(_CASE_KEYS)}"
            )
        if ("stream" in case) == ("url" in case):
            raise ValueError(
                f"case #{index} needs exactly one of 'stream' (events to replay) or 'url' "
                f"(a live endpoint); keys: {sorted(case)}"
            )
        if "deny" in case and "allow" in case:
            raise ValueError(f"case #{index}: give 'deny' or 'allow', not both")
        out = {k: v for k, v in case.items() if k != "stream"}
        for key in ("deny", "allow"):
            if key in out:
                names = out[key]
                if isinstance(names, str) or not all(isinstance(n, str) for n in names):
                    raise TypeError(f"case #{index}: '{key}' must be a list of tool names")
                out[key] = list(names)
        for key in ("initialMessages", "tools", "context", "resume"):
            if key in out:
                out[key] = [
                    _wire_item(m, f"case #{index} {key}[{i}]") for i, m in enumerate(out[key])
                ]
        if "url" in case:
            return out
        stream = case["stream"]
    elif isinstance(case, Sequence) and not isinstance(case, (str, bytes)):
        out, stream = {}, case
    else:
        raise TypeError(
            f"case #{index} is a {type(case).__name__}; expected a list of events or a "
            "mapping with a 'stream' or 'url' key"
        )
    out["stream"] = [_wire_item(item, f"case #{index} event #{i}") for i, item in enumerate(stream)]
    return out


def _run_batch(node: str, cases: list[dict[str, Any]], timeout: float) -> list[OracleResult]:
    payload = json.dumps(cases, ensure_ascii=False).encode()
    try:
        proc = subprocess.run(
            [node, str(_SCRIPT), "-"],
            cwd=HARNESS_DIR,
            input=payload,
            capture_output=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise OracleError(
            f"oracle.mjs did not finish {len(cases)} cases within {timeout:.0f}s; "
            "pass a smaller batch_size or a larger timeout"
        ) from None
    stderr = proc.stderr.decode(errors="replace").strip()
    if proc.returncode != 0:
        raise OracleError(f"oracle.mjs exited with {proc.returncode}:\n{stderr[-4000:]}")
    # Split on "\n" only: str.splitlines() would also cut at U+2028, \x1c, ... which
    # JSON.stringify leaves unescaped inside strings.
    lines = [line for line in proc.stdout.decode().split("\n") if line.strip()]
    if len(lines) != len(cases):
        raise OracleError(
            f"oracle.mjs printed {len(lines)} results for {len(cases)} cases:\n{stderr[-4000:]}"
        )
    return [json.loads(line) for line in lines]


def run_oracle(
    cases: Sequence[Any], *, batch_size: int = 1000, timeout: float = 600.0
) -> list[OracleResult]:
    """Judge every case with the TypeScript client; one result per case, in order.

    Cases are sent ``batch_size`` at a time, one node process per batch.
    Raises ``OracleError`` when the harness cannot run (not when a stream is
    rejected — that is a result with ``outcome == "failed"``).
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    wire = [_wire_case(case, i) for i, case in enumerate(cases)]
    if not wire:
        return []
    ensure_installed()
    node = _check_node()
    results: list[OracleResult] = []
    for start in range(0, len(wire), batch_size):
        results.extend(_run_batch(node, wire[start : start + batch_size], timeout))
    return results


def run_one(
    stream: Sequence[BaseEvent | Mapping[str, Any]],
    *,
    deny: Sequence[str] | None = None,
    allow: Sequence[str] | None = None,
) -> OracleResult:
    """Judge a single stream (optionally behind FilterToolCallsMiddleware)."""
    case: dict[str, Any] = {"stream": stream}
    if deny is not None:
        case["deny"] = deny
    if allow is not None:
        case["allow"] = allow
    return run_oracle([case])[0]
