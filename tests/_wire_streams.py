"""Random AG-UI wire streams for differential testing: valid runs plus targeted mutations.

Streams are built as wire dicts (what arrives over SSE), because half the
point is to feed malformed material — wrong types, unknown types, unknown
union members — that no ``ag_ui.core`` model can even hold. A generator is a
plain ``random.Random``, so a hypothesis ``st.randoms()`` draw (or a seed)
reproduces a whole batch; batches are what make a node oracle affordable.

``valid_stream(rng)`` builds one or two runs from blocks (text, tool calls
with results, reasoning, steps, state snapshots and deltas, message and
activity snapshots, chunk streams, nested subagents, custom/raw/encrypted
values), sometimes interleaving blocks so ids overlap. ``mutate(rng,
stream)`` applies one of the mutations named in ``MUTATIONS``.
"""

from __future__ import annotations

import copy
import random
from collections.abc import Callable
from typing import Any

Event = dict[str, Any]

_WORDS = ["Hello", " world", ".", " 42", "", "ünïcödé", " 🙂", "\n", ' "quoted"']


class _Gen:
    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.n = 0
        self.state: dict[str, Any] = {}
        self.message_ids: list[str] = []
        self.call_ids: list[str] = []

    def new_id(self, prefix: str) -> str:
        self.n += 1
        # Sometimes reuse an id (reopen a closed message / call).
        pool = self.message_ids if prefix == "m" else self.call_ids
        if pool and self.rng.random() < 0.08:
            return self.rng.choice(pool)
        new = f"{prefix}{self.n}"
        pool.append(new)
        return new

    def tag(self, owner: str | None, event: Event) -> Event:
        if owner is not None:
            event["subagentRunId"] = owner
        return event

    def maybe_metadata(self, event: Event) -> Event:
        if self.rng.random() < 0.15:
            event["metadata"] = {self.rng.choice(["a", "b", "trace"]): self.rng.randint(0, 3)}
        return event

    def deltas(self) -> list[str]:
        return [self.rng.choice(_WORDS) for _ in range(self.rng.randint(0, 3))]

    # -- blocks ----------------------------------------------------------------

    def text(self, owner: str | None) -> list[Event]:
        mid = self.new_id("m")
        start: Event = {"type": "TEXT_MESSAGE_START", "messageId": mid}
        if self.rng.random() < 0.5:
            start["role"] = self.rng.choice(["assistant", "assistant", "user", "system"])
        out = [self.maybe_metadata(self.tag(owner, start))]
        for d in self.deltas():
            content = {"type": "TEXT_MESSAGE_CONTENT", "messageId": mid, "delta": d}
            out.append(
                self.maybe_metadata(self.tag(owner if self.rng.random() < 0.7 else None, content))
            )
        out.append(
            self.tag(
                owner if self.rng.random() < 0.7 else None,
                {"type": "TEXT_MESSAGE_END", "messageId": mid},
            )
        )
        return out

    def tool(self, owner: str | None) -> list[Event]:
        cid = self.new_id("c")
        start: Event = {
            "type": "TOOL_CALL_START",
            "toolCallId": cid,
            "toolCallName": self.rng.choice(["search", "lookup", "calc"]),
        }
        r = self.rng.random()
        if r < 0.5 and self.message_ids:
            start["parentMessageId"] = self.rng.choice(self.message_ids)
        elif r < 0.75:
            start["parentMessageId"] = self.new_id("m")
        out = [self.maybe_metadata(self.tag(owner, start))]
        for piece in self.rng.choice([[], ['{"q":'], ['{"q":', '"x"}'], ["not json"]]):
            out.append(
                self.tag(owner, {"type": "TOOL_CALL_ARGS", "toolCallId": cid, "delta": piece})
            )
        out.append(self.tag(owner, {"type": "TOOL_CALL_END", "toolCallId": cid}))
        if self.rng.random() < 0.6:
            out.append(self.result(cid, owner))
        return out

    def result(self, cid: str, owner: str | None) -> Event:
        content: Any = self.rng.choice(["ok", "", '{"n": 1}'])
        if self.rng.random() < 0.2:
            content = [
                {"type": "text", "text": "part"},
                {"type": "image", "source": {"type": "url", "value": "https://x/y.png"}},
            ]
        return self.maybe_metadata(
            self.tag(
                owner,
                {
                    "type": "TOOL_CALL_RESULT",
                    "messageId": self.new_id("m"),
                    "toolCallId": cid,
                    "content": content,
                },
            )
        )

    def reasoning(self, owner: str | None) -> list[Event]:
        span = f"span{self.n}"
        mid = self.new_id("m")
        inner = [
            self.tag(
                owner, {"type": "REASONING_MESSAGE_START", "messageId": mid, "role": "reasoning"}
            )
        ]
        inner += [
            self.tag(owner, {"type": "REASONING_MESSAGE_CONTENT", "messageId": mid, "delta": d})
            for d in self.deltas()
        ]
        inner.append(self.tag(owner, {"type": "REASONING_MESSAGE_END", "messageId": mid}))
        if self.rng.random() < 0.3:
            inner.append(
                self.tag(
                    owner,
                    {
                        "type": "REASONING_ENCRYPTED_VALUE",
                        "subtype": "message",
                        "entityId": mid,
                        "encryptedValue": "b3BhcXVl",
                    },
                )
            )
        if self.rng.random() < 0.5:
            return inner
        return [
            self.tag(owner, {"type": "REASONING_START", "messageId": span}),
            *inner,
            self.tag(owner, {"type": "REASONING_END", "messageId": span}),
        ]

    def step(self, owner: str | None, depth: int) -> list[Event]:
        name = self.rng.choice(["plan", "act", "tools"])
        inner = self.block(owner, depth + 1) if depth < 2 else []
        return [
            self.tag(owner, {"type": "STEP_STARTED", "stepName": name}),
            *inner,
            self.tag(owner, {"type": "STEP_FINISHED", "stepName": name}),
        ]

    def state_event(self, owner: str | None) -> list[Event]:
        rng = self.rng
        if not self.state or rng.random() < 0.25:
            self.state = {"count": rng.randint(0, 5), "items": ["a"], "flag": rng.random() < 0.5}
            return [
                self.tag(owner, {"type": "STATE_SNAPSHOT", "snapshot": copy.deepcopy(self.state)})
            ]
        ops: list[Event] = []
        for _ in range(rng.randint(1, 3)):
            choice = rng.random()
            keys = sorted(self.state)
            if choice < 0.25:
                key = rng.choice(["count", "new", "flag"])
                value: Any = rng.choice([1, "v", None, {"deep": [1, 2]}, [True]])
                ops.append({"op": "add", "path": f"/{key}", "value": value})
                self.state[key] = value
            elif choice < 0.45 and keys:
                key = rng.choice(keys)
                ops.append({"op": "replace", "path": f"/{key}", "value": rng.randint(0, 9)})
                self.state[key] = ops[-1]["value"]
            elif choice < 0.6 and isinstance(self.state.get("items"), list):
                ops.append({"op": "add", "path": "/items/-", "value": rng.choice(["b", 3])})
                self.state["items"].append(ops[-1]["value"])
            elif choice < 0.7 and keys:
                key = rng.choice(keys)
                ops.append({"op": "remove", "path": f"/{key}"})
                del self.state[key]
            elif choice < 0.8 and keys:
                key = rng.choice(keys)
                ops.append({"op": "test", "path": f"/{key}", "value": self.state[key]})
            elif choice < 0.87 and "count" in self.state:
                ops.append({"op": "copy", "from": "/count", "path": "/copied"})
                self.state["copied"] = copy.deepcopy(self.state["count"])
            elif choice < 0.93:
                # Does not apply: the whole delta must be skipped, state kept.
                ops.append(
                    rng.choice(
                        [
                            {"op": "remove", "path": "/missing"},
                            {"op": "test", "path": "/count", "value": "never"},
                            {"op": "replace", "path": "/nope/deeper", "value": 1},
                        ]
                    )
                )
                return [self.tag(owner, {"type": "STATE_DELTA", "delta": ops})]
            else:
                ops.append(
                    {"op": "move", "from": "/items", "path": "/moved"}
                    if "items" in self.state
                    else {"op": "add", "path": "/x", "value": 0}
                )
                if "items" in self.state:
                    self.state["moved"] = self.state.pop("items")
                else:
                    self.state["x"] = 0
        return [self.tag(owner, {"type": "STATE_DELTA", "delta": copy.deepcopy(ops)})]

    def messages_snapshot(self) -> list[Event]:
        rng = self.rng
        messages: list[Event] = []
        for _ in range(rng.randint(0, 4)):
            mid = (
                rng.choice(self.message_ids)
                if self.message_ids and rng.random() < 0.5
                else self.new_id("m")
            )
            kind = rng.choice(["user", "assistant", "tool", "reasoning", "activity", "system"])
            if kind == "user":
                messages.append(
                    {
                        "id": mid,
                        "role": "user",
                        "content": rng.choice(["hi", [{"type": "text", "text": "a"}]]),
                    }
                )
            elif kind == "assistant":
                msg: Event = {"id": mid, "role": "assistant", "content": "answer"}
                if rng.random() < 0.5:
                    cid = self.new_id("c")
                    msg["toolCalls"] = [
                        {
                            "id": cid,
                            "type": "function",
                            "function": {"name": "search", "arguments": "{}"},
                        }
                    ]
                messages.append(msg)
            elif kind == "tool":
                messages.append(
                    {
                        "id": mid,
                        "role": "tool",
                        "content": "res",
                        "toolCallId": rng.choice(self.call_ids or ["c0"]),
                    }
                )
            elif kind == "reasoning":
                messages.append({"id": mid, "role": "reasoning", "content": "thought"})
            elif kind == "activity":
                messages.append(
                    {"id": mid, "role": "activity", "activityType": "search", "content": {"n": 1}}
                )
            else:
                messages.append({"id": mid, "role": "system", "content": "be nice"})
            if rng.random() < 0.2:
                messages[-1]["subagentRunId"] = "s-snap"
        return [{"type": "MESSAGES_SNAPSHOT", "messages": messages}]

    def activity(self, owner: str | None) -> list[Event]:
        mid = self.new_id("m")
        snap: Event = {
            "type": "ACTIVITY_SNAPSHOT",
            "messageId": mid,
            "activityType": "search",
            "content": {"query": "q", "found": 0},
        }
        if self.rng.random() < 0.3:
            snap["replace"] = self.rng.random() < 0.5
        out = [self.tag(owner, snap)]
        for _ in range(self.rng.randint(0, 2)):
            path = self.rng.choice(["/found", "/found", "/missing/x"])
            out.append(
                self.tag(
                    owner,
                    {
                        "type": "ACTIVITY_DELTA",
                        "messageId": mid,
                        "activityType": "search",
                        "patch": [{"op": "replace", "path": path, "value": self.rng.randint(1, 9)}],
                    },
                )
            )
        return out

    def chunks(self, owner: str | None) -> list[Event]:
        rng = self.rng
        kind = rng.choice(["TEXT_MESSAGE_CHUNK", "TOOL_CALL_CHUNK", "REASONING_MESSAGE_CHUNK"])
        out: list[Event] = []
        if kind == "TOOL_CALL_CHUNK":
            cid = self.new_id("c")
            first: Event = {"type": kind, "toolCallId": cid, "toolCallName": "search", "delta": "{"}
            if rng.random() < 0.3 and self.message_ids:
                first["parentMessageId"] = rng.choice(self.message_ids)
        else:
            first = {"type": kind, "messageId": self.new_id("m"), "delta": rng.choice(_WORDS)}
            if kind == "TEXT_MESSAGE_CHUNK" and rng.random() < 0.4:
                first["role"] = rng.choice(["assistant", "user"])
        out.append(self.maybe_metadata(self.tag(owner, first)))
        for _ in range(rng.randint(0, 3)):
            cont: Event = {"type": kind}
            if rng.random() < 0.8:
                cont["delta"] = rng.choice(_WORDS)
            if rng.random() < 0.2:
                idkey = "toolCallId" if kind == "TOOL_CALL_CHUNK" else "messageId"
                cont[idkey] = first[idkey]
            out.append(self.maybe_metadata(self.tag(owner if rng.random() < 0.6 else None, cont)))
        return out

    def subagent(self, depth: int, parent: str | None) -> list[Event]:
        sid = f"s{self.n}"
        self.n += 1
        started: Event = {"type": "SUBAGENT_STARTED", "subagentRunId": sid, "name": "helper"}
        if parent is not None:
            started["parentSubagentRunId"] = parent
        if self.call_ids and self.rng.random() < 0.3:
            started["parentToolCallId"] = self.rng.choice(self.call_ids)
        inner: list[Event] = []
        for _ in range(self.rng.randint(1, 3)):
            inner += self.block(sid, depth + 1)
        end: Event
        if self.rng.random() < 0.2:
            end = {"type": "SUBAGENT_ERROR", "subagentRunId": sid, "message": "failed"}
        else:
            end = {"type": "SUBAGENT_FINISHED", "subagentRunId": sid}
            if self.rng.random() < 0.3:
                end["outcome"] = self.rng.choice(
                    [{"type": "success"}, {"type": "suspended", "interruptIds": ["i1"]}]
                )
        if self.rng.random() < 0.15:
            return [started, *inner]  # attribution continues, lifecycle left open
        return [started, *inner, end]

    def misc(self, owner: str | None) -> list[Event]:
        choice = self.rng.random()
        if choice < 0.4:
            return [self.tag(owner, {"type": "CUSTOM", "name": "x", "value": {"v": 1}})]
        if choice < 0.7:
            return [self.tag(owner, {"type": "RAW", "event": {"p": 1}, "source": "openai"})]
        entity = self.rng.choice(self.call_ids or ["c0"])
        return [
            self.tag(
                owner,
                {
                    "type": "REASONING_ENCRYPTED_VALUE",
                    "subtype": "tool-call",
                    "entityId": entity,
                    "encryptedValue": "eA==",
                },
            )
        ]

    def block(self, owner: str | None, depth: int) -> list[Event]:
        weights: list[tuple[Callable[[], list[Event]], float]] = [
            (lambda: self.text(owner), 4),
            (lambda: self.tool(owner), 3),
            (lambda: self.reasoning(owner), 1.5),
            (lambda: self.state_event(owner), 2),
            (lambda: self.chunks(owner), 2.5),
            (lambda: self.activity(owner), 1),
            (lambda: self.misc(owner), 1),
        ]
        if depth < 2:
            weights.append((lambda: self.step(owner, depth), 1))
            weights.append((lambda: self.subagent(depth, owner), 1.2 if depth == 0 else 0.4))
        if owner is None:
            weights.append((self.messages_snapshot, 0.6))
        makers = [m for m, _ in weights]
        return self.rng.choices(makers, [w for _, w in weights])[0]()

    def run(self, index: int) -> list[Event]:
        rng = self.rng
        started: Event = {"type": "RUN_STARTED", "threadId": "t", "runId": f"r{index}"}
        if rng.random() < 0.3:
            started["protocolVersion"] = "1.0"
        if rng.random() < 0.15:
            started["input"] = {
                "threadId": "t",
                "runId": f"r{index}",
                "messages": [{"id": self.new_id("m"), "role": "user", "content": "question"}],
            }
        blocks = [self.block(None, 0) for _ in range(rng.randint(0, 6))]
        if len(blocks) >= 2 and rng.random() < 0.35:
            a, b = blocks.pop(), blocks.pop()
            blocks.append(_riffle(rng, a, b))
        body = [e for block in blocks for e in block]
        end: Event
        r = rng.random()
        if r < 0.12:
            end = {"type": "RUN_ERROR", "message": "boom"}
            if rng.random() < 0.5:
                end["code"] = "AGENT_ERROR"
        else:
            end = {"type": "RUN_FINISHED", "threadId": "t", "runId": f"r{index}"}
            if r < 0.25:
                end["outcome"] = {
                    "type": "interrupt",
                    "interrupts": [{"id": "i1", "reason": "approval"}],
                }
            elif r < 0.32:
                end["outcome"] = {"type": "cancelled"}
            elif r < 0.5:
                end["outcome"] = {"type": "success"}
                if rng.random() < 0.3:
                    end["outcome"]["pendingToolCallIds"] = self.call_ids[-1:]
            if rng.random() < 0.2:
                end["usage"] = [{"model": "m", "inputTokens": 3, "outputTokens": 5}]
            if rng.random() < 0.1:
                end["result"] = {"answer": 42}
        return [started, *body, end]


