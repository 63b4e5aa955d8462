"""What the ``opentelemetry`` stage needs from OpenTelemetry, and its usage arithmetic.

OpenTelemetry is an optional extra, so nothing here imports it at module
level: ``require_opentelemetry`` is called by the stage's constructor and
turns a missing package into one error naming the extra to install.
Instruments and tracers are created once per provider and shared by every
run, because a gateway builds a stage per request and creating nine
instruments per run would cost more than the run's spans.
"""

from __future__ import annotations

import importlib.util
import threading
import weakref
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from ag_ui.core import TokenUsage

from .._version import __version__

if TYPE_CHECKING:
    from opentelemetry.metrics import (
        CallbackOptions,
        Counter,
        Histogram,
        MeterProvider,
        Observation,
    )
    from opentelemetry.trace import Tracer, TracerProvider

__all__ = [
    "INSTALL_HINT",
    "EventTotals",
    "Instruments",
    "instruments_for",
    "merge_usage",
    "require_opentelemetry",
    "tracer_for",
    "usage_attributes",
    "usage_from_metadata",
]

INSTALL_HINT = "pip install 'agui-pipes[otel]'"
_SCOPE = "agui_pipes"


def require_opentelemetry() -> None:
    """Raise one clear ``ImportError`` when the API or the SDK is missing."""
    missing = [
        name
        for name in ("opentelemetry.trace", "opentelemetry.metrics", "opentelemetry.sdk")
        if _absent(name)
    ]
    if missing:
        raise ImportError(
            "the opentelemetry stage needs OpenTelemetry (opentelemetry-api and "
            f"opentelemetry-sdk), and {', '.join(missing)} cannot be imported; install the "
            f"extra: {INSTALL_HINT}"
        )


