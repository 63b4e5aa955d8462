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
    from ._chain import ChainFactory, EventStream, TransformerChain
    from ._consume import Consumer, RunInfo, RunResult, consume, fold
    from ._errors import AguiPipesError, StageError, StreamRejected
    from ._history import thread_history
    from ._limits import Limits
    from ._limits_scope import using_limits
    from ._patch import LimitExceeded
    from ._transformer import (
        AsyncStreamTransformer,
        Condition,
        FunctionTransformer,
        Stage,
        StreamOperator,
        StreamTransformer,
        Transform,
    )
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
            "ChainFactory": "._chain",
            "EventStream": "._chain",
            "TransformerChain": "._chain",
            "Consumer": "._consume",
            "RunInfo": "._consume",
            "RunResult": "._consume",
            "consume": "._consume",
            "fold": "._consume",
            "AguiPipesError": "._errors",
            "StageError": "._errors",
            "StreamRejected": "._errors",
            "thread_history": "._history",
            "Limits": "._limits",
            "using_limits": "._limits_scope",
            "LimitExceeded": "._patch",
            "AsyncStreamTransformer": "._transformer",
            "Condition": "._transformer",
            "FunctionTransformer": "._transformer",
            "Stage": "._transformer",
            "StreamOperator": "._transformer",
            "StreamTransformer": "._transformer",
            "Transform": "._transformer",
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