def _riffle(rng: random.Random, a: list[Event], b: list[Event]) -> list[Event]:
    out: list[Event] = []
    i = j = 0
    while i < len(a) or j < len(b):
        if j >= len(b) or (i < len(a) and rng.random() < 0.5):
            out.append(a[i])
            i += 1
        else:
            out.append(b[j])
            j += 1
    return out


def valid_stream(rng: random.Random) -> list[Event]:
    """One to three runs (rarely opening with a bare RUN_ERROR)."""
    gen = _Gen(rng)
    out: list[Event] = []
    if rng.random() < 0.05:
        out.append({"type": "RUN_ERROR", "message": "unreachable"})
    for index in range(rng.choice([1, 1, 1, 2, 3])):
        out += gen.run(index)
    return out


# -- mutations -------------------------------------------------------------------

_ATTRIBUTABLE = {
    "TEXT_MESSAGE_START",
    "TEXT_MESSAGE_CONTENT",
    "TEXT_MESSAGE_END",
    "TOOL_CALL_START",
    "TOOL_CALL_ARGS",
    "TOOL_CALL_END",
    "TOOL_CALL_RESULT",
    "STEP_STARTED",
    "STEP_FINISHED",
    "REASONING_START",
    "REASONING_END",
    "REASONING_MESSAGE_START",
    "REASONING_MESSAGE_CONTENT",
    "REASONING_MESSAGE_END",
    "TEXT_MESSAGE_CHUNK",
    "TOOL_CALL_CHUNK",
    "REASONING_MESSAGE_CHUNK",
    "ACTIVITY_DELTA",
    "ACTIVITY_SNAPSHOT",
    "REASONING_ENCRYPTED_VALUE",
}


