"""StateFilter: state scoped by JSON Pointers, through the stage and through YAML."""

from __future__ import annotations

import json
from typing import Any

import pytest
from ag_ui.core import (
    ActivityDeltaEvent,
    ActivityMessage,
    ActivitySnapshotEvent,
    BaseEvent,
    EventType,
    MessagesSnapshotEvent,
    RunAgentInput,
    StateDeltaEvent,
    StateSnapshotEvent,
    UserMessage,
)

from agui_pipes import Limits, StreamRejected
from agui_pipes.config import ConfigError, load_chain
from agui_pipes.testing import run_events, run_started, text
from agui_pipes.transformers import StateFilter
from tests.transformers._stage_helpers import consumed, through, through_async, wire


def _snapshot(state: Any) -> StateSnapshotEvent:
    return StateSnapshotEvent(snapshot=state)


def _delta(*ops: dict[str, Any]) -> StateDeltaEvent:
    return StateDeltaEvent.model_validate({"delta": list(ops)})


def _ops(event: BaseEvent) -> list[dict[str, Any]]:
    assert isinstance(event, StateDeltaEvent)
    return [op.model_dump(by_alias=True) for op in event.delta]


def _final_state(stage: StateFilter, inner: list[BaseEvent]) -> tuple[list[BaseEvent], Any]:
    out = through(stage, run_events(inner))
    return out, consumed(out).state


LANGGRAPH_STATE: dict[str, list[dict[str, Any]] | dict[str, Any]] = {
    "messages": [
        {"type": "human", "content": "what is my balance?"},
        {
            "type": "ai",
            "content": "",
            "tool_calls": [{"name": "bank_lookup", "args": {"account": "ACCT-991"}}],
        },
        {"type": "tool", "content": "balance 1234.56, token tok_live_SECRET"},
        {"type": "ai", "content": "You have 1234.56."},
    ],
    "todos": [{"title": "check balance", "done": True}],
    "config": {"api_key": "sk-SECRET", "model": "gpt"},
}


def _messages() -> list[dict[str, Any]]:
    messages = LANGGRAPH_STATE["messages"]
    assert isinstance(messages, list)
    return messages


# -- snapshots -----------------------------------------------------------------


def test_deny_removes_the_langgraph_messages_and_a_key() -> None:
    stage = StateFilter(deny=["/messages", "/config/api_key"])
    out, state = _final_state(stage, [_snapshot(LANGGRAPH_STATE)])
    assert state == {"todos": LANGGRAPH_STATE["todos"], "config": {"model": "gpt"}}
    assert "SECRET" not in wire(out) and "bank_lookup" not in wire(out)


def test_allow_keeps_listed_subtrees_and_the_containers_that_hold_them() -> None:
    stage = StateFilter(allow=["/todos", "/messages/*/content", "/config/model/name"])
    _, state = _final_state(stage, [_snapshot(LANGGRAPH_STATE)])
    assert state == {
        "todos": LANGGRAPH_STATE["todos"],
        "messages": [
            {"content": "what is my balance?"},
            {"content": ""},
            {"content": "balance 1234.56, token tok_live_SECRET"},
            {"content": "You have 1234.56."},
        ],
        # an object on the way stays (empty); a scalar on the way holds nothing allowed
        "config": {},
    }


def test_allow_then_deny_inside_it() -> None:
    stage = StateFilter(allow=["/messages"], deny=["/messages/*/tool_calls"])
    _, state = _final_state(stage, [_snapshot(LANGGRAPH_STATE)])
    assert state == {
        "messages": [{k: v for k, v in m.items() if k != "tool_calls"} for m in _messages()]
    }


def test_a_snapshot_with_nothing_hidden_passes_as_the_same_event() -> None:
    event = _snapshot({"todos": []})
    assert StateFilter(deny=["/messages"]).transform(event)[0] is event


def test_a_scalar_state_outside_the_allow_list_is_sent_as_null() -> None:
    _, state = _final_state(StateFilter(allow=["/a"]), [_snapshot("just text")])
    assert state is None


def test_pointer_escapes_name_keys_with_slash_and_tilde() -> None:
    stage = StateFilter(deny=["/a~1b", "/t~0x"])
    _, state = _final_state(stage, [_snapshot({"a/b": 1, "t~x": 2, "a": {"b": 3}})])
    assert state == {"a": {"b": 3}}


def test_raw_event_of_state_events_is_removed() -> None:
    event = StateSnapshotEvent(snapshot={"ok": 1}, raw_event={"full_state": "sk-SECRET"})
    (out,) = StateFilter(deny=["/x"]).transform(event)
    assert out.raw_event is None


