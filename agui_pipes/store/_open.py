"""``open_store(url)``: one string picks and configures the event log backend.

Why a URL: the same setting travels through a CLI flag (``--store``), an
environment variable and a config file, and it reads the way other tools
name databases. Retention and backend tuning ride in the query string, so a
deployment changes them without code.
"""

from __future__ import annotations

from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from ._base import EventLog, Retention

__all__ = ["open_store"]

_EXAMPLES = (
    "accepted: 'memory:', 'sqlite:///runs.db' (relative path), 'sqlite:////var/lib/runs.db' "
    "(absolute path), 'redis://localhost:6379/0' (or rediss:// for TLS); options go in the "
    "query string, e.g. 'sqlite:///runs.db?max_age=86400&max_runs_per_thread=50'"
)
_RETENTION = {
    "max_age": float,
    "max_runs_per_thread": int,
    "max_runs": int,
    "retention_interval": float,
}


def open_store(url: str, *, retention: Retention | None = None) -> EventLog:
    """The event log ``url`` names, not yet opened (``async with`` it, or ``await .open()``).

    Nothing is connected here, so a bad URL fails at configuration time
    with a ValueError naming the URL, the accepted forms and an example.

    Query options, for every backend: ``max_age`` (seconds),
    ``max_runs_per_thread``, ``max_runs``, ``retention_interval`` (seconds)
    — see :class:`Retention`; they override ``retention``. For SQLite:
    ``poll`` (seconds between checks for other processes' appends, 0.1).
    For Redis: ``prefix`` (key prefix, ``agui:``), ``block`` (seconds one
    ``XREAD BLOCK`` waits, 5); any other option goes to redis-py.
    """
    if not isinstance(url, str):
        raise TypeError(f"open_store needs a URL string, got {type(url).__name__}: {url!r}")
    scheme, _, _ = url.partition(":")
    scheme = scheme.lower()
    try:
        parts = urlsplit(url)
    except ValueError as exc:
        raise ValueError(f"unparsable store URL {url!r}: {exc}; {_EXAMPLES}") from None
    options = dict(parse_qsl(parts.query, keep_blank_values=True))
    retention = _retention(url, options, retention or Retention())
    if scheme == "memory":
        from .memory import MemoryEventLog

        if parts.netloc or parts.path.strip("/") or options:
            raise ValueError(
                f"store URL {url!r}: 'memory:' takes no path and no options other than "
                f"retention ({', '.join(_RETENTION)}); {_EXAMPLES}"
            )
        return MemoryEventLog(retention)
    if scheme == "sqlite":
        from .sqlite import SQLiteEventLog

        if not url.lower().startswith("sqlite:///") or parts.netloc:
            raise ValueError(
                f"store URL {url!r}: a SQLite URL is 'sqlite:///' followed by the file's path "
                f"(three slashes, then the path; a fourth for an absolute one); {_EXAMPLES}"
            )
        path = parts.path[1:]
        if not path:
            raise ValueError(f"store URL {url!r} names no database file; {_EXAMPLES}")
        poll = _number(url, options, "poll", float, 0.1)
        _no_more(url, options)
        return SQLiteEventLog(path, retention, poll_interval=poll)
    if scheme in ("redis", "rediss"):
        from .redis import RedisEventLog

        prefix = options.pop("prefix", "agui:")
        block = _number(url, options, "block", float, 5.0)
        if not parts.hostname and not parts.path.strip("/"):
            raise ValueError(f"store URL {url!r} names no Redis server; {_EXAMPLES}")
        client_url = urlunsplit(parts._replace(query=urlencode(options)))
        return RedisEventLog(client_url, retention, prefix=prefix, block=block)
    raise ValueError(f"unknown store URL scheme in {url!r}; {_EXAMPLES}")


def _number(
    url: str, options: dict[str, str], name: str, kind: type, default: float, zero: bool = False
) -> float:
    text = options.pop(name, None)
    if text is None:
        return default
    try:
        value = kind(text)
    except ValueError:
        what = "an integer" if kind is int else "a number"
        raise ValueError(
            f"store URL {url!r}: option {name}={text!r} is not {what}; {_EXAMPLES}"
        ) from None
    if not (value >= 0 if zero else value > 0):
        bound = "0 or more" if zero else "positive"
        raise ValueError(f"store URL {url!r}: option {name}={text!r} must be {bound}")
    return float(value)


def _retention(url: str, options: dict[str, str], base: Retention) -> Retention:
    values: dict[str, float | int | None] = {
        "max_age": base.max_age,
        "max_runs_per_thread": base.max_runs_per_thread,
        "max_runs": base.max_runs,
        "interval": base.interval,
    }
    for name, kind in _RETENTION.items():
        if name in options:
            number = _number(url, options, name, kind, 0, zero=name == "retention_interval")
            values["interval" if name == "retention_interval" else name] = kind(number)
    return Retention(
        max_age=values["max_age"],
        max_runs_per_thread=None if values["max_runs_per_thread"] is None
        else int(values["max_runs_per_thread"]),
        max_runs=None if values["max_runs"] is None else int(values["max_runs"]),
        interval=float(values["interval"] or 0.0),
    )


def _no_more(url: str, options: dict[str, str]) -> None:
    if options:
        raise ValueError(
            f"store URL {url!r}: unknown option(s) {', '.join(sorted(options))}; "
            f"{_EXAMPLES}"
        )