def _pick(rng: random.Random, stream: list[Event], pred: Callable[[Event], bool]) -> int | None:
    candidates = [i for i, e in enumerate(stream) if pred(e)]
    return rng.choice(candidates) if candidates else None


def _drop(rng: random.Random, s: list[Event]) -> None:
    if s:
        del s[rng.randrange(len(s))]


def _duplicate(rng: random.Random, s: list[Event]) -> None:
    if s:
        i = rng.randrange(len(s))
        s.insert(i + rng.randint(0, 2), copy.deepcopy(s[i]))


def _swap(rng: random.Random, s: list[Event]) -> None:
    if len(s) >= 2:
        i = rng.randrange(len(s) - 1)
        j = i + 1 if rng.random() < 0.7 else rng.randrange(len(s))
        s[i], s[j] = s[j], s[i]


def _wrong_owner(rng: random.Random, s: list[Event]) -> None:
    i = _pick(rng, s, lambda e: e.get("type") in _ATTRIBUTABLE)
    if i is not None:
        if "subagentRunId" in s[i] and rng.random() < 0.4:
            del s[i]["subagentRunId"]
        else:
            s[i]["subagentRunId"] = rng.choice(["s-other", "s1", "s3"])


def _conflicting_chunk(rng: random.Random, s: list[Event]) -> None:
    i = _pick(rng, s, lambda e: e.get("type") in ("TEXT_MESSAGE_CHUNK", "TOOL_CALL_CHUNK"))
    if i is None:
        return
    if s[i]["type"] == "TEXT_MESSAGE_CHUNK":
        s[i]["role"] = rng.choice(["user", "system", "assistant"])
        if rng.random() < 0.3:
            s[i]["name"] = "other"
    else:
        key = rng.choice(["toolCallName", "parentMessageId"])
        s[i][key] = "conflicting"
    if rng.random() < 0.3:
        s[i].pop("messageId", None)
        s[i].pop("toolCallId", None)


