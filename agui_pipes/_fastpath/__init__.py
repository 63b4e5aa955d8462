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
* ``decoding`` — ``decode()``'s fast path for bytes, and the one builder
  lookup it shares with the relay's loop;
* ``relay_loop`` — the relay's fast loop, sibling of ``Relay._feed_reference``;
* ``framing`` — the decoders' fast framing, siblings of their line-by-line
  reference framing;
* ``source`` — compiling generated code under a name that says what it is,
  with its text in ``linecache`` (tracebacks show it).

The public entry points (``agui_pipes.codecs.decode`` / ``encode_*``, the
decoders, ``agui_pipes.relay.Relay``) are the only modules that import this
package; each picks the fast or the reference implementation once (per
call for the functions, at construction for the classes), and the fast one
falls back to the reference path where it has no plan for the shape at
hand. Their ``fast_path`` parameter chooses; ``ENABLED`` is the default,
read once at import from the environment (``agui_pipes._foundation.switch``):
``AGUI_PIPES_FAST_PATH=0`` (or ``false`` / ``no`` / ``off``) turns the fast
path off for the process.

To read what was generated for a shape::

    python -m agui_pipes._fastpath show TEXT_MESSAGE_CONTENT
    python -m agui_pipes._fastpath show TOOL_CALL_START --keys type,toolCallId,toolCallName
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .._foundation.switch import ENABLED as _PROCESS_DEFAULT
from .._foundation.switch import ENV_VAR, enabled_in

if TYPE_CHECKING:
    from .show import generated_source

__all__ = ["ENABLED", "ENV_VAR", "enabled_in", "generated_source"]

ENABLED: bool = _PROCESS_DEFAULT
"""The process default of every wire entry point's ``fast_path`` (``agui_pipes._foundation.switch``:
``AGUI_PIPES_FAST_PATH``, read once, at import)."""


def __getattr__(name: str) -> Any:
    # ``generated_source`` (printing what the fast path generates for a shape, a
    # debugging aid) is imported when first read, not with the package: no run needs it.
    if name == "generated_source":
        from .show import generated_source

        return generated_source
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