# -- deltas --------------------------------------------------------------------


def _stage_with(state: Any, **options: Any) -> StateFilter:
    stage = StateFilter(**options)
    stage.transform(_snapshot(state))
    return stage


def test_operations_under_a_denied_path_are_dropped_and_the_rest_pass_unchanged() -> None:
    stage = _stage_with({"config": {"api_key": "k"}, "n": 1}, deny=["/config/api_key"])
    (out,) = stage.transform(
        _delta(
            {"op": "replace", "path": "/config/api_key", "value": "sk-NEW"},
            {"op": "test", "path": "/config/api_key", "value": "sk-NEW"},
            {"op": "replace", "path": "/n", "value": 2},
        )
    )
    assert _ops(out) == [{"op": "replace", "path": "/n", "value": 2}]


def test_a_delta_that_touches_nothing_hidden_is_the_same_event() -> None:
    stage = _stage_with({"n": 1}, deny=["/secret"])
    event = _delta({"op": "replace", "path": "/n", "value": 2})
    assert stage.transform(event)[0] is event


def test_an_operation_on_an_ancestor_has_its_value_pruned() -> None:
    stage = _stage_with({}, deny=["/config/secret"])
    (out,) = stage.transform(
        _delta(
            {"op": "add", "path": "/config", "value": {"secret": "sk-1", "model": "m"}},
            {"op": "replace", "path": "", "value": {"config": {"secret": "sk-2"}}},
        )
    )
    assert _ops(out) == [
        {"op": "add", "path": "/config", "value": {"model": "m"}},
        {"op": "replace", "path": "", "value": {"config": {}}},
    ]
    assert "sk-" not in wire([out])


def test_copy_or_move_out_of_a_hidden_path_becomes_an_add_of_the_pruned_value() -> None:
    stage = _stage_with({"vault": {"key": "sk-1", "label": "v"}}, deny=["/vault", "/*/key"])
    (out,) = stage.transform(
        _delta(
            {"op": "copy", "from": "/vault", "path": "/shown"},
            {"op": "move", "from": "/vault", "path": "/moved"},
        )
    )
    assert _ops(out) == [
        {"op": "add", "path": "/shown", "value": {"label": "v"}},
        {"op": "add", "path": "/moved", "value": {"label": "v"}},
    ]
    assert "sk-1" not in wire([out])


def test_pointers_scope_places_not_values() -> None:
    # a value copied out of a denied place shows where it lands, if that place shows
    stage = _stage_with({"vault": {"key": "sk-1"}}, deny=["/vault/key"])
    (out,) = stage.transform(_delta({"op": "copy", "from": "/vault", "path": "/shown"}))
    assert _ops(out) == [{"op": "add", "path": "/shown", "value": {"key": "sk-1"}}]


def test_move_from_a_visible_path_into_a_hidden_one_becomes_a_remove() -> None:
    stage = _stage_with({"draft": "text", "private": {}}, deny=["/private"])
    (out,) = stage.transform(_delta({"op": "move", "from": "/draft", "path": "/private/d"}))
    assert _ops(out) == [{"op": "remove", "path": "/draft"}]


def test_move_and_copy_between_wholly_visible_places_stay_move_and_copy() -> None:
    stage = _stage_with({"a": {"x": 1}, "b": {}, "secret": 1}, deny=["/secret"])
    (out,) = stage.transform(
        _delta(
            {"op": "copy", "from": "/a", "path": "/b/a"},
            {"op": "move", "from": "/a", "path": "/c"},
        )
    )
    assert _ops(out) == [
        {"op": "copy", "from": "/a", "path": "/b/a"},
        {"op": "move", "from": "/a", "path": "/c"},
    ]


def test_wildcard_deny_follows_array_shifts() -> None:
    messages = [{"text": "one", "secret": "s1"}, {"text": "two", "secret": "s2"}]
    stage = StateFilter(deny=["/messages/*/secret"])
    inner: list[BaseEvent] = [
        _snapshot({"messages": messages}),
        _delta(
            {"op": "add", "path": "/messages/0", "value": {"text": "zero", "secret": "s0"}},
            {"op": "remove", "path": "/messages/1"},
            {"op": "add", "path": "/messages/-", "value": {"text": "end", "secret": "s3"}},
            {"op": "replace", "path": "/messages/1/secret", "value": "s4"},
            {"op": "replace", "path": "/messages/1/text", "value": "TWO"},
        ),
    ]
    out, state = _final_state(stage, inner)
    assert state == {"messages": [{"text": "zero"}, {"text": "TWO"}, {"text": "end"}]}
    assert not any(f"s{i}" in wire(out) for i in range(5))


