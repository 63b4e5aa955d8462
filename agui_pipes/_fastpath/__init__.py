"""The fast path: every speed-only piece, in one place.

The reference path (``agui_pipes._protocol.decode``, ``agui_pipes._protocol.encode``) is the
plain implementation of the processing model; everything here gives the same
events, bytes and errors, faster, and stands *above* it: this package reads
the reference path's specs and checks, the reference path never imports it.

* ``builders`` — generated decode builders, one per wire key set;
* ``writers`` — the generated common-shape writer per event class, and
  pydantic's serializer without ``ag_ui``'s per-event hook;
* ``open_json`` — snapshots, deltas and other events with open JSON values:
  generated builders per key set (and one for a JSON Patch array) and a
  writer per class whose values are checked for what orjson writes
  otherwise than the reference encoder;
* ``messages`` — the messages of a ``MESSAGES_SNAPSHOT``: a generated
  builder and writer per message, tool call, content part and source model;
* ``bypass`` — the relay's bypass: payloads sent on as bytes when every
  stage promises to pass them;
* ``_promises`` — joining those promises (``StreamTransformer.passes``) for
  one event shape, and deciding which to trust;
* ``source`` — compiling generated code under a name that says what it is,
  with its text in ``linecache`` (tracebacks show it).

The public entry points (``agui_pipes.codecs.decode`` / ``encode_*``,
``agui_pipes.relay.Relay``) take the fast path when it has a plan for the
shape at hand and fall back to the reference path otherwise. Their
``fast_path`` parameter chooses per call; ``ENABLED`` is the default, read
once at import from the environment: ``AGUI_PIPES_FAST_PATH=0`` (or
``false`` / ``no`` / ``off``) turns the fast path off for the process.

To read what was generated for a shape::

    python -m agui_pipes._fastpath show TEXT_MESSAGE_CONTENT
    python -m agui_pipes._fastpath show TOOL_CALL_START --keys type,toolCallId,toolCallName
"""

from __future__ import annotations

import os
from typing import Final

__all__ = ["ENABLED", "ENV_VAR", "enabled_in", "generated_source"]

ENV_VAR: Final = "AGUI_PIPES_FAST_PATH"
_OFF: Final = frozenset({"0", "false", "no", "off"})


def enabled_in(environ: dict[str, str] | os._Environ[str]) -> bool:
    """Whether an environment leaves the fast path on (anything but an explicit "off")."""
    return environ.get(ENV_VAR, "1").strip().lower() not in _OFF


ENABLED: bool = enabled_in(os.environ)
"""The process default of every entry point's ``fast_path`` (read once, at import)."""

# Last: ``show`` imports the builders and writers, which need nothing from here.
from .show import generated_source  # noqa: E402
