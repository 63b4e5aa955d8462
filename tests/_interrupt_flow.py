"""One approval flow through the official TypeScript client (tests/harness/interrupt_flow.mjs).

The client runs on one ``HttpAgent``: a first run, its own ``pendingInterrupts``,
a second run whose ``resume`` answers each with ``answer`` (or, by the
interrupt's reason, an answer of ``byReason``), and the result. The user's
turn is "Send Bob $5" on thread ``t-1``; ``extra`` adds the harness's other
inputs (``tools``, ``byReason``).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import anyio

__all__ = ["interrupt_flow", "interrupt_flow_in_thread"]


def interrupt_flow(
    url: str, tmp_path: Path, answer: dict[str, Any], **extra: Any
) -> dict[str, Any]:
    """The harness's output: ``{"first", "second", "console"}`` (see the .mjs file)."""
    from tests._oracle import HARNESS_DIR, ensure_installed

    ensure_installed()
    case = tmp_path / "flow.json"
    user = {"id": "u-1", "role": "user", "content": "Send Bob $5"}
    case.write_text(
        json.dumps({"url": url, "threadId": "t-1", "messages": [user], "answer": answer, **extra})
    )
    done = subprocess.run(
        ["node", str(HARNESS_DIR / "interrupt_flow.mjs"), str(case)],
        cwd=HARNESS_DIR,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    result: dict[str, Any] = json.loads(done.stdout)
    return result


async def interrupt_flow_in_thread(
    url: str, tmp_path: Path, answer: dict[str, Any], **extra: Any
) -> Any:
    """:func:`interrupt_flow` from an async test (in a worker thread)."""
    return await anyio.to_thread.run_sync(lambda: interrupt_flow(url, tmp_path, answer, **extra))
