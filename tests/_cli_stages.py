"""Stages that chain files in the CLI tests name with ``type: tests._cli_stages:<name>``."""

from __future__ import annotations

from collections.abc import Iterable

from ag_ui.core import BaseEvent, CustomEvent, TextMessageContentEvent

from agui_pipes import AsyncStreamTransformer, StreamTransformer


class AsyncPass(AsyncStreamTransformer):
    """Passes everything; being async, it sends ``agui-pipes run`` down ``chain.apply``."""


class Boom(StreamTransformer):
    """Fails on a text delta ``boom`` (a stage bug, for the error paths)."""

    def transform(self, event: BaseEvent) -> Iterable[BaseEvent]:
        if isinstance(event, TextMessageContentEvent) and event.delta == "boom":
            raise ValueError("Boom cannot take a boom (expected by the test)")
        return (event,)


class NanRatio(StreamTransformer):
    """Adds a CUSTOM event holding NaN after a text delta ``nan`` (a value JSON cannot carry)."""

    def transform(self, event: BaseEvent) -> Iterable[BaseEvent]:
        if isinstance(event, TextMessageContentEvent) and event.delta == "nan":
            return (event, CustomEvent(name="ratio", value={"r": float("nan")}))
        return (event,)
