"""The OpenTelemetry SDK's in-memory exporters, and readable views of what they caught."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from agui_pipes.transformers import OpenTelemetry


class Recorder:
    """A tracer and a meter provider of their own, exporting to memory.

    ``clock`` ticks one microsecond per call, so events without timestamps get
    distinct, ordered times and an outline sorted by start time is stable.
    """

    def __init__(self) -> None:
        self.spans = InMemorySpanExporter()
        self.tracer_provider = TracerProvider()
        self.tracer_provider.add_span_processor(SimpleSpanProcessor(self.spans))
        self.reader = InMemoryMetricReader()
        self.meter_provider = MeterProvider(metric_readers=[self.reader])
        ticks = itertools.count(1_700_000_000_000_000_000, 1_000)
        self.clock: Callable[[], int] = ticks.__next__

    def stage(self, **options: Any) -> OpenTelemetry:
        return OpenTelemetry(
            tracer_provider=self.tracer_provider,
            meter_provider=self.meter_provider,
            clock=self.clock,
            **options,
        )

    def finished(self) -> list[ReadableSpan]:
        return sorted(self.spans.get_finished_spans(), key=lambda s: s.start_time or 0)

    def named(self, name: str) -> ReadableSpan:
        found = [s for s in self.finished() if s.name == name]
        assert len(found) == 1, f"{len(found)} spans named {name!r}: {self.outline()}"
        return found[0]

    def outline(self, spans: list[ReadableSpan] | None = None) -> list[str]:
        """Each span as its name indented by its depth, in start order."""
        spans = self.finished() if spans is None else spans
        by_id = {s.context.span_id: s for s in spans if s.context is not None}

        def depth(span: ReadableSpan) -> int:
            d = 0
            while span.parent is not None and span.parent.span_id in by_id:
                span = by_id[span.parent.span_id]
                d += 1
            return d

        return ["  " * depth(s) + s.name for s in spans]

    def metric(self, name: str) -> dict[frozenset[tuple[str, Any]], Any]:
        """Data points of metric ``name``: attributes -> value (sum) or count (histogram)."""
        data = self.reader.get_metrics_data()
        points: dict[frozenset[tuple[str, Any]], Any] = {}
        if data is None:
            return points
        for resource in data.resource_metrics:
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    if metric.name != name:
                        continue
                    for point in metric.data.data_points:
                        key = frozenset(dict(point.attributes or {}).items())
                        value = getattr(point, "value", None)
                        points[key] = value if value is not None else point.count
        return points


def parent_of(child: ReadableSpan, parent: ReadableSpan) -> bool:
    assert child.parent is not None and parent.context is not None
    return child.parent.span_id == parent.context.span_id