def test_array_indices_are_mapped_past_elements_that_do_not_show() -> None:
    # allow reaches into the objects of the list; its scalars hold nothing allowed
    stage = _stage_with({"items": [7, {"name": "a"}, 8, {"name": "b"}]}, allow=["/items/*/name"])
    (out,) = stage.transform(
        _delta(
            {"op": "replace", "path": "/items/3/name", "value": "B"},
            {"op": "remove", "path": "/items/1"},
            {"op": "add", "path": "/items/0", "value": 6},
        )
    )
    assert _ops(out) == [
        {"op": "replace", "path": "/items/1/name", "value": "B"},
        {"op": "remove", "path": "/items/0"},
    ]


def test_a_value_that_starts_or_stops_showing_by_its_kind_is_added_or_removed() -> None:
    # /a is on the way to the allowed /a/b: as a scalar it holds nothing allowed
    stage = _stage_with({"a": 1, "list": [1]}, allow=["/a/b", "/list/*/b"])
    (out,) = stage.transform(
        _delta(
            {"op": "replace", "path": "/a", "value": {"b": 2, "c": 3}},
            {"op": "replace", "path": "/list/0", "value": {"b": 4}},
        )
    )
    assert _ops(out) == [
        {"op": "add", "path": "/a", "value": {"b": 2}},
        {"op": "add", "path": "/list/0", "value": {"b": 4}},
    ]
    (out,) = stage.transform(_delta({"op": "replace", "path": "/a", "value": "gone"}))
    assert _ops(out) == [{"op": "remove", "path": "/a"}]


def test_shifting_an_array_whose_elements_show_by_index_resends_the_pruned_state() -> None:
    stage = StateFilter(deny=["/items/0"])
    inner: list[BaseEvent] = [
        _snapshot({"items": ["hidden", "b", "c"]}),
        _delta({"op": "remove", "path": "/items/0"}),
    ]
    out, state = _final_state(stage, inner)
    resent = [e for e in out if e.type == EventType.STATE_SNAPSHOT]
    assert [e.snapshot for e in resent] == [{"items": ["b", "c"]}, {"items": ["c"]}]  # type: ignore[attr-defined]
    assert state == {"items": ["c"]}
    assert not any(e.type == EventType.STATE_DELTA for e in out)


def test_a_delta_that_does_not_apply_is_sent_empty_and_the_state_is_kept(
    caplog: pytest.LogCaptureFixture,
) -> None:
    stage = StateFilter(deny=["/x"])
    inner: list[BaseEvent] = [
        _snapshot({"a": [1]}),
        _delta(
            {"op": "add", "path": "/b", "value": "sk-LEAK"},
            {"op": "remove", "path": "/missing"},
        ),
        _delta({"op": "add", "path": "/a/-", "value": 2}),
    ]
    out, state = _final_state(stage, inner)
    assert [_ops(e) for e in out if e.type == EventType.STATE_DELTA][0] == []
    assert state == {"a": [1, 2]}
    assert "sk-LEAK" not in wire(out)
    assert "STATE_DELTA did not apply and was sent empty: path '/missing' does not exist" in (
        caplog.text
    )


def test_test_operations_on_hidden_paths_are_dropped_and_visible_ones_kept() -> None:
    stage = _stage_with({"k": "secret", "v": {"n": 1, "k": 2}}, deny=["/k", "/v/k"])
    (out,) = stage.transform(
        _delta(
            {"op": "test", "path": "/k", "value": "secret"},
            {"op": "test", "path": "/v", "value": {"n": 1, "k": 2}},
        )
    )
    assert _ops(out) == [{"op": "test", "path": "/v", "value": {"n": 1}}]


# -- run input echo ------------------------------------------------------------


def _echo(state: Any, messages: list[Any] | None = None) -> RunAgentInput:
    return RunAgentInput(
        thread_id="t",
        run_id="r",
        messages=messages or [],
        state=state,
        tools=[],
        context=[],
        forwarded_props={},
    )


