"""Hypothesis strategies for *arbitrary* AG-UI events (not valid streams).

The codec tests need every event class with every optional field either
absent, explicitly ``None`` or set, hostile strings (quotes, backslashes,
control characters, non-BMP code points), JSON values of every kind inside
open fields, nested models with their own optional fields, and unknown extra
fields (``None`` included). Events are built from wire-shaped dicts through
pydantic validation, the way a decoder would build them.
"""

from __future__ import annotations

import inspect
import typing
from typing import Any

import ag_ui.core as core
from ag_ui.core import BaseEvent
from hypothesis import strategies as st

EVENT_CLASSES: list[type[BaseEvent]] = sorted(
    (
        cls
        for _, cls in inspect.getmembers(core, inspect.isclass)
        if issubclass(cls, BaseEvent) and cls is not BaseEvent
    ),
    key=lambda cls: cls.__name__,
)

# Any code point that UTF-8 can carry (no lone surrogates), incl. control chars.
texts = st.text(alphabet=st.characters(codec="utf-8"), max_size=12)
ids = st.one_of(st.sampled_from(["m1", "t1", "run-1", ""]), texts)
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**63),
    # Finite only: encode_json refuses NaN / Infinity (the official encoder writes
    # null); tests/codecs/test_codecs.py covers that refusal on its own.
    st.floats(allow_nan=False, allow_infinity=False),
    texts,
)
json_values = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(texts, inner, max_size=4)),
    max_leaves=12,
)
json_objects = st.dictionaries(texts, json_values, max_size=4)


