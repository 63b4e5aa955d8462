"""What the differential tests of the fast paths share: their hypothesis settings and
the gateway chain they all check first (the benchmark's, with a second denied tool)."""

from __future__ import annotations

from hypothesis import HealthCheck, settings

from agui_pipes import StreamTransformer
from agui_pipes.transformers import (
    ExpandChunks,
    FilterToolCalls,
    SubagentVisibility,
    ToolResultToState,
    Verify,
)


def differential_settings(max_examples: int) -> settings:
    """Whole generated streams per example: no deadline, big inputs expected."""
    return settings(
        max_examples=max_examples,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )


def gateway_stages() -> list[StreamTransformer]:
    return [
        ExpandChunks(),
        Verify(profile="consumer"),
        FilterToolCalls.deny(["internal_*", "search"]),
        SubagentVisibility.inline(),
        ToolResultToState.delta("update_items"),
    ]
