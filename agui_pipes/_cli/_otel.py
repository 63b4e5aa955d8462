"""OpenTelemetry for the CLI: SDK setup from ``OTEL_*`` (``serve --otel``), a span tree
(``demo --otel``), and a chain with the ``opentelemetry`` stage appended.

The SDK ships no "configure from the environment" entry point of its own
(that is the job of the separate distro package), so ``serve --otel``
reads the standard variables it needs itself: ``OTEL_SDK_DISABLED``,
``OTEL_TRACES_EXPORTER`` /
``OTEL_METRICS_EXPORTER`` (``otlp`` by default, ``console``, ``none``) and
``OTEL_EXPORTER_OTLP_PROTOCOL``; the exporters, the resource
(``OTEL_SERVICE_NAME``, ``OTEL_RESOURCE_ATTRIBUTES``) and the batch and
export intervals read theirs. OTLP falls back to the console, saying so,
when no OTLP exporter package is installed.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from .._pipeline.chain import TransformerChain

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import ReadableSpan

__all__ = ["SetupError", "configure_from_environment", "span_tree", "with_trace"]

_EXPORTERS = ("otlp", "console", "none")


class SetupError(Exception):
    """OpenTelemetry cannot be set up as asked (message says what to install or fix)."""


def _require_sdk() -> None:
    from .._stagekit.telemetry import require_opentelemetry

    try:
        require_opentelemetry()
    except ImportError as exc:
        raise SetupError(str(exc)) from None


def _choice(variable: str) -> str:
    value = os.environ.get(variable, "otlp").strip().lower() or "otlp"
    first = value.split(",")[0].strip()
    if first not in _EXPORTERS:
        raise SetupError(
            f"{variable}={value!r} is not supported here: use one of {', '.join(_EXPORTERS)}"
        )
    return first


def _otlp(kind: str) -> Any | None:
    """The OTLP exporter class for ``kind`` ("trace" or "metric") per the protocol
    variable, or None when that exporter package is not installed."""
    protocol = os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf").strip().lower()
    transport = "grpc" if protocol == "grpc" else "http"
    module = f"opentelemetry.exporter.otlp.proto.{transport}.{kind}_exporter"
    name = "OTLPSpanExporter" if kind == "trace" else "OTLPMetricExporter"
    try:
        imported = __import__(module, fromlist=[name])
    except ImportError:
        return None
    return getattr(imported, name)


def configure_from_environment(warn: Callable[[str], None]) -> str:
    """Install global tracer and meter providers configured from ``OTEL_*``.

    Returns where traces go (for the startup log line); ``warn`` is told when
    OTLP was asked for but is not installed.
    """
    _require_sdk()
    if os.environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        # The standard off switch: the stage still runs, on the API's no-op providers.
        return "nowhere (OTEL_SDK_DISABLED=true)"
    from opentelemetry import metrics, trace
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import (
        ConsoleMetricExporter,
        MetricReader,
        PeriodicExportingMetricReader,
    )
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter

    resource = Resource.create()
    traces, metric_kind = _choice("OTEL_TRACES_EXPORTER"), _choice("OTEL_METRICS_EXPORTER")
    hint = (
        "pip install opentelemetry-exporter-otlp-proto-http (or -grpc with "
        "OTEL_EXPORTER_OTLP_PROTOCOL=grpc)"
    )

    tracer_provider = TracerProvider(resource=resource)
    where = "nowhere (OTEL_TRACES_EXPORTER=none)"
    if traces != "none":
        exporter_class = _otlp("trace") if traces == "otlp" else None
        if traces == "otlp" and exporter_class is None:
            warn(f"OTLP trace exporter not installed, printing spans instead: {hint}")
        if exporter_class is not None:
            tracer_provider.add_span_processor(BatchSpanProcessor(exporter_class()))
            endpoint = os.environ.get(
                "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")
            )
            where = f"OTLP ({endpoint or 'default endpoint'})"
        else:
            tracer_provider.add_span_processor(BatchSpanProcessor(ConsoleSpanExporter()))
            where = "the console"
    trace.set_tracer_provider(tracer_provider)

    readers: list[MetricReader] = []
    if metric_kind != "none":
        metric_class = _otlp("metric") if metric_kind == "otlp" else None
        if metric_kind == "otlp" and metric_class is None:
            warn(f"OTLP metric exporter not installed, printing metrics instead: {hint}")
        exporter = metric_class() if metric_class is not None else ConsoleMetricExporter()
        readers.append(PeriodicExportingMetricReader(exporter))
    metrics.set_meter_provider(MeterProvider(resource=resource, metric_readers=readers))
    return where


def with_trace(
    factory: Callable[[], TransformerChain] | None, agent_name: str | None = None
) -> Callable[[], TransformerChain]:
    """A chain factory like ``factory`` with the ``opentelemetry`` stage last, unless the
    chain already has one (then it is where the chain's author put it)."""
    _require_sdk()
    from ..transformers import OpenTelemetry

    def build() -> TransformerChain:
        chain = factory() if factory is not None else TransformerChain()
        if any(isinstance(stage, OpenTelemetry) for stage in chain.stages):
            return chain
        return TransformerChain([*chain.stages, OpenTelemetry(agent_name=agent_name)])

    return build


def span_tree(spans: Sequence[ReadableSpan]) -> list[str]:
    """The spans as an indented tree, children in start order, with what matters most."""
    by_parent: dict[int | None, list[ReadableSpan]] = {}
    ids = {s.context.span_id for s in spans if s.context is not None}
    for span in sorted(spans, key=lambda s: s.start_time or 0):
        parent = span.parent.span_id if span.parent is not None else None
        by_parent.setdefault(parent if parent in ids else None, []).append(span)
    lines: list[str] = []

    def walk(parent: int | None, prefix: str) -> None:
        children = by_parent.get(parent, [])
        for i, span in enumerate(children):
            last = i == len(children) - 1
            branch = "" if parent is None else ("└─ " if last else "├─ ")
            lines.append(f"{prefix}{branch}{span.name}{_details(span)}")
            inner = prefix if parent is None else prefix + ("   " if last else "│  ")
            if span.context is not None:
                walk(span.context.span_id, inner)

    walk(None, "")
    return lines


_SHOWN = (
    "gen_ai.tool.call.id",
    "agui.subagent.run_id",
    "agui.run.outcome",
    "agui.subagent.outcome",
    "error.type",
    "agui.closed_by",
    "gen_ai.usage.input_tokens",
    "gen_ai.usage.output_tokens",
)


def _details(span: ReadableSpan) -> str:
    attributes = dict(span.attributes or {})
    parts = [f"{key}={attributes[key]}" for key in _SHOWN if key in attributes]
    if span.start_time is not None and span.end_time is not None:
        parts.insert(0, f"{(span.end_time - span.start_time) / 1e6:.1f} ms")
    if span.events:
        parts.append(f"{len(span.events)} event{'s' if len(span.events) != 1 else ''}")
    return f"  ({', '.join(parts)})" if parts else ""
