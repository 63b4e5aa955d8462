"""agui_pipes — build, declare and test pipelines over AG-UI event streams.

The event type is the official ``ag_ui.core`` model family. A pipeline is a
``TransformerChain`` of stages (``StreamTransformer`` and friends) applied to
any async source of events.
"""

from ._chain import ChainFactory, EventStream, TransformerChain
from ._errors import AguiPipesError, StageError, StreamRejected
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
from ._version import __version__
from .codecs import Decoded, DecodeError, DecodeWarning, decode, decode_all, decode_many
from .config import ConfigError, chain_schema, load_chain
from .consume import Consumer, RunInfo, RunResult, consume, fold
from .driver import CancelToken, Error, RunContext, RunOutcome, run
from .events import Event
from .verify import ProtocolViolation, Rule, VerificationError, Verifier

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
    "Error",
    "Event",
    "EventStream",
    "FunctionTransformer",
    "LimitExceeded",
    "Limits",
    "ProtocolViolation",
    "Rule",
    "RunContext",
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
    "consume",
    "decode",
    "decode_all",
    "decode_many",
    "fold",
    "load_chain",
    "run",
    "using_limits",
]
