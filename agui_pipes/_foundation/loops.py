"""Which event loop, if any, runs in this thread: for sync entry points that start their own.

``anyio.run`` refuses to start inside a running loop with "Already running
asyncio in this thread", which names the mechanism, not the caller's
mistake. The sync helpers that start a loop (``TransformerChain.apply_sync``,
``testing.run_transformer``) ask here first, to say which async form to use.
"""

from __future__ import annotations

import sys

__all__ = ["running_loop"]


def running_loop() -> str | None:
    """``"asyncio"`` or ``"trio"`` when called from inside that loop, else ``None``."""
    # Neither is imported here: a running loop has imported its library, and
    # importing asyncio would cost every start of the CLI ~30 ms.
    asyncio = sys.modules.get("asyncio")
    if asyncio is not None:
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            pass
        else:
            return "asyncio"
    trio = sys.modules.get("trio")  # never imported here: a trio loop has imported it
    if trio is not None:
        try:
            trio.lowlevel.current_trio_token()
        except RuntimeError:
            pass
        else:
            return "trio"
    return None
