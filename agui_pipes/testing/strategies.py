"""Hypothesis strategies that generate valid AG-UI 1.0 event streams.

Every stream drawn from :func:`streams` is accepted by the official TypeScript
client (``@ag-ui/client`` 1.0.0) — the test suite checks that on hundreds of
examples per run — so a "stays valid" property for a stage reads::

    from hypothesis import given
    from agui_pipes.testing.strategies import streams

    @given(streams())
    def test_my_stage_keeps_streams_valid(events):
        out = run_transformer(MyStage(), events)
        ...  # verify ``out``

What the streams contain (each family has a knob to switch it off):

* several runs on one thread, each ``RUN_STARTED`` .. ``RUN_FINISHED`` (outcome
  absent, success with optional ``pendingToolCallIds``, interrupt with
  interrupts, cancelled) or cut short by ``RUN_ERROR`` with things still open;
  a run after an interrupted one echoes an input whose ``resume`` answers every
  interrupt;
* interleaved text messages (all four roles), parallel tool calls with argument
  deltas, optional ``parentMessageId`` and an optional ``TOOL_CALL_RESULT``
  after the end;
* reasoning spans holding reasoning messages (sometimes sharing the span's id),
  ``REASONING_ENCRYPTED_VALUE`` naming a message or tool call of the same owner;
* steps (keyed by owner and name, so parent and subagent may both run "tools");
* ``STATE_SNAPSHOT`` and ``STATE_DELTA`` whose patches apply to the state the
  consumer holds at that point; ``MESSAGES_SNAPSHOT`` restating the
  conversation when nothing is open; ``ACTIVITY_SNAPSHOT`` / ``ACTIVITY_DELTA``;
  ``RAW`` and ``CUSTOM``;
* nested subagents (``SUBAGENT_STARTED`` with ``parentSubagentRunId`` /
  ``parentToolCallId``, ``SUBAGENT_FINISHED`` — possibly suspended on the run's
  interrupts — or ``SUBAGENT_ERROR``), attributed events, and attribution-only
  subagents that never announce themselves;
* the chunk forms (``TEXT_MESSAGE_CHUNK``, ``TOOL_CALL_CHUNK``,
  ``REASONING_MESSAGE_CHUNK``) with id-less continuations only where they are
  unambiguous for their lane.

Ownership is always consistent: openers carry their owner's ``subagentRunId``,
continuations carry the same tag or none, and a tool call's parent message has
the call's owner. Ids are unique within a stream (``msg-3``, ``call-2``, ...)
unless ``reopen=True``.
Numbers are integers only (floats print differently across languages).

Drawing is procedural: the shape of a stream (which item moves next, which
form an event takes) is drawn through hypothesis, cosmetic content (words,
JSON values) from a PRNG seeded by one draw. That keeps generation at well
over a hundred streams per second on a loaded machine (hypothesis' own
bookkeeping is most of the cost; the simulator alone does ~1500/s), and
shrinking turns an interleaved failure into a sequential, smaller one.
Hypothesis is a test-only dependency: import this module from tests only.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ag_ui.core import BaseEvent
from hypothesis import strategies as st

from .._lazy import public_dir, publish
from ._choices import Choices
from ._patches import patch_for
from ._streamgen import DEFAULT_TOOL_NAMES, StreamConfig, simulate_fragment, simulate_stream

publish(__name__, StreamConfig)

__all__ = [
    "DEFAULT_TOOL_NAMES",
    "StreamConfig",
    "expanded_streams",
    "json_patches",
    "json_values",
    "reasoning_spans",
    "runs",
    "streams",
    "subagent_scopes",
    "text_messages",
    "tool_calls",
]
__dir__ = public_dir(__all__)


def _config(**knobs: Any) -> StreamConfig:
    names = knobs.get("tool_names")
    if names is not None:
        if isinstance(names, str):
            raise TypeError(
                f"tool_names must be a sequence of names, not the string {names!r}; "
                f"write tool_names=[{names!r}]"
            )
        knobs["tool_names"] = tuple(names)
    return StreamConfig(**knobs)


def streams(
    *,
    min_runs: int = 1,
    max_runs: int = 3,
    max_items: int = 6,
    max_deltas: int = 4,
    chunks: bool = True,
    subagents: bool = True,
    max_subagent_depth: int = 2,
    reasoning: bool = True,
    steps: bool = True,
    state: bool = True,
    activities: bool = True,
    messages_snapshots: bool = True,
    raw_and_custom: bool = True,
    envelope: bool = True,
    reopen: bool = False,
    outcomes: bool = True,
    run_errors: bool = True,
    untagged_continuations: bool = True,
    input_echo: bool = True,
    leading_run_error: bool = False,
    late_run_error: bool = False,
    tool_names: Sequence[str] = DEFAULT_TOOL_NAMES,
    thread_id: str = "thread-1",
) -> st.SearchStrategy[list[BaseEvent]]:
    """Valid AG-UI streams: ``min_runs..max_runs`` runs, as lists of ``ag_ui.core`` events.

    Knobs:

    * ``max_items`` — top-level items (message, tool call, step, subagent, state
      update, ...) per run; subagents and steps add 0-3 nested items each.
    * ``max_deltas`` — content/args fragments per message or tool call.
    * ``chunks`` — use the ``*_CHUNK`` shorthand for some items (see
      :func:`expanded_streams` for streams without any chunk event).
    * ``subagents`` / ``max_subagent_depth`` — subagent scopes and their nesting.
    * ``reasoning``, ``steps``, ``state``, ``activities``, ``messages_snapshots``,
      ``raw_and_custom`` — switch families of events on or off.
    * ``envelope`` — sometimes add ``timestamp`` / ``metadata`` / ``rawEvent``
      (and token ``usage`` on run terminals).
    * ``reopen`` — sometimes reopen a closed text message or tool call with the
      same id (legal: content appends). Off by default, because it gives up the
      "ids are unique" guarantee.
    * ``outcomes`` — vary RUN_FINISHED's outcome (else it is always absent).
    * ``run_errors`` — sometimes end a run with RUN_ERROR, things left open.
    * ``untagged_continuations`` — let continuations of a subagent's entities
      omit the tag (legal: an untagged continuation always agrees).
    * ``input_echo`` — sometimes echo a ``RunAgentInput`` in RUN_STARTED.
    * ``leading_run_error`` — sometimes start the stream with a RUN_ERROR (a run
      that failed before starting). ``late_run_error`` — sometimes follow a
      RUN_FINISHED with a late RUN_ERROR. Both legal, both off by default.
    * ``tool_names`` — the names tool calls draw from (e.g. include
      ``internal_*`` names to exercise deny filters).
    """
    cfg = _config(
        min_runs=min_runs,
        max_runs=max_runs,
        max_items=max_items,
        max_deltas=max_deltas,
        chunks=chunks,
        subagents=subagents,
        max_subagent_depth=max_subagent_depth,
        reasoning=reasoning,
        steps=steps,
        state=state,
        activities=activities,
        messages_snapshots=messages_snapshots,
        raw_and_custom=raw_and_custom,
        envelope=envelope,
        reopen=reopen,
        outcomes=outcomes,
        run_errors=run_errors,
        untagged_continuations=untagged_continuations,
        input_echo=input_echo,
        leading_run_error=leading_run_error,
        late_run_error=late_run_error,
        tool_names=tool_names,
        thread_id=thread_id,
    )
    return _streams_from(cfg)


def _streams_from(cfg: StreamConfig) -> st.SearchStrategy[list[BaseEvent]]:
    @st.composite
    def _draw(draw: st.DrawFn) -> list[BaseEvent]:
        return simulate_stream(Choices(draw), cfg)

    return _draw()


def runs(**knobs: Any) -> st.SearchStrategy[list[BaseEvent]]:
    """A single run (RUN_STARTED .. RUN_FINISHED / RUN_ERROR); same knobs as :func:`streams`."""
    knobs.setdefault("min_runs", 1)
    knobs.setdefault("max_runs", 1)
    if knobs["min_runs"] != 1 or knobs["max_runs"] != 1:
        raise ValueError("runs() draws exactly one run; use streams() for several")
    return _streams_from(_config(**knobs))


def expanded_streams(**knobs: Any) -> st.SearchStrategy[list[BaseEvent]]:
    """Streams with no ``*_CHUNK`` event at all (what a chunk expander outputs)."""
    if knobs.get("chunks"):
        raise ValueError("expanded_streams() never contains chunks; drop chunks=True")
    knobs["chunks"] = False
    return _streams_from(_config(**knobs))


def _fragment(kind: str, subagent: str | None, **knobs: Any) -> st.SearchStrategy[list[BaseEvent]]:
    cfg = _config(**knobs)

    @st.composite
    def _draw(draw: st.DrawFn) -> list[BaseEvent]:
        return simulate_fragment(Choices(draw), cfg, kind, subagent)

    return _draw()


def text_messages(
    *, chunks: bool = False, subagent: str | None = None, max_deltas: int = 4
) -> st.SearchStrategy[list[BaseEvent]]:
    """One text message: START/CONTENT*/END, or its chunk form with ``chunks=True``.

    Meant to be wrapped in a run (e.g. ``agui_pipes.testing.run_events(events)``); the
    id is ``msg-1``.
    """
    return _fragment("text_chunks" if chunks else "text", subagent, max_deltas=max_deltas)


def tool_calls(
    tool_names: Sequence[str] = DEFAULT_TOOL_NAMES,
    *,
    chunks: bool = False,
    subagent: str | None = None,
    max_deltas: int = 4,
) -> st.SearchStrategy[list[BaseEvent]]:
    """One tool call (START/ARGS*/END, optional RESULT), or its chunk form.

    Its name is drawn from ``tool_names``; its id is ``call-1``.
    """
    return _fragment(
        "tool_chunks" if chunks else "tool", subagent, tool_names=tool_names, max_deltas=max_deltas
    )


def reasoning_spans(
    *, chunks: bool = True, subagent: str | None = None
) -> st.SearchStrategy[list[BaseEvent]]:
    """A reasoning span (REASONING_START .. REASONING_END) holding 0-2 reasoning messages."""
    return _fragment("reasoning", subagent, chunks=chunks)


def subagent_scopes(
    *, chunks: bool = True, max_depth: int = 2, tool_names: Sequence[str] = DEFAULT_TOOL_NAMES
) -> st.SearchStrategy[list[BaseEvent]]:
    """A subagent invocation with its attributed work, possibly nesting others.

    Occasionally the scope is attribution-only (tagged events, no SUBAGENT_*).
    """
    return _fragment(
        "subagent",
        None,
        chunks=chunks,
        max_subagent_depth=max(1, max_depth),
        tool_names=tool_names,
        messages_snapshots=False,
    )


@st.composite
def _json_values(draw: st.DrawFn, max_depth: int) -> Any:
    return Choices(draw).json_value(max_depth)


def json_values(max_depth: int = 2) -> st.SearchStrategy[Any]:
    """JSON values (integers, strings, booleans, null, lists, objects; no floats)."""
    return _json_values(max_depth)


@st.composite
def _json_patches(draw: st.DrawFn, document: Any, max_ops: int) -> tuple[list[dict[str, Any]], Any]:
    return patch_for(Choices(draw), document, max_ops)


def json_patches(
    document: dict[str, Any] | list[Any], max_ops: int = 3
) -> st.SearchStrategy[tuple[list[dict[str, Any]], Any]]:
    """``(patch, result)``: an RFC 6902 patch (list of op dicts) that applies to ``document``.

    ``result`` is ``document`` after the patch; ``document`` is not modified.
    """
    if not isinstance(document, (dict, list)):
        raise TypeError(
            f"json_patches() needs an object or array document, got {type(document).__name__}"
        )
    return _json_patches(document, max_ops)
