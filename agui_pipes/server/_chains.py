"""The chains a server runs per request, built from its ``chain=`` and its options.

* ``as_chain_factory`` — the ``chain=`` argument as a factory called per request;
* ``compat_down_picker`` — the ``compat`` stage a request's protocol era needs;
* ``repair_stage`` — a fresh ``Repair`` with the request's ids;
* ``gateway_chain`` — what a gateway runs over each upstream run: chunk
  expansion first, the ``Repair`` after it when the gateway repairs, your
  chain, the consumer verification of what the client receives, and the
  compat stage after that (it checks 1.0). Stages the gateway would run twice
  are merged (``consumer_chain``), keeping the client's bytes and errors.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from ag_ui.core import RunAgentInput

from .._foundation.limits import Limits
from .._foundation.limits_scope import using_limits
from .._foundation.trace_context import using_trace_headers
from .._pipeline.chain import ChainFactory, TransformerChain
from .._pipeline.transformer import Stage
from ..transformers import ExpandChunks, Verify
from ._stats import RunStats, instrument
from ._streaming import Scope

__all__ = [
    "as_chain_factory",
    "chain_repr",
    "compat_down_picker",
    "consumer_chain",
    "gateway_chain",
    "repair_stage",
]


def as_chain_factory(chain: ChainFactory | TransformerChain | None) -> ChainFactory | None:
    """The ``chain=`` argument of a server app as a per-request factory.

    A plain chain is accepted for convenience, but its stages hold per-run
    state, so each request gets a ``fresh()`` copy rather than the object.
    """
    if chain is None:
        return None
    if isinstance(chain, TransformerChain):
        return chain.fresh
    if callable(chain):
        return chain
    raise TypeError(
        f"chain must be a chain factory (e.g. load_chain(...)) or a TransformerChain, got "
        f"{type(chain).__name__}"
    )


def compat_down_picker(
    enabled: bool, undeclared: str
) -> Callable[[RunAgentInput], list[Stage]] | None:
    """What ``compat_down=`` adds to a request's chain: its client's ``down`` stage, if any.

    None when disabled (the chain is then exactly what it was). ``undeclared``
    (the era served to a request without ``protocolVersion``) is checked here,
    at construction, so a typo fails the server's start rather than a request.
    """
    if not enabled:
        return None
    from ..transformers.compat import Compat, down_for_request

    try:
        Compat(direction="down", peer=undeclared)
    except ValueError as exc:
        raise ValueError(f"compat_undeclared: {exc}") from None

    def pick(run_input: RunAgentInput) -> list[Stage]:
        stage = down_for_request(run_input, undeclared=undeclared)
        return [] if stage is None else [stage]

    return pick


def gateway_chain(
    scope: Scope,
    run_input: RunAgentInput,
    stats: RunStats,
    *,
    factory: ChainFactory | None,
    limits: Limits,
    verify: bool,
    repair: bool,
    down: Callable[[RunAgentInput], list[Stage]] | None,
    log: logging.Logger,
) -> tuple[TransformerChain, Verify | None]:
    """The request's whole chain (instrumented when it is counted) and its final ``Verify``."""
    # Verification comes *after* your chain: it checks what the client
    # receives, and its messages can only name what the client sees.
    configured: list[Stage] = []
    if factory is not None:
        # The request's traceparent parents the spans of a tracing stage.
        with using_limits(limits), using_trace_headers(scope.get("headers", ())):
            configured.append(factory())
    stages, final = consumer_chain(TransformerChain(configured).stages, verify)
    if repair:
        stages.insert(1, repair_stage(run_input, stats))
    if down is not None:
        stages.extend(down(run_input))  # after Verify: it checks 1.0
    chain = TransformerChain(stages)
    if not chain.is_sync or log.isEnabledFor(logging.INFO):
        # The counters are for the INFO line only; on the relay path
        # they are a tenth of its work, so without that line the relay
        # counts only the source (``relay_frames``).
        chain = instrument(chain, stats)
    return chain, final


def consumer_chain(configured: Sequence[Stage], verify: bool) -> tuple[list[Stage], Verify | None]:
    """``ExpandChunks | <configured> | Verify``, each of the gateway's stages run once.

    Returns the stages and the gateway's own final ``Verify`` (None when it
    has none). Each merge keeps the client's bytes and errors as they were:

    * A chain starting with a plain ``ExpandChunks`` loses it: behind the
      gateway's, it never sees a chunk (expansion leaves none), so it never
      opens a lane, and it passes every event as it is.
    * A chain ending with a plain ``Verify`` of the consumer profile that
      raises and refuses a truncated run (what the gateway's is) keeps it and
      the gateway adds none: the gateway's would see the same events after
      it, in the same verifier state, so it could never raise first. Its
      violations were the chain's, withheld from the client, and still are.
      Any other policy (``warn`` passes violations, ``run_error`` rewrites
      the stream, ``allow_truncated`` skips the end check), another profile,
      a subclass, or a ``Verify`` with a stage after it is not a substitute.
    """
    stages = list(configured)
    if stages and _plain(stages[0], ExpandChunks):
        del stages[0]
    last = stages[-1] if stages else None
    final: Verify | None = None
    if verify and not (
        isinstance(last, Verify)
        and _plain(last, Verify)
        and last.enabled
        and last.on_violation == "raise"
        and not last.allow_truncated
        and last.verifier.profile == "consumer"
    ):
        final = Verify(profile="consumer", on_violation="raise")
    return [ExpandChunks(), *stages, *([final] if final is not None else [])], final


def repair_stage(run_input: RunAgentInput, stats: RunStats) -> Stage:
    """A fresh ``Repair`` with the request's ids, known to the run's stats (for the log line)."""
    from ..transformers.repair import Repair  # loads only for a repairing server

    repair = Repair(thread_id=run_input.thread_id, run_id=run_input.run_id)
    stats.repair = repair
    return repair


def _plain(stage: Stage, cls: type[Stage]) -> bool:
    """Whether ``stage`` is an instance of exactly ``cls``, none of its methods replaced."""
    if type(stage) is not cls:
        return False
    replaced = getattr(stage, "__dict__", {})
    return not any(name in replaced for name in ("transform", "finish", "route", "passes"))


def chain_repr(factory: ChainFactory | None) -> str:
    """The stages of a chain given as a TransformerChain or LoadedChain, else the factory's name."""
    owner = getattr(factory, "__self__", None)  # a TransformerChain's bound fresh()
    if isinstance(owner, TransformerChain):
        return repr(owner)
    if factory is None or hasattr(factory, "names"):  # None, or a LoadedChain
        return repr(factory)
    return getattr(factory, "__qualname__", None) or repr(factory)
