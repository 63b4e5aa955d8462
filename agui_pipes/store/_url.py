"""``StoreURL``: a store URL read once, for ``open_store`` and every backend's ``from_url``.

Why one parsed object: retention (``max_age``, ``max_runs_per_thread``,
``max_runs``, ``retention_interval``) applies to every backend, so it is read
here, once; a backend gets what is left of the query string and takes its own
options from it with the same checks and the same messages (``number``,
``no_more``), whether it is built in or a plugin.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TypeVar
from urllib.parse import SplitResult, parse_qsl, urlsplit

from ._retention import Retention

__all__ = ["EXAMPLES", "RETENTION_OPTIONS", "StoreURL"]

_N = TypeVar("_N", int, float)

EXAMPLES = (
    "accepted: 'memory:', 'sqlite:///runs.db' (relative path), 'sqlite:////var/lib/runs.db' "
    "(absolute path), 'redis://localhost:6379/0' (or rediss:// for TLS), "
    "'postgresql://user@localhost:5432/db'; options go in the "
    "query string, e.g. 'sqlite:///runs.db?max_age=86400&max_runs_per_thread=50'"
)
"""The accepted forms and an example, the tail of every message about a bad URL."""

RETENTION_OPTIONS = {
    "max_age": float,
    "max_runs_per_thread": int,
    "max_runs": int,
    "retention_interval": float,
}
"""The query options every backend takes: :class:`Retention`'s fields."""


@dataclass
class StoreURL:
    """A store URL split into what a backend needs to build its event log.

    * ``text`` — the URL as given (for messages: ``store URL {text!r}: ...``);
    * ``scheme`` — lowercased, what picked the backend;
    * ``parts`` — ``urllib.parse.urlsplit`` of it;
    * ``options`` — the query options not read yet: a backend pops its own
      (``number`` does) and refuses the rest (``no_more``);
    * ``retention`` — the ``retention`` argument with the URL's retention
      options applied.
    """

    text: str
    scheme: str
    parts: SplitResult
    options: dict[str, str] = field(default_factory=dict)
    retention: Retention = field(default_factory=Retention)

    @classmethod
    def parse(cls, url: str, retention: Retention | None = None) -> StoreURL:
        """Read ``url``; a ValueError naming it for an unparsable URL or a bad retention option."""
        scheme = url.partition(":")[0].lower()
        try:
            parts = urlsplit(url)
        except ValueError as exc:
            raise ValueError(f"unparsable store URL {url!r}: {exc}; {EXAMPLES}") from None
        read = cls(url, scheme, parts, dict(parse_qsl(parts.query, keep_blank_values=True)))
        read.retention = read._retention(retention or Retention())
        return read

    def number(self, name: str, kind: type[_N], default: _N, zero: bool = False) -> _N:
        """Take option ``name``: an ``int`` or ``float`` ``kind``, positive (>= 0 with ``zero``)."""
        text = self.options.pop(name, None)
        if text is None:
            return default
        try:
            value = kind(text)
        except ValueError:
            what = "an integer" if kind is int else "a number"
            raise ValueError(
                f"store URL {self.text!r}: option {name}={text!r} is not {what}; {EXAMPLES}"
            ) from None
        if not (value >= 0 if zero else value > 0):
            bound = "0 or more" if zero else "positive"
            raise ValueError(f"store URL {self.text!r}: option {name}={text!r} must be {bound}")
        return value

    def no_more(self) -> None:
        """Refuse the options no one took (a typo must not be ignored silently)."""
        if self.options:
            raise ValueError(
                f"store URL {self.text!r}: unknown option(s) {', '.join(sorted(self.options))}; "
                f"{EXAMPLES}"
            )

    def _retention(self, base: Retention) -> Retention:
        values: dict[str, float | int | None] = {
            "max_age": base.max_age,
            "max_runs_per_thread": base.max_runs_per_thread,
            "max_runs": base.max_runs,
            "interval": base.interval,
        }
        for name, kind in RETENTION_OPTIONS.items():
            if name in self.options:
                number = self.number(name, kind, 0, zero=name == "retention_interval")
                values["interval" if name == "retention_interval" else name] = kind(number)
        per_thread, runs = values["max_runs_per_thread"], values["max_runs"]
        return Retention(
            max_age=values["max_age"],
            max_runs_per_thread=None if per_thread is None else int(per_thread),
            max_runs=None if runs is None else int(runs),
            interval=float(values["interval"] or 0.0),
        )