def test_the_run_input_echo_is_pruned_and_the_client_gets_the_pruned_state() -> None:
    stage = StateFilter(deny=["/*/api_key"])
    started = run_started("t", "r", input=_echo({"config": {"api_key": "sk-1", "m": 1}}))
    out = stage.transform(started[0])
    assert [e.type for e in out] == [EventType.RUN_STARTED, EventType.STATE_SNAPSHOT]
    assert out[0].input.state == {"config": {"m": 1}}  # type: ignore[attr-defined]
    assert out[1].snapshot == {"config": {"m": 1}}  # type: ignore[attr-defined]
    assert "sk-1" not in wire(out)
    # later deltas are translated against the echoed state
    (delta,) = stage.transform(_delta({"op": "copy", "from": "/config", "path": "/c"}))
    assert _ops(delta) == [{"op": "add", "path": "/c", "value": {"m": 1}}]


def test_an_echo_with_nothing_hidden_passes_alone() -> None:
    started = run_started("t", "r", input=_echo({"todos": []}))[0]
    assert StateFilter(deny=["/secret"]).transform(started) == (started,)


# -- activities ----------------------------------------------------------------


def test_activities_are_scoped_only_when_asked() -> None:
    content = {"plan": ["a"], "debug": {"prompt": "SECRET"}}
    snapshot = ActivitySnapshotEvent(message_id="act", activity_type="plan", content=content)
    assert StateFilter(deny=["/debug"]).transform(snapshot) == (snapshot,)
    stage = StateFilter(deny=["/debug"], activities=True)
    (out,) = stage.transform(snapshot)
    assert out.content == {"plan": ["a"]}  # type: ignore[attr-defined]
    (patched,) = stage.transform(
        ActivityDeltaEvent.model_validate(
            {
                "messageId": "act",
                "activityType": "plan",
                "patch": [
                    {"op": "add", "path": "/debug/more", "value": "SECRET2"},
                    {"op": "add", "path": "/plan/-", "value": "b"},
                ],
            }
        )
    )
    assert [op.model_dump(by_alias=True) for op in patched.patch] == [  # type: ignore[attr-defined]
        {"op": "add", "path": "/plan/-", "value": "b"},
    ]


def test_activity_content_folds_pruned_through_snapshots_and_deltas() -> None:
    stage = StateFilter(allow=["/plan"], activities=True)
    inner: list[BaseEvent] = [
        ActivitySnapshotEvent(
            message_id="act", activity_type="plan", content={"plan": ["a"], "debug": "SECRET"}
        ),
        ActivityDeltaEvent.model_validate(
            {
                "messageId": "act",
                "activityType": "plan",
                "patch": [
                    {"op": "move", "from": "/debug", "path": "/plan/0"},
                    {"op": "add", "path": "/debug", "value": "SECRET2"},
                ],
            }
        ),
    ]
    out = through(stage, run_events(inner))
    (message,) = [m for m in consumed(out).messages if m["role"] == "activity"]
    assert message["content"] == {"plan": ["SECRET", "a"]}  # moved into view: shows
    assert "SECRET2" not in wire(out)


def test_an_activity_delta_for_content_never_seen_is_sent_empty() -> None:
    stage = StateFilter(deny=["/debug"], activities=True)
    (out,) = stage.transform(
        ActivityDeltaEvent.model_validate(
            {
                "messageId": "unknown",
                "activityType": "plan",
                "patch": [{"op": "add", "path": "/debug", "value": "SECRET"}],
            }
        )
    )
    assert out.patch == []  # type: ignore[attr-defined]


def test_activity_messages_in_snapshots_and_the_echo_are_pruned() -> None:
    stage = StateFilter(deny=["/debug"], activities=True)
    activity = ActivityMessage(
        id="act", role="activity", activity_type="plan", content={"debug": "SECRET", "p": 1}
    )
    user = UserMessage(id="u", role="user", content="hi")
    (snap,) = stage.transform(MessagesSnapshotEvent(messages=[user, activity]))
    assert snap.messages[1].content == {"p": 1}  # type: ignore[attr-defined]
    (started,) = stage.transform(run_started("t", "r", input=_echo(None, [user, activity]))[0])
    assert started.input.messages[1].content == {"p": 1}  # type: ignore[attr-defined]
    assert "SECRET" not in wire([snap, started])


# -- limits and bad configuration ---------------------------------------------------


def test_a_state_beyond_the_limits_is_refused_with_a_clear_error() -> None:
    stage = StateFilter(deny=["/x"], limits=Limits(max_nodes=10))
    with pytest.raises(StreamRejected, match=r"larger than the limits allow.*max_nodes=10"):
        stage.transform(_snapshot({"a": list(range(20))}))