def _absent(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is None
    except (ImportError, ValueError):
        return True


class EventTotals:
    """Events seen so far, by agent name and type, read by the ``agui.events`` callback.

    The events metric is an observable counter: stages add their per-run
    counts here (a few dict updates per run) and the SDK reads the totals when
    it collects, so counting costs no SDK call per event, nor per event type
    per run.
    """

    __slots__ = ("_lock", "_totals")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._totals: dict[tuple[str | None, str], int] = {}

    def add(self, agent_name: str | None, counts: dict[str, int]) -> None:
        with self._lock:
            totals = self._totals
            for event_type, count in counts.items():
                key = (agent_name, event_type)
                totals[key] = totals.get(key, 0) + count

    def observe(self, _options: CallbackOptions) -> Iterable[Observation]:
        from opentelemetry.metrics import Observation

        with self._lock:
            items = list(self._totals.items())
        for (agent_name, event_type), total in items:
            attributes = {"agui.event.type": event_type}
            if agent_name is not None:
                attributes["gen_ai.agent.name"] = agent_name
            yield Observation(total, attributes)


@dataclass(frozen=True)
class Instruments:
    """The stage's metrics (see docs/observability.md for names, units and attributes)."""

    runs_started: Counter
    runs_finished: Counter
    runs_errored: Counter
    runs_incomplete: Counter
    events: EventTotals
    tool_calls: Counter
    tokens: Counter
    time_to_first_event: Histogram
    run_duration: Histogram


_V = TypeVar("_V")
_LOCK = threading.Lock()
_INSTRUMENTS: weakref.WeakKeyDictionary[Any, Instruments] = weakref.WeakKeyDictionary()
_TRACERS: weakref.WeakKeyDictionary[Any, Tracer] = weakref.WeakKeyDictionary()
# Weak: a provider that is shut down and dropped (a test's, a reloaded app's) goes.


def instruments_for(provider: MeterProvider | None) -> Instruments:
    """The instruments of ``provider`` (None: the global meter provider), created once."""
    from opentelemetry import metrics

    if provider is None:
        provider = metrics.get_meter_provider()
    cached = _cached(_INSTRUMENTS, provider)
    if cached is not None:
        return cached
    with _LOCK:
        meter = provider.get_meter(_SCOPE, __version__)
        events = EventTotals()
        meter.create_observable_counter(
            "agui.events",
            callbacks=[events.observe],
            unit="{event}",
            description="Events seen, by type.",
        )
        made = Instruments(
            runs_started=meter.create_counter(
                "agui.runs.started", unit="{run}", description="Runs that started."
            ),
            runs_finished=meter.create_counter(
                "agui.runs.finished",
                unit="{run}",
                description="Runs that ended with RUN_FINISHED, by outcome.",
            ),
            runs_errored=meter.create_counter(
                "agui.runs.errored",
                unit="{run}",
                description="Runs that ended with RUN_ERROR, by error code.",
            ),
            runs_incomplete=meter.create_counter(
                "agui.runs.incomplete",
                unit="{run}",
                description="Runs whose stream ended or was abandoned with the run still open.",
            ),
            events=events,
            tool_calls=meter.create_counter(
                "agui.tool_calls", unit="{call}", description="Tool calls started, by tool name."
            ),
            tokens=meter.create_counter(
                "agui.tokens",
                unit="{token}",
                description="Tokens reported in the usage of run terminals, by kind.",
            ),
            time_to_first_event=meter.create_histogram(
                "agui.run.time_to_first_event",
                unit="s",
                description="From RUN_STARTED to the next event of the run.",
            ),
            run_duration=meter.create_histogram(
                "agui.run.duration",
                unit="s",
                description="From RUN_STARTED to the event that ended the run.",
            ),
        )
        _remember(_INSTRUMENTS, provider, made)
        return made


def tracer_for(provider: TracerProvider | None) -> Tracer:
    """The stage's tracer from ``provider`` (None: the global tracer provider), made once."""
    from opentelemetry import trace

    if provider is None:
        provider = trace.get_tracer_provider()
    cached_tracer = _cached(_TRACERS, provider)
    if cached_tracer is not None:
        return cached_tracer
    with _LOCK:
        tracer = provider.get_tracer(_SCOPE, __version__)
        _remember(_TRACERS, provider, tracer)
        return tracer


def _cached(cache: weakref.WeakKeyDictionary[Any, _V], provider: object) -> _V | None:
    try:
        return cache.get(provider)
    except TypeError:  # a provider that cannot be weakly referenced: made per stage
        return None


def _remember(cache: weakref.WeakKeyDictionary[Any, _V], provider: object, value: _V) -> None:
    try:
        cache[provider] = value
    except TypeError:
        pass


# -- usage ------------------------------------------------------------------------

_COUNTS = (
    "input_tokens",
    "output_tokens",
    "total_tokens",
    "reasoning_tokens",
    "cached_input_tokens",
    "cache_write_input_tokens",
)

_ATTRIBUTE_OF = {
    "input_tokens": "gen_ai.usage.input_tokens",
    "output_tokens": "gen_ai.usage.output_tokens",
    "reasoning_tokens": "gen_ai.usage.reasoning.output_tokens",
    "cached_input_tokens": "gen_ai.usage.cache_read.input_tokens",
    "cache_write_input_tokens": "gen_ai.usage.cache_creation.input_tokens",
    "total_tokens": "agui.usage.total_tokens",
}

TOKEN_TYPE_OF = {
    "input_tokens": "input",
    "output_tokens": "output",
    "reasoning_tokens": "reasoning",
    "cached_input_tokens": "cache_read",
    "cache_write_input_tokens": "cache_creation",
}
"""``gen_ai.token.type`` of each count the tokens metric records (totals are derived)."""


def merge_usage(*groups: Iterable[TokenUsage]) -> list[TokenUsage]:
    """Sum usage entries per (provider, model), in first-seen order.

    A count absent from every entry of a key stays absent: the 1.0 field says
    absent means unknown, and a zero would claim a measurement nobody made.
    """
    merged: dict[tuple[str | None, str | None], dict[str, Any]] = {}
    for group in groups:
        for entry in group:
            key = (entry.provider, entry.model)
            into = merged.setdefault(key, {"provider": entry.provider, "model": entry.model})
            for name in _COUNTS:
                value = getattr(entry, name)
                if value is not None:
                    into[name] = into.get(name, 0) + value
    return [TokenUsage.model_validate(fields) for fields in merged.values()]


def usage_attributes(usage: Sequence[TokenUsage]) -> dict[str, Any]:
    """Span attributes for ``usage``: counts summed over entries, provider and model if one."""
    attributes: dict[str, Any] = {}
    for name in _COUNTS:
        values = [v for entry in usage if (v := getattr(entry, name)) is not None]
        if values:
            attributes[_ATTRIBUTE_OF[name]] = sum(values)
    providers = {entry.provider for entry in usage if entry.provider is not None}
    models = {entry.model for entry in usage if entry.model is not None}
    if len(providers) == 1:
        attributes["gen_ai.provider.name"] = providers.pop()
    if len(models) == 1:
        attributes["gen_ai.response.model"] = models.pop()
    return attributes


def usage_from_metadata(metadata: Any) -> list[TokenUsage] | None:
    """A subagent's ``metadata.usage`` (TokenUsage[] in wire form), or None when absent or
    malformed (a producer's bookkeeping mistake must not end the run it describes)."""
    if not isinstance(metadata, dict):
        return None
    raw = metadata.get("usage")
    if not isinstance(raw, list):
        return None
    try:
        return [TokenUsage.model_validate(entry) for entry in raw]
    except ValueError:
        return None
