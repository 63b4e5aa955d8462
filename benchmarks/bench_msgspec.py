"""Would msgspec's one-pass typed decoding earn its place on the open-JSON events?

    pip install msgspec
    python benchmarks/bench_msgspec.py [--rounds 9] [--loops 2000]

For each of ``bench_state_events.py``'s payloads (``STATE_DELTA``, ``STATE_SNAPSHOT``,
``MESSAGES_SNAPSHOT``, ``ACTIVITY_SNAPSHOT``, ``ACTIVITY_DELTA``), in interleaved rounds
on the thread's CPU clock (medians), µs per event and the ratio to an orjson round trip:

* ``orjson``   — ``orjson.dumps(orjson.loads(payload))``: the floor the issue measures against;
* ``ours``     — ``encode_sse(decode(payload).event)``: the fast path as it is;
* ``msgspec``  — ``msgspec.json.encode(decoder.decode(payload))`` with a typed decoder
  (tagged ``Struct`` unions for the patch operations and the messages, the JSON Pointer
  pattern, unknown fields refused): checking and building in one C pass each way, the
  best msgspec can do — but the values are ``Struct`` objects, not the ``ag_ui.core``
  models every stage reads;
* ``hybrid``   — what adopting it behind the current API would run: the typed msgspec
  decode, then the same ``ag_ui.core`` models built from its values without validation
  (as the fast path's builders build them), then our encoder. The output bytes are
  compared with ``ours`` (they must be identical).

Nothing is asserted; docs/benchmarks.md ("Issue 33 ratios") quotes the figures.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Literal, get_args

import msgspec
import orjson
from ag_ui.core import (
    ActivityDeltaEvent,
    ActivitySnapshotEvent,
    AssistantMessage,
    BaseEvent,
    FunctionCall,
    MessagesSnapshotEvent,
    StateDeltaEvent,
    StateSnapshotEvent,
    ToolCall,
    UserMessage,
)

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_state_events import PAYLOADS

from agui_pipes._protocol.construct import construct
from agui_pipes.codecs import decode, encode_sse

Pointer = Annotated[str, msgspec.Meta(pattern=r"^(/([^/~]|~[01])*)*$")]


class _Op(msgspec.Struct, tag_field="op", forbid_unknown_fields=True):
    pass


class Add(_Op, tag="add"):
    path: Pointer
    value: Any


class Remove(_Op, tag="remove"):
    path: Pointer


class Replace(_Op, tag="replace"):
    path: Pointer
    value: Any


class Move(_Op, tag="move", rename={"from_": "from"}):
    from_: Pointer
    path: Pointer


class Copy(_Op, tag="copy", rename={"from_": "from"}):
    from_: Pointer
    path: Pointer


class Test(_Op, tag="test"):
    path: Pointer
    value: Any


Op = Add | Remove | Replace | Move | Copy | Test


class _Event(msgspec.Struct, tag_field="type", forbid_unknown_fields=True, rename="camel"):
    timestamp: int | None = None
    raw_event: Any = None


class StateDelta(_Event, tag="STATE_DELTA"):
    delta: list[Op] = []


class StateSnapshot(_Event, tag="STATE_SNAPSHOT"):
    snapshot: Any = None


class ActivitySnapshot(_Event, tag="ACTIVITY_SNAPSHOT"):
    message_id: str = ""
    activity_type: str = ""
    content: dict[str, Any] = {}
    replace: bool | None = None


class ActivityDelta(_Event, tag="ACTIVITY_DELTA"):
    message_id: str = ""
    activity_type: str = ""
    patch: list[Op] = []


class Function(msgspec.Struct, forbid_unknown_fields=True):
    name: str
    arguments: str


class Call(msgspec.Struct, forbid_unknown_fields=True):
    id: str
    type: Literal["function"]
    function: Function


class _Message(msgspec.Struct, tag_field="role", forbid_unknown_fields=True, rename="camel"):
    id: str


class User(_Message, tag="user"):
    content: str


class Assistant(_Message, tag="assistant"):
    content: str | None = None
    tool_calls: list[Call] | None = None


class MessagesSnapshot(_Event, tag="MESSAGES_SNAPSHOT"):
    messages: list[User | Assistant] = []


DECODERS: dict[str, msgspec.json.Decoder[Any]] = {
    "STATE_DELTA": msgspec.json.Decoder(StateDelta),
    "STATE_SNAPSHOT": msgspec.json.Decoder(StateSnapshot),
    "MESSAGES_SNAPSHOT": msgspec.json.Decoder(MessagesSnapshot),
    "ACTIVITY_SNAPSHOT": msgspec.json.Decoder(ActivitySnapshot),
    "ACTIVITY_DELTA": msgspec.json.Decoder(ActivityDelta),
}

# ag_ui's patch operation models by op: the delta's list[Annotated[Union[...], ...]]
_OP_MODELS = {
    cls.model_fields["op"].default: cls
    for cls in get_args(get_args(get_args(StateDeltaEvent.model_fields["delta"].annotation)[0])[0])
}


def _ops(ops: list[Any]) -> list[Any]:
    out = []
    for op in ops:
        tag = op.__struct_config__.tag
        values: dict[str, Any] = {"op": tag}
        for name in op.__struct_fields__:
            values[name] = getattr(op, name)
        out.append(construct(_OP_MODELS[tag], values))
    return out


def _models(value: Any) -> BaseEvent:
    """The ``ag_ui.core`` event the fast path builds, from msgspec's checked values."""
    if isinstance(value, StateDelta):
        return construct(StateDeltaEvent, {"type": "STATE_DELTA", "delta": _ops(value.delta)})
    if isinstance(value, StateSnapshot):
        return construct(StateSnapshotEvent, {"type": "STATE_SNAPSHOT", "snapshot": value.snapshot})
    if isinstance(value, ActivitySnapshot):
        return construct(
            ActivitySnapshotEvent,
            {
                "type": "ACTIVITY_SNAPSHOT",
                "message_id": value.message_id,
                "activity_type": value.activity_type,
                "content": value.content,
            },
        )
    if isinstance(value, ActivityDelta):
        return construct(
            ActivityDeltaEvent,
            {
                "type": "ACTIVITY_DELTA",
                "message_id": value.message_id,
                "activity_type": value.activity_type,
                "patch": _ops(value.patch),
            },
        )
    assert isinstance(value, MessagesSnapshot)
    messages: list[Any] = []
    for message in value.messages:
        if isinstance(message, User):
            messages.append(
                construct(
                    UserMessage, {"id": message.id, "role": "user", "content": message.content}
                )
            )
            continue
        fields: dict[str, Any] = {"id": message.id, "role": "assistant"}
        if message.content is not None:
            fields["content"] = message.content
        if message.tool_calls is not None:
            fields["tool_calls"] = [
                construct(
                    ToolCall,
                    {
                        "id": call.id,
                        "type": "function",
                        "function": construct(
                            FunctionCall,
                            {"name": call.function.name, "arguments": call.function.arguments},
                        ),
                    },
                )
                for call in message.tool_calls
            ]
        messages.append(construct(AssistantMessage, fields))
    return construct(MessagesSnapshotEvent, {"type": "MESSAGES_SNAPSHOT", "messages": messages})