def test_a_delta_growing_the_state_past_the_limits_does_not_apply() -> None:
    stage = StateFilter(deny=["/x"], limits=Limits(max_nodes=10))
    inner: list[BaseEvent] = [
        _snapshot({"a": []}),
        _delta({"op": "add", "path": "/a/-", "value": list(range(20))}),
        _delta({"op": "add", "path": "/a/-", "value": 1}),
    ]
    _, state = _final_state(stage, inner)
    assert state == {"a": [1]}


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({}, "give `allow` or `deny`"),
        ({"deny": "/secret"}, r"give a list of JSON Pointers, e\.g\. deny=\['/secret'\]"),
        ({"deny": ["secret"]}, "deny pointer #1 'secret' is not a JSON Pointer"),
        ({"allow": ["/a", "/b~2"]}, "allow pointer #2 '/b~2' is not a JSON Pointer"),
        ({"deny": [""]}, "empty pointer"),
        ({"allow": []}, "`allow` is empty"),
        ({"deny": ["/a"], "activities": "yes"}, "activities must be true or false"),
    ],
)
def test_bad_options_are_explained(options: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        StateFilter(**options)


# -- YAML and async ------------------------------------------------------------


def test_yaml_declares_the_same_stage() -> None:
    factory = load_chain(
        """
        transformers:
          - type: state_filter
            allow: [/todos, /messages/*/content]
            deny: [/messages/*/secret]
            activities: true
        """
    )
    events = run_events([_snapshot({"todos": [1], "messages": [{"content": "c", "secret": "s"}]})])
    out = factory().apply_sync(events)
    assert consumed(out).state == {"todos": [1], "messages": [{"content": "c"}]}


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("    deny: [secret]\n", "is not a JSON Pointer"),
        ("    activities: true\n", "give `allow` or `deny`"),
        ("    deny: ['']\n", "denies the whole state"),
    ],
)
def test_yaml_mistakes_are_reported(body: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_chain("transformers:\n  - type: state_filter\n" + body)


@pytest.mark.anyio
async def test_runs_in_an_async_chain() -> None:
    events = run_events([*text("m", "hi"), _snapshot({"a": 1, "secret": json.dumps({"k": 1})})])
    out = await through_async(StateFilter(deny=["/secret"]), events)
    assert consumed(out).state == {"a": 1}


def _nested(depth: int) -> list[Any]:
    deep: list[Any] = []
    for _ in range(depth - 1):
        deep = [deep]
    return deep


def test_a_deeply_nested_state_is_copied_and_translated_without_recursion() -> None:
    stage = StateFilter(deny=["/messages/*/secret"])
    (snap,) = stage.transform(_snapshot({"deep": _nested(1000), "x": 1}))
    assert snap.snapshot["x"] == 1  # type: ignore[attr-defined]
    (out,) = stage.transform(
        _delta(
            {"op": "copy", "from": "/deep", "path": "/again"},
            {"op": "add", "path": "/more", "value": _nested(1000)},
        )
    )
    assert [op.op for op in out.delta] == ["copy", "add"]  # type: ignore[attr-defined]


def test_an_untranslatable_activity_delta_becomes_one_root_replace() -> None:
    stage = StateFilter(deny=["/0"], activities=True)
    stage.transform(ActivitySnapshotEvent(message_id="act", activity_type="plan", content={}))
    (out,) = stage.transform(
        ActivityDeltaEvent.model_validate(
            {
                "messageId": "act",
                "activityType": "plan",
                # the content becomes an array whose element 0 is hidden; the insert shifts it
                "patch": [
                    {"op": "replace", "path": "", "value": ["hidden", "b"]},
                    {"op": "add", "path": "/0", "value": "new"},
                ],
            }
        )
    )
    assert isinstance(out, ActivityDeltaEvent)
    assert [op.model_dump(by_alias=True) for op in out.patch] == [
        {"op": "replace", "path": "", "value": ["hidden", "b"]}
    ]


def test_fresh_instances_do_not_share_the_state_they_follow() -> None:
    configured = StateFilter(deny=["/secret"])
    first = configured.fresh()
    first.transform(_snapshot({"a": {"secret": 1}}))
    second = configured.fresh()
    # the second never saw the snapshot: the path does not exist in its (empty) state
    (out,) = second.transform(_delta({"op": "copy", "from": "/a", "path": "/b"}))
    assert _ops(out) == []
    (out,) = first.transform(_delta({"op": "copy", "from": "/a", "path": "/b"}))
    assert _ops(out) == [{"op": "copy", "from": "/a", "path": "/b"}]
