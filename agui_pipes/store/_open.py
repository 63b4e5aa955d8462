"""``open_store(url)``: one string picks and configures the event log backend.

Why a URL: the same setting travels through a CLI flag (``--store``), an
environment variable and a config file, and it reads the way other tools
name databases. Retention and backend tuning ride in the query string, so a
deployment changes them without code.

The scheme picks the backend through the registry (``_registry``: the
entry-point group ``agui_pipes.stores``), so this function names no backend.
"""

from __future__ import annotations

from . import _registry
from ._base import EventLog
from ._retention import Retention
from ._url import EXAMPLES, StoreURL

__all__ = ["open_store"]


def open_store(url: str, *, retention: Retention | None = None) -> EventLog:
    """The event log ``url`` names, not yet opened (``async with`` it, or ``await .open()``).

    Nothing is connected here, so a bad URL fails at configuration time
    with a ValueError naming the URL, the accepted forms and an example.

    Query options, for every backend: ``max_age`` (seconds),
    ``max_runs_per_thread``, ``max_runs``, ``retention_interval`` (seconds)
    — see :class:`Retention`; they override ``retention``. For SQLite:
    ``poll`` (seconds between checks for other processes' appends, 0.1).
    For Redis: ``prefix`` (key prefix, ``agui:``), ``block`` (seconds one
    ``XREAD BLOCK`` waits, 5); any other option goes to redis-py. For
    Postgres: ``schema`` (``agui_pipes``), ``pool`` (connections, 10),
    ``pool_timeout`` (seconds, 10), ``poll`` (seconds, 5); any other option
    goes to libpq.
    """
    if not isinstance(url, str):
        raise TypeError(f"open_store needs a URL string, got {type(url).__name__}: {url!r}")
    parsed = StoreURL.parse(url, retention)
    backend = _registry.backend_for(parsed)
    if backend is None:
        registered = ", ".join(_registry.schemes()) or "none (is agui-pipes installed?)"
        raise ValueError(
            f"unknown store URL scheme in {url!r} (registered schemes: {registered}); {EXAMPLES}"
        )
    store = backend.from_url(parsed)
    if not isinstance(store, EventLog):
        raise TypeError(
            f"store URL {url!r}: {backend!r}.from_url returned {type(store).__name__}, "
            f"not an EventLog"
        )
    return store
