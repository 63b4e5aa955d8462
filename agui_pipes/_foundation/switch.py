"""The fast path's switch: ``AGUI_PIPES_FAST_PATH``, read once, below every layer.

``AGUI_PIPES_FAST_PATH=0`` (or ``false`` / ``no`` / ``off``) turns every
speed-only path off for the process: the wire entry points' generated code
(``agui_pipes._fastpath``, whose ``ENABLED`` is their default) and the
chain's use of the stages' optional ``route`` handlers (without them it calls
each stage's ``transform``, as the stage contract says). The switch lives
here, in a module that imports nothing of ours, so the reference modules can
read it without loading the fast path.
"""

from __future__ import annotations

import os
from typing import Final

__all__ = ["ENABLED", "ENV_VAR", "enabled_in"]

ENV_VAR: Final = "AGUI_PIPES_FAST_PATH"
_OFF: Final = frozenset({"0", "false", "no", "off"})


def enabled_in(environ: dict[str, str] | os._Environ[str]) -> bool:
    """Whether an environment leaves the fast path on (anything but an explicit "off")."""
    return environ.get(ENV_VAR, "1").strip().lower() not in _OFF


ENABLED: bool = enabled_in(os.environ)
"""Whether the process runs the fast path (read once, at import)."""
