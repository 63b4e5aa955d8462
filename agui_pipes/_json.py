"""The JSON library on the per-event hot path: orjson, with the standard library as fallback.

Parsing and serialising dominate a relay's per-event cost, and orjson does
both several times faster than ``json``. Every use goes through these two
helpers so the fallback (for platforms without an orjson wheel) is one place,
and so callers keep the standard library's exact error reporting: a failure
in orjson is retried with ``json``, which either succeeds (inputs orjson
refuses but JSON allows, such as escaped lone surrogates) or raises its usual,
well-located ``JSONDecodeError``.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["HAVE_ORJSON", "dumps_plain", "fast_loads", "loads", "orjson_dumps"]

try:
    import orjson as _orjson
except ImportError:  # pragma: no cover - orjson is a core dependency; kept for odd platforms
    _orjson = None  # type: ignore[assignment]

HAVE_ORJSON = _orjson is not None

fast_loads = _orjson.loads if _orjson is not None else json.loads
orjson_dumps = _orjson.dumps if _orjson is not None else None
"""The fastest parser available; raises a ValueError subclass on bad input (any wording)."""


def loads(data: str | bytes) -> Any:
    """Parse one JSON document (exactly the standard library's semantics and errors).

    Bytes are UTF-8 (RFC 8259), decoded strictly before the fallback: given
    bytes, ``json`` would also guess UTF-16/32 and skip a BOM, so the same
    event would parse as bytes but not as text.
    """
    if _orjson is not None:
        try:
            return _orjson.loads(data)
        except _orjson.JSONDecodeError:
            pass
    if isinstance(data, bytes | bytearray):
        data = bytes(data).decode("utf-8")
    return json.loads(data)


def dumps_plain(value: dict[str, Any]) -> bytes | None:
    """Compact UTF-8 JSON of a dict of plain values, or None when orjson cannot do it.

    Callers only pass values whose JSON text orjson and pydantic write
    identically (str, bool, ints in the interoperable range, None); None
    tells them to take the general path.
    """
    if _orjson is None:
        return None
    try:
        return _orjson.dumps(value)
    except (_orjson.JSONEncodeError, TypeError):
        return None