def _unknown_type(rng: random.Random, s: list[Event]) -> None:
    s.insert(
        rng.randint(0, len(s)), {"type": rng.choice(["FUTURE_EVENT", "PING", "x"]), "payload": 1}
    )


def _unknown_property(rng: random.Random, s: list[Event]) -> None:
    if s:
        s[rng.randrange(len(s))]["futureProp"] = {"n": 1}


def _unknown_member(rng: random.Random, s: list[Event]) -> None:
    i = _pick(
        rng,
        s,
        lambda e: (
            e.get("type")
            in ("RUN_FINISHED", "STATE_DELTA", "MESSAGES_SNAPSHOT", "TOOL_CALL_RESULT")
        ),
    )
    if i is None:
        return
    e = s[i]
    if e["type"] == "RUN_FINISHED":
        e["outcome"] = {"type": "paused"}
    elif e["type"] == "STATE_DELTA" and isinstance(e.get("delta"), list):
        e["delta"].insert(0, {"op": "increment", "path": "/count", "value": 1})
    elif e["type"] == "MESSAGES_SNAPSHOT" and isinstance(e.get("messages"), list):
        e["messages"].append({"id": "mx", "role": "narrator", "content": "?"})
    else:
        e["content"] = [{"type": "text", "text": "a"}, {"type": "hologram"}]