def _timed(body: Callable[[], object], loops: int) -> float:
    start = time.thread_time()
    for _ in range(loops):
        body()
    return (time.thread_time() - start) / loops * 1e6


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--loops", type=int, default=2000)
    args = parser.parse_args()
    loads, dumps = orjson.loads, orjson.dumps
    encode = msgspec.json.encode
    print(f"msgspec {msgspec.__version__}, orjson {orjson.__version__}")
    print(
        f"{'event':<18} {'orjson µs':>9} {'ours':>12} {'msgspec':>12} {'hybrid':>12}  "
        "hybrid vs ours  same bytes"
    )
    for name, payload in PAYLOADS.items():
        decoder = DECODERS[name]
        ours_bytes = encode_sse(decode(payload).event)
        hybrid_bytes = encode_sse(_models(decoder.decode(payload)))
        same = hybrid_bytes == ours_bytes

        def floor(payload: bytes = payload) -> object:
            return dumps(loads(payload))

        def ours(payload: bytes = payload) -> object:
            return encode_sse(decode(payload).event)

        def alone(payload: bytes = payload, decoder: Any = decoder) -> object:
            return encode(decoder.decode(payload))

        def hybrid(payload: bytes = payload, decoder: Any = decoder) -> object:
            return encode_sse(_models(decoder.decode(payload)))

        bodies = (floor, ours, alone, hybrid)
        samples: list[list[float]] = [[] for _ in bodies]
        for _ in range(args.rounds):
            for i, body in enumerate(bodies):
                samples[i].append(_timed(body, args.loops))
        base, *rest = (statistics.median(s) for s in samples)
        cells = " ".join(f"{v:6.2f} {v / base:4.1f}×" for v in rest)
        print(f"{name:<18} {base:9.2f} {cells}  {rest[0] / rest[2]:13.2f}×  {same}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
