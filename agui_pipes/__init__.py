"""agui_pipes — build, declare and test pipelines over AG-UI event streams.

The event type is the official ``ag_ui.core`` model family. A pipeline is a
``TransformerChain`` of stages (``StreamTransformer`` and friends) applied to
any async source of events.

Every name below is imported on first use (PEP 562), so ``import agui_pipes``
stays cheap: what a name needs (pydantic, the config loader, the driver) is
loaded when the name is read, not before. The top level holds what most code
needs; each name's full family lives in its subpackage or module
(``agui_pipes.config``, ``agui_pipes.codecs``, ``agui_pipes.driver``,
``agui_pipes.transformers``, ``agui_pipes.verify``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._version import __version__

if TYPE_CHECKING:
    # The names type checkers see; `_EXPORTS` below is what runs (a test keeps them equal).
    from ._consumer.consume import Consumer as Consumer
    from ._consumer.consume import RunInfo as RunInfo
    from ._consumer.consume import RunResult as RunResult
    from ._consumer.consume import consume as consume
    from ._consumer.consume import fold as fold
    from ._consumer.history import thread_history as thread_history
    from ._consumer.join import RunJoin as RunJoin
    from ._foundation.errors import AguiPipesError as AguiPipesError
    from ._foundation.errors import StageError as StageError
    from ._foundation.errors import StreamRejected as StreamRejected
    from ._foundation.json_patch import LimitExceeded as LimitExceeded
    from ._foundation.limits import Limits as Limits
    from ._foundation.limits_scope import using_limits as using_limits
    from ._pipeline.chain import ChainFactory as ChainFactory
    from ._pipeline.chain import EventStream as EventStream
    from ._pipeline.chain import TransformerChain as TransformerChain
    from ._pipeline.request_hooks import RequestRefused as RequestRefused
    from ._pipeline.transformer import AsyncStreamTransformer as AsyncStreamTransformer
    from ._pipeline.transformer import Condition as Condition
    from ._pipeline.transformer import FunctionTransformer as FunctionTransformer
    from ._pipeline.transformer import Stage as Stage
    from ._pipeline.transformer import StreamOperator as StreamOperator
    from ._pipeline.transformer import StreamTransformer as StreamTransformer
    from .codecs import DecodeError as DecodeError
    from .codecs import decode as decode
    from .driver import CancelToken as CancelToken
    from .driver import RunContext as RunContext
    from .driver import RunError as RunError
    from .driver import RunOutcome as RunOutcome
    from .driver import run as run
    from .verify import ProtocolViolation as ProtocolViolation
    from .verify import VerificationError as VerificationError
else:
    from ._lazy import attach as _attach

    _EXPORTS = {
        "ChainFactory": "._pipeline.chain",
        "EventStream": "._pipeline.chain",
        "TransformerChain": "._pipeline.chain",
        "RequestRefused": "._pipeline.request_hooks",
        "Consumer": "._consumer.consume",
        "RunInfo": "._consumer.consume",
        "RunResult": "._consumer.consume",
        "consume": "._consumer.consume",
        "fold": "._consumer.consume",
        "AguiPipesError": "._foundation.errors",
        "StageError": "._foundation.errors",
        "StreamRejected": "._foundation.errors",
        "thread_history": "._consumer.history",
        "RunJoin": "._consumer.join",
        "Limits": "._foundation.limits",
        "using_limits": "._foundation.limits_scope",
        "LimitExceeded": "._foundation.json_patch",
        "AsyncStreamTransformer": "._pipeline.transformer",
        "Condition": "._pipeline.transformer",
        "FunctionTransformer": "._pipeline.transformer",
        "Stage": "._pipeline.transformer",
        "StreamOperator": "._pipeline.transformer",
        "StreamTransformer": "._pipeline.transformer",
        "DecodeError": ".codecs",
        "decode": ".codecs",
        "CancelToken": ".driver",
        "RunContext": ".driver",
        "RunError": ".driver",
        "RunOutcome": ".driver",
        "run": ".driver",
        "ProtocolViolation": ".verify",
        "VerificationError": ".verify",
    }
    __getattr__, __dir__ = _attach(__name__, _EXPORTS)
    __all__ = ["__version__", *_EXPORTS]