def opt(strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(st.none(), strategy)


def _record(
    required: dict[str, st.SearchStrategy[Any]], optional: dict[str, st.SearchStrategy[Any]]
) -> st.SearchStrategy[dict[str, Any]]:
    """A dict with the required keys and any subset of the optional ones (values may be None)."""
    return st.fixed_dictionaries(required, optional={k: opt(v) for k, v in optional.items()})


token_usage = _record(
    {},
    {
        "provider": texts,
        "model": texts,
        "inputTokens": st.integers(0, 10**6),
        "outputTokens": st.integers(0, 10**6),
        "totalTokens": st.integers(0, 10**6),
    },
)
interrupt = _record(
    {"id": ids, "reason": texts},
    {
        "message": texts,
        "toolCallId": ids,
        "responseSchema": json_objects,
        "expiresAt": texts,
        "metadata": json_objects,
        "subagentRunId": ids,
    },
)
text_part = _record({"type": st.just("text"), "text": texts}, {"id": ids, "metadata": json_values})
parts_or_text = st.one_of(texts, st.lists(text_part, max_size=3))
tool_call = _record(
    {
        "id": ids,
        "type": st.just("function"),
        "function": st.fixed_dictionaries({"name": texts, "arguments": texts}),
    },
    {"encryptedValue": texts, "metadata": json_objects},
)
_message_common = {"subagentRunId": ids, "metadata": json_objects}
messages = st.lists(
    st.one_of(
        _record(
            {"id": ids, "role": st.sampled_from(["developer", "system"]), "content": texts},
            {**_message_common, "name": texts, "encryptedValue": texts},
        ),
        _record(
            {"id": ids, "role": st.just("assistant")},
            {
                **_message_common,
                "content": texts,
                "name": texts,
                "toolCalls": st.lists(tool_call, max_size=2),
            },
        ),
        _record(
            {"id": ids, "role": st.just("user"), "content": parts_or_text},
            {**_message_common, "name": texts},
        ),
        _record(
            {"id": ids, "role": st.just("tool"), "content": parts_or_text, "toolCallId": ids},
            {**_message_common, "error": texts},
        ),
        _record(
            {
                "id": ids,
                "role": st.just("activity"),
                "activityType": texts,
                "content": json_objects,
            },
            _message_common,
        ),
        _record({"id": ids, "role": st.just("reasoning"), "content": texts}, _message_common),
    ),
    max_size=3,
)
pointers = st.lists(
    st.text(alphabet=st.characters(codec="utf-8", blacklist_characters="/~"), max_size=4),
    max_size=3,
).map(lambda tokens: "".join("/" + token for token in tokens))
patch_ops = st.lists(
    st.one_of(
        st.fixed_dictionaries(
            {
                "op": st.sampled_from(["add", "replace", "test"]),
                "path": pointers,
                "value": json_values,
            }
        ),
        st.fixed_dictionaries({"op": st.just("remove"), "path": pointers}),
        st.fixed_dictionaries(
            {"op": st.sampled_from(["move", "copy"]), "from": pointers, "path": pointers}
        ),
    ),
    max_size=3,
)
run_outcome = st.one_of(
    _record({"type": st.just("success")}, {"pendingToolCallIds": st.lists(ids, max_size=2)}),
    st.fixed_dictionaries(
        {"type": st.just("interrupt"), "interrupts": st.lists(interrupt, min_size=1, max_size=2)}
    ),
    st.fixed_dictionaries({"type": st.just("cancelled")}),
)
subagent_outcome = st.one_of(
    st.fixed_dictionaries({"type": st.just("success")}),
    _record({"type": st.just("suspended")}, {"interruptIds": st.lists(ids, max_size=2)}),
)
run_input = _record(
    {"threadId": ids, "runId": ids, "messages": messages},
    {
        "protocolVersion": texts,
        "parentRunId": ids,
        "state": json_values,
        "forwardedProps": json_values,
        "context": st.lists(st.fixed_dictionaries({"description": texts, "value": texts})),
    },
)


def _by_annotation(annotation: Any) -> st.SearchStrategy[Any] | None:
    if annotation is str:
        return texts
    if annotation is Any:
        return json_values
    if annotation is bool:
        return st.booleans()
    if annotation is int:
        return st.integers(-(2**53) + 1, 2**53 - 1)
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Literal:
        return st.sampled_from(args)
    if origin is dict:
        return json_objects
    if origin is typing.Union and type(None) in args:
        rest = [a for a in args if a is not type(None)]
        if len(rest) == 1:
            inner = _by_annotation(rest[0])
            return None if inner is None else opt(inner)
    return None


_BY_NAME: dict[tuple[str, str], st.SearchStrategy[Any]] = {
    ("MessagesSnapshotEvent", "messages"): messages,
    ("StateDeltaEvent", "delta"): patch_ops,
    ("ActivityDeltaEvent", "patch"): patch_ops,
    ("ToolCallResultEvent", "content"): parts_or_text,
    ("RunFinishedEvent", "outcome"): opt(run_outcome),
    ("SubagentFinishedEvent", "outcome"): opt(subagent_outcome),
    ("RunFinishedEvent", "usage"): opt(st.lists(token_usage, max_size=2)),
    ("RunErrorEvent", "usage"): opt(st.lists(token_usage, max_size=2)),
    ("RunStartedEvent", "input"): opt(run_input),
}


def _wire_dict(cls: type[BaseEvent]) -> st.SearchStrategy[dict[str, Any]]:
    required: dict[str, st.SearchStrategy[Any]] = {}
    optional: dict[str, st.SearchStrategy[Any]] = {}
    taken: set[str] = set()
    for name, info in cls.model_fields.items():
        key = info.alias or name
        taken.update({name, key})
        if name == "type":
            required[key] = st.just(info.get_default())
            continue
        if name == "timestamp":
            strategy: st.SearchStrategy[Any] | None = opt(st.integers(0, 2**53 - 1))
        else:
            special = _BY_NAME.get((cls.__name__, name))
            strategy = special if special is not None else _by_annotation(info.annotation)
        if strategy is None:
            raise AssertionError(f"no strategy for {cls.__name__}.{name}: {info.annotation}")
        (required if info.is_required() else optional)[key] = strategy
    extras = st.dictionaries(texts.filter(lambda key: key not in taken), json_values, max_size=3)
    return st.builds(
        lambda fields, extra: {**extra, **fields},
        st.fixed_dictionaries(required, optional=optional),
        extras,
    )


def events_of(cls: type[BaseEvent]) -> st.SearchStrategy[BaseEvent]:
    return _wire_dict(cls).map(cls.model_validate)


any_event: st.SearchStrategy[BaseEvent] = st.one_of([events_of(cls) for cls in EVENT_CLASSES])
