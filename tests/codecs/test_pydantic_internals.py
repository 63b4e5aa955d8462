"""The pydantic internals the fast path relies on, checked so a change fails here, loudly.

The generated decode builders and ``agui_pipes._protocol.construct`` build models by
setting the four slots of ``pydantic.BaseModel`` directly; the fast writers
compile a serializer from a class's core schema minus ``ag_ui``'s wrap hook.
None of that is pydantic's public API. ``pyproject.toml`` bounds pydantic
below 3; within 2.x, if any of these assumptions breaks, this file names the
one that did (the fix is in ``agui_pipes/_protocol/construct.py`` or
``agui_pipes/_fastpath/``, or running with ``AGUI_PIPES_FAST_PATH=0`` until
then).
"""

from __future__ import annotations

from typing import Any

import pydantic
import pytest
from ag_ui.core import (
    BaseEvent,
    MessagesSnapshotEvent,
    TextMessageContentEvent,
    TextMessageStartEvent,
    ToolCallStartEvent,
)
from pydantic import BaseModel
from pydantic_core import SchemaSerializer

from agui_pipes._fastpath.writers import build_fast
from agui_pipes._protocol.construct import construct
from agui_pipes.codecs import decode, encode_json

SLOTS = ("__dict__", "__pydantic_fields_set__", "__pydantic_extra__", "__pydantic_private__")


def _changed(what: str) -> str:
    return (
        f"pydantic {pydantic.VERSION} changed {what}, which agui_pipes' fast path relies on "
        "(agui_pipes/_protocol/construct.py, agui_pipes/_fastpath/); adapt them, or run with "
        "AGUI_PIPES_FAST_PATH=0 meanwhile"
    )


def test_pydantic_is_a_2x_release() -> None:
    major = int(pydantic.VERSION.split(".")[0])
    assert major == 2, _changed("its major version (pyproject.toml bounds it to <3)")


def test_a_model_instance_is_exactly_the_four_slots() -> None:
    assert tuple(BaseModel.__slots__) == SLOTS, _changed(
        f"BaseModel.__slots__ (now {BaseModel.__slots__!r}, expected {SLOTS!r})"
    )
    for slot in SLOTS:
        descriptor = vars(BaseModel).get(slot)
        assert descriptor is not None and hasattr(descriptor, "__set__"), _changed(
            f"the slot descriptor BaseModel.{slot} (the builders set it directly)"
        )


@pytest.mark.parametrize(
    ("cls", "values"),
    [
        (TextMessageContentEvent, {"message_id": "m", "delta": "d"}),
        (TextMessageStartEvent, {"message_id": "m", "role": "assistant", "timestamp": 5}),
        (ToolCallStartEvent, {"tool_call_id": "c", "tool_call_name": "t"}),
    ],
)
def test_setting_the_slots_builds_what_validation_builds(
    cls: type[BaseEvent], values: dict[str, Any]
) -> None:
    built = construct(cls, values)
    validated = cls(**values)
    for slot in SLOTS:
        assert getattr(built, slot) == getattr(validated, slot), _changed(
            f"what a validated {cls.__name__} holds in {slot}"
        )
    assert built == validated, _changed("model equality over the slots")
    assert built.model_fields_set == validated.model_fields_set, _changed("model_fields_set")
    assert built.model_dump_json() == validated.model_dump_json(), _changed(
        "serialisation of a model built from its slots"
    )
    copied = built.model_copy(update={"timestamp": 7})
    assert copied.timestamp == 7 and "timestamp" in copied.model_fields_set, _changed(
        "model_copy of a model built from its slots"
    )


def test_decoded_events_equal_validated_ones_on_both_paths() -> None:
    wire = b'{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"d"}'
    fast = decode(wire, fast_path=True).event
    reference = decode(wire, fast_path=False).event
    validated = TextMessageContentEvent(message_id="m", delta="d")
    assert fast == reference == validated, _changed("what a generated builder's event equals")
    assert fast is not None
    assert fast.__pydantic_fields_set__ == validated.__pydantic_fields_set__, _changed(
        "the fields-set slot of a built model"
    )


def test_event_classes_carry_the_omission_hook_the_writers_strip() -> None:
    schema: Any = BaseEvent.__pydantic_core_schema__
    serialization = schema.get("serialization") if isinstance(schema, dict) else None
    assert isinstance(serialization, dict) and serialization.get("type") == "function-wrap", (
        _changed(
            "how ag_ui's BaseEvent installs its serializer (a function-wrap in the core "
            "schema's 'serialization')"
        )
    )
    for cls in (TextMessageContentEvent, ToolCallStartEvent, MessagesSnapshotEvent):
        core: Any = cls.__pydantic_core_schema__
        assert core.get("type") == "model" and core.get("cls") is cls, _changed(
            f"the shape of {cls.__name__}.__pydantic_core_schema__ (a 'model' schema of the class)"
        )
        fast = build_fast(cls)
        assert fast is not None, _changed(
            f"{cls.__name__}'s core schema: the hook-free serializer cannot be built"
        )
        assert isinstance(fast.serializer, SchemaSerializer)


def test_the_hook_free_serializer_writes_the_official_bytes() -> None:
    event = ToolCallStartEvent(tool_call_id="c", tool_call_name="t", parent_message_id="p")
    fast = build_fast(ToolCallStartEvent)
    assert fast is not None
    written = fast.serializer.to_json(
        event, by_alias=True, exclude=set(fast.omittable_fields) - {"parent_message_id"}
    )
    assert written == event.model_dump_json(by_alias=True).encode(), _changed(
        "SchemaSerializer.to_json(by_alias=..., exclude=...) on a hook-free model schema"
    )
    assert encode_json(event, fast_path=True) == encode_json(event, fast_path=False)


def test_field_info_answers_the_writers_read() -> None:
    info = TextMessageContentEvent.model_fields["timestamp"]
    assert not info.is_required() and info.default is None, _changed(
        "FieldInfo.is_required() / .default for an optional field"
    )
    alias = TextMessageContentEvent.model_fields["message_id"]
    assert (alias.serialization_alias or alias.alias) == "messageId", _changed(
        "FieldInfo.alias / serialization_alias (the camelCase wire keys)"
    )