_MALFORMED: list[tuple[str, Any]] = [
    ("delta", 42),
    ("messageId", None),
    ("messageId", 7),
    ("role", "narrator"),
    ("toolCallName", None),
    ("stepName", ["x"]),
    ("outcome", "success"),
    ("timestamp", 1.5),
    ("timestamp", "now"),
    ("metadata", [1]),
    ("subagentRunId", None),
    ("snapshot", None),
    ("name", None),
    ("content", 3),
    ("replace", "yes"),
    ("delta", {"op": "add"}),
]


def _malformed(rng: random.Random, s: list[Event]) -> None:
    if not s:
        return
    i = rng.randrange(len(s))
    key, value = rng.choice(_MALFORMED)
    event = s[i]
    if key in event or rng.random() < 0.3:
        event[key] = value
    else:
        # Remove a required-looking field instead.
        removable = [k for k in event if k != "type"]
        if removable:
            del event[rng.choice(removable)]


def _legacy_null(rng: random.Random, s: list[Event]) -> None:
    i = _pick(rng, s, lambda e: e.get("type") in ("TOOL_CALL_START", "RUN_FINISHED"))
    if i is not None:
        key = "parentMessageId" if s[i]["type"] == "TOOL_CALL_START" else "outcome"
        s[i][key] = None
    elif s:
        s[rng.randrange(len(s))]["rawEvent"] = None


def _truncate(rng: random.Random, s: list[Event]) -> None:
    if len(s) > 1:
        del s[rng.randint(1, len(s) - 1) :]


MUTATIONS: dict[str, Callable[[random.Random, list[Event]], None]] = {
    "drop": _drop,
    "duplicate": _duplicate,
    "swap": _swap,
    "wrong-owner": _wrong_owner,
    "conflicting-chunk": _conflicting_chunk,
    "unknown-type": _unknown_type,
    "unknown-property": _unknown_property,
    "unknown-member": _unknown_member,
    "malformed": _malformed,
    "legacy-null": _legacy_null,
    "truncate": _truncate,
}


def mutate(rng: random.Random, stream: list[Event]) -> tuple[list[Event], list[str]]:
    """A mutated deep copy of ``stream`` and the names of the mutations applied."""
    out = copy.deepcopy(stream)
    names = rng.sample(sorted(MUTATIONS), rng.choice([1, 1, 1, 2]))
    for name in names:
        MUTATIONS[name](rng, out)
    return out, names
