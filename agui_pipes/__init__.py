"""agui_pipes — build, declare and test pipelines over AG-UI event streams.

The event type is the official ``ag_ui.core`` model family. A pipeline is a
``TransformerChain`` of stages (``StreamTransformer`` and friends) applied to
any async source of events.

Every name below is imported on first use (PEP 562), so ``import agui_pipes``
stays cheap: what a name needs (pydantic, the config loader, the driver) is
loaded when the name is read, not before.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._lazy import attach
from ._version import __version__

if TYPE_CHECKING:
    from ._foundation.errors import AguiPipesError, StageError, StreamRejected
    from ._foundation.json_patch import LimitExceeded
    from ._foundation.limits import Limits
    from ._foundation.limits_scope import using_limits
    from ._pipeline.chain import ChainFactory, EventStream, TransformerChain
    from ._pipeline.transformer import (
        AsyncStreamTransformer,
        Condition,
        FunctionTransformer,
        Stage,
        StreamOperator,
        StreamTransformer,
        Transform,
    )
    from ._protocol.consume import Consumer, RunInfo, RunResult, consume, fold
    from ._protocol.history import thread_history
    from .codecs import Decoded, DecodeError, DecodeWarning, decode, decode_all, decode_many
    from .config import ConfigError, chain_schema, load_chain
    from .driver import CancelToken, RunContext, RunError, RunOutcome, run
    from .events import Event
    from .transformers.compact import compact
    from .transformers.repair import Repair, RepairFix, RepairLimitExceeded, RepairReport
    from .verify import ProtocolViolation, Rule, VerificationError, Verifier

    Error = RunError
    """Deprecated: the 0.1 name of ``RunError``."""
else:
    __getattr__, __dir__ = attach(
        __name__,
        {
            "ChainFactory": "._pipeline.chain",
            "EventStream": "._pipeline.chain",
            "TransformerChain": "._pipeline.chain",
            "Consumer": "._protocol.consume",
            "RunInfo": "._protocol.consume",
            "RunResult": "._protocol.consume",
            "consume": "._protocol.consume",
            "fold": "._protocol.consume",
            "AguiPipesError": "._foundation.errors",
            "StageError": "._foundation.errors",
            "StreamRejected": "._foundation.errors",
            "thread_history": "._protocol.history",
            "Limits": "._foundation.limits",
            "using_limits": "._foundation.limits_scope",
            "LimitExceeded": "._foundation.json_patch",
            "AsyncStreamTransformer": "._pipeline.transformer",
            "Condition": "._pipeline.transformer",
            "FunctionTransformer": "._pipeline.transformer",
            "Stage": "._pipeline.transformer",
            "StreamOperator": "._pipeline.transformer",
            "StreamTransformer": "._pipeline.transformer",
            "Transform": "._pipeline.transformer",
            "ConfigError": ".config",
            "chain_schema": ".config",
            "load_chain": ".config",
            "Decoded": ".codecs",
            "DecodeError": ".codecs",
            "DecodeWarning": ".codecs",
            "decode": ".codecs",
            "decode_all": ".codecs",
            "decode_many": ".codecs",
            "CancelToken": ".driver",
            "RunContext": ".driver",
            "RunError": ".driver",
            "RunOutcome": ".driver",
            "run": ".driver",
            "Event": ".events",
            "compact": ".transformers.compact",
            "Repair": ".transformers.repair",
            "RepairFix": ".transformers.repair",
            "RepairLimitExceeded": ".transformers.repair",
            "RepairReport": ".transformers.repair",
            "ProtocolViolation": ".verify",
            "Rule": ".verify",
            "VerificationError": ".verify",
            "Verifier": ".verify",
        },
        deprecated={"Error": "RunError"},
    )

__all__ = [
    "AguiPipesError",
    "AsyncStreamTransformer",
    "CancelToken",
    "ChainFactory",
    "Condition",
    "ConfigError",
    "Consumer",
    "DecodeError",
    "DecodeWarning",
    "Decoded",
    "Event",
    "EventStream",
    "FunctionTransformer",
    "LimitExceeded",
    "Limits",
    "ProtocolViolation",
    "Repair",
    "RepairFix",
    "RepairLimitExceeded",
    "RepairReport",
    "Rule",
    "RunContext",
    "RunError",
    "RunInfo",
    "RunOutcome",
    "RunResult",
    "Stage",
    "StageError",
    "StreamOperator",
    "StreamRejected",
    "StreamTransformer",
    "Transform",
    "TransformerChain",
    "VerificationError",
    "Verifier",
    "__version__",
    "chain_schema",
    "compact",
    "consume",
    "decode",
    "decode_all",
    "decode_many",
    "fold",
    "load_chain",
    "run",
    "thread_history",
    "using_limits",
]
