"""aiostream integration: run a chain as a pipe operator.

Optional (``pip install 'agui-pipes[aiostream]'``): aiostream is GPL-3.0 and
asyncio-only, so agui_pipes never imports it unless you import this module.

    from aiostream import pipe, stream
    from agui_pipes.aiostream import transform

    xs = stream.iterate(events) | transform.pipe(ExpandChunks() | Verify()) | pipe.take(10)
    async with xs.stream() as streamer:
        async for event in streamer: ...

``transform`` takes a chain (or any stage, or a ``ChainFactory``); every
*stream* built from the pipeline gets its own fresh copy of the stages, so a
pipeline object can be iterated twice without sharing per-run state. Chains
containing a ``StreamOperator`` are not supported here (operators need a task
group that aiostream's operator shape cannot own); use ``chain.apply``.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator, Callable

from ag_ui.core import BaseEvent

try:
    from aiostream import pipable_operator, streamcontext
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "agui_pipes.aiostream needs the optional aiostream package: "
        "pip install 'agui-pipes[aiostream]'"
    ) from exc

from ._lazy import public_dir
from ._pipeline.chain import TransformerChain
from ._pipeline.transformer import Stage, StreamOperator

__all__ = ["transform"]
__dir__ = public_dir(__all__)


def _fresh_chain(stages: Stage | Callable[[], TransformerChain]) -> TransformerChain:
    if isinstance(stages, TransformerChain):
        return stages.fresh()
    if isinstance(stages, Stage):
        return TransformerChain([stages.fresh()])
    built = stages()
    if not isinstance(built, TransformerChain):
        raise TypeError(
            f"transform() expected a stage, a chain or a chain factory; the factory returned "
            f"{type(built).__name__}"
        )
    return built


@pipable_operator
async def transform(
    source: AsyncIterable[BaseEvent], stages: Stage | Callable[[], TransformerChain]
) -> AsyncIterator[BaseEvent]:
    """Apply ``stages`` (a chain, a stage or a chain factory) to an aiostream stream."""
    chain = _fresh_chain(stages)
    if any(isinstance(s, StreamOperator) for s in chain.stages):
        raise TypeError(
            "chains with a StreamOperator cannot run as an aiostream operator; use "
            "`async with chain.apply(source) as events`"
        )
    async with streamcontext(source) as streamer:
        output = chain.apply(streamer)
        try:
            async for event in output:
                yield event
        finally:
            await output.aclose()
