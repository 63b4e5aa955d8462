"""The mock backend's scenario file: what to match in a request, what run to answer with.

A scenario file is YAML (or JSON) read with the chain files' position-keeping
parser (``agui_pipes.config._source``), so a mistake is reported as
``file:line:column: key: message`` exactly as a chain file's is, with the
valid choices and a "did you mean" for a misspelt key. The file is checked
whole when it is loaded: a mock that starts has no scenario that fails later
for a typo.

The parsed form is plain frozen dataclasses: a ``Scenario`` holds a ``Match``
(the request conditions), a script (a tuple of ``Step``) and an ``Outcome``.
``_mock_script`` turns a scenario into a driver agent; this module only reads
and checks.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from ...config._errors import ConfigError, KeyPath, did_you_mean
from ...config._source import Located
from .faults import FaultPlan, parse_faults

__all__ = [
    "Match",
    "Outcome",
    "Scenario",
    "ScenarioFile",
    "Step",
    "ToolCallStep",
    "load_scenarios",
]

StepKind = Literal[
    "text", "reasoning", "tool_calls", "state", "subagent", "step", "custom", "sleep"
]


@dataclass(frozen=True)
class Match:
    """What a request must look like for a scenario to answer it (all given must hold)."""

    user: re.Pattern[str] | None = None
    """Searched (``re.search``) in the text of the last user message."""
    thread: re.Pattern[str] | None = None
    """Matched whole (``re.fullmatch``) against ``threadId``."""
    tool_result: bool | str | None = None
    """The last message is a tool result (``True``), of the tool named so (a string),
    or is not one (``False``)."""
    resume: bool | None = None
    """The request carries ``resume`` answers to an interrupt (or does not)."""
    forwarded_props: Mapping[str, Any] | None = None
    """Each key is in ``forwardedProps`` with an equal value."""


@dataclass(frozen=True)
class ToolCallStep:
    """One tool call: a backend tool when ``result`` is given, else the frontend's to run."""

    name: str
    args: Any = field(default_factory=dict)
    result: Any = None
    has_result: bool = False


@dataclass(frozen=True)
class Step:
    """One entry of a script. ``kind`` says which of the other fields are used."""

    kind: StepKind
    text: str = ""
    tool_calls: tuple[ToolCallStep, ...] = ()
    state: Any = None
    delta: tuple[Any, ...] | None = None
    name: str = ""
    description: str | None = None
    script: tuple[Step, ...] = ()
    result: Any = None
    error: str | None = None
    value: Any = None
    seconds: float = 0.0


@dataclass(frozen=True)
class Outcome:
    """How the run ends: success, an interrupt, or a RUN_ERROR."""

    kind: Literal["success", "interrupt", "error"] = "success"
    result: Any = None
    reason: str = ""
    message: str | None = None
    interrupt_id: str | None = None
    tool_call: str | None = None
    response_schema: Mapping[str, Any] | None = None
    metadata: Mapping[str, Any] | None = None
    code: str | None = None


@dataclass(frozen=True)
class Scenario:
    """A request pattern and the run that answers it."""

    name: str
    match: Match
    script: tuple[Step, ...]
    outcome: Outcome
    pace: float = 0.0
    jitter: float = 0.0
    faults: FaultPlan | None = None
    replay: Path | None = None
    speed: float | None = None


@dataclass(frozen=True)
class ScenarioFile:
    """A loaded scenario file: its scenarios in match order and its seed."""

    scenarios: tuple[Scenario, ...]
    seed: int = 0
    source: str = "<mapping>"


_TOP_KEYS = ("version", "seed", "scenarios")
_SCENARIO_KEYS = (
    "name",
    "match",
    "script",
    "outcome",
    "pace",
    "jitter",
    "fault",
    "replay",
    "speed",
)
_MATCH_KEYS = ("user", "thread", "tool_result", "resume", "forwarded_props")
_STEP_KINDS: tuple[StepKind, ...] = (
    "text",
    "reasoning",
    "tool_calls",
    "state",
    "subagent",
    "step",
    "custom",
    "sleep",
)
_STEP_ALIASES = {"tool_call": "tool_calls"}
_TOOL_KEYS = ("name", "args", "result")
_OUTCOMES = ("success", "interrupt", "error")


class _Reader:
    """Type checks on a located document, each failing with the position of the value."""

    def __init__(self, doc: Located) -> None:
        self.doc = doc

    def fail(self, message: str, path: KeyPath, **extra: Any) -> ConfigError:
        return self.doc.error(message, path, **extra)

    def mapping(self, value: Any, path: KeyPath, keys: tuple[str, ...]) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise self.fail(f"expected a mapping, got {_kind(value)}", path)
        for key in value:
            if key not in keys:
                raise self.fail(
                    f"unknown key `{key}`",
                    (*path, key),
                    at_key=True,
                    choices=keys,
                    suggestion=did_you_mean(key, keys),
                )
        return value

    def text(self, value: Any, path: KeyPath) -> str:
        if not isinstance(value, str):
            raise self.fail(f"expected a string, got {_kind(value)}", path)
        return value

    def seconds(self, value: Any, path: KeyPath) -> float:
        if isinstance(value, bool) or not isinstance(value, int | float) or not value >= 0:
            raise self.fail(f"expected a number of seconds >= 0, got {_kind(value)}", path)
        return float(value)

    def pattern(self, value: Any, path: KeyPath) -> re.Pattern[str]:
        try:
            return re.compile(self.text(value, path))
        except re.error as exc:
            raise self.fail(f"not a valid regular expression: {exc}", path) from None

    def items(self, value: Any, path: KeyPath) -> list[Any]:
        if not isinstance(value, list):
            raise self.fail(f"expected a list, got {_kind(value)}", path)
        return value


def _kind(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"a boolean ({str(value).lower()})"
    if isinstance(value, int | float):
        return f"a number ({value})"
    if isinstance(value, str):
        return f"a string ({value!r})"
    if isinstance(value, list):
        return "a list"
    return "a mapping"


def load_scenarios(
    source: str | Path | Mapping[str, Any], *, env: Mapping[str, str] | None = None
) -> ScenarioFile:
    """Read and check a scenario file (a path, YAML text or a mapping).

    Raises ``agui_pipes.config.ConfigError`` located at the problem. Relative
    ``replay:`` paths are resolved against the file's directory.
    """
    from ...config._loader import read_source

    doc = read_source(source, env=env)
    base = Path(doc.source).parent if doc.source not in ("<string>", "<mapping>") else Path()
    return _file(_Reader(doc), base)


def _file(reader: _Reader, base: Path) -> ScenarioFile:
    top = reader.mapping(reader.doc.value if reader.doc.value is not None else {}, (), _TOP_KEYS)
    version = top.get("version", 1)
    if version != 1:
        raise reader.fail(
            f"unsupported version {version!r}: this mock reads version 1", ("version",)
        )
    seed = top.get("seed", 0)
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise reader.fail(f"expected an integer seed, got {_kind(seed)}", ("seed",))
    entries = reader.items(top.get("scenarios", []), ("scenarios",))
    scenarios = [
        _scenario(reader, entry, ("scenarios", i), base) for i, entry in enumerate(entries)
    ]
    names: dict[str, int] = {}
    for i, scenario in enumerate(scenarios):
        if scenario.name in names:
            raise reader.fail(
                f"duplicate scenario name `{scenario.name}` (first given by "
                f"scenarios[{names[scenario.name]}])",
                ("scenarios", i, "name"),
            )
        names[scenario.name] = i
    return ScenarioFile(tuple(scenarios), seed, reader.doc.source)


def _scenario(reader: _Reader, value: Any, path: KeyPath, base: Path) -> Scenario:
    entry = reader.mapping(value, path, _SCENARIO_KEYS)
    name = (
        reader.text(entry["name"], (*path, "name")) if "name" in entry else f"scenario-{path[-1]}"
    )
    if "script" in entry and "replay" in entry:
        raise reader.fail(
            "a scenario answers with a `script` or a `replay` file, not both",
            (*path, "replay"),
            at_key=True,
        )
    replay: Path | None = None
    if "replay" in entry:
        replay = base / reader.text(entry["replay"], (*path, "replay"))
        if not replay.exists():
            raise reader.fail(f"replay file not found: {replay}", (*path, "replay"))
    faults = None
    if "fault" in entry:
        spec = reader.text(entry["fault"], (*path, "fault"))
        try:
            faults = parse_faults(spec)
        except ValueError as exc:
            raise reader.fail(str(exc), (*path, "fault")) from None
    speed = None
    if "speed" in entry:
        speed = reader.seconds(entry["speed"], (*path, "speed"))
        if speed == 0:
            raise reader.fail(
                "speed must be > 0 (use .inf for as fast as possible)", (*path, "speed")
            )
    return Scenario(
        name=name,
        match=_match(reader, entry.get("match", {}), (*path, "match")),
        script=_script(reader, entry.get("script", []), (*path, "script")),
        outcome=_outcome(reader, entry.get("outcome", "success"), (*path, "outcome")),
        pace=reader.seconds(entry.get("pace", 0), (*path, "pace")),
        jitter=_fraction(reader, entry.get("jitter", 0), (*path, "jitter")),
        faults=faults,
        replay=replay,
        speed=speed,
    )


def _fraction(reader: _Reader, value: Any, path: KeyPath) -> float:
    number = reader.seconds(value, path)
    if number > 1:
        raise reader.fail(f"jitter is a fraction of the pace, 0 to 1, got {number}", path)
    return number


def _match(reader: _Reader, value: Any, path: KeyPath) -> Match:
    entry = reader.mapping(value if value is not None else {}, path, _MATCH_KEYS)
    tool_result = entry.get("tool_result")
    if tool_result is not None and not isinstance(tool_result, bool | str):
        raise reader.fail(
            f"expected true, false or a tool name, got {_kind(tool_result)}", (*path, "tool_result")
        )
    resume = entry.get("resume")
    if resume is not None and not isinstance(resume, bool):
        raise reader.fail(f"expected true or false, got {_kind(resume)}", (*path, "resume"))
    props = entry.get("forwarded_props")
    if props is not None and not isinstance(props, dict):
        raise reader.fail(f"expected a mapping, got {_kind(props)}", (*path, "forwarded_props"))
    return Match(
        user=reader.pattern(entry["user"], (*path, "user")) if "user" in entry else None,
        thread=reader.pattern(entry["thread"], (*path, "thread")) if "thread" in entry else None,
        tool_result=tool_result,
        resume=resume,
        forwarded_props=props,
    )


def _script(reader: _Reader, value: Any, path: KeyPath) -> tuple[Step, ...]:
    return tuple(
        _step(reader, item, (*path, i)) for i, item in enumerate(reader.items(value, path))
    )


def _step(reader: _Reader, value: Any, path: KeyPath) -> Step:
    if not isinstance(value, dict) or len(value) != 1:
        raise reader.fail(
            "a script step is a mapping with one key, the kind of step",
            path,
            choices=_STEP_KINDS,
        )
    ((written, body),) = value.items()
    key = _STEP_ALIASES.get(written, written)
    at = (*path, written)
    if key not in _STEP_KINDS:
        raise reader.fail(
            f"unknown step `{written}`",
            at,
            at_key=True,
            choices=_STEP_KINDS,
            suggestion=did_you_mean(written, _STEP_KINDS),
        )
    if key in ("text", "reasoning"):
        return Step(key, text=reader.text(body, at))
    if key == "sleep":
        return Step("sleep", seconds=reader.seconds(body, at))
    if key == "tool_calls":
        calls = [body] if written == "tool_call" else reader.items(body, at)
        paths = [at] if written == "tool_call" else [(*at, i) for i in range(len(calls))]
        return Step(
            "tool_calls",
            tool_calls=tuple(_tool(reader, c, p) for c, p in zip(calls, paths, strict=True)),
        )
    if key == "state":
        entry = reader.mapping(body, at, ("snapshot", "delta"))
        if len(entry) != 1:
            raise reader.fail("a state step has exactly one of `snapshot` and `delta`", at)
        if "delta" in entry:
            return Step("state", delta=tuple(reader.items(entry["delta"], (*at, "delta"))))
        return Step("state", state=entry["snapshot"])
    if key == "custom":
        entry = reader.mapping(body, at, ("name", "value"))
        return Step(
            "custom", name=reader.text(entry.get("name"), (*at, "name")), value=entry.get("value")
        )
    if key == "step":
        entry = reader.mapping(body, at, ("name", "script"))
        return Step(
            "step",
            name=reader.text(entry.get("name"), (*at, "name")),
            script=_script(reader, entry.get("script", []), (*at, "script")),
        )
    entry = reader.mapping(body, at, ("name", "description", "script", "result", "error"))
    if "result" in entry and "error" in entry:
        raise reader.fail("a subagent ends with a `result` or an `error`, not both", (*at, "error"))
    description = entry.get("description")
    return Step(
        "subagent",
        name=reader.text(entry.get("name"), (*at, "name")),
        description=reader.text(description, (*at, "description"))
        if description is not None
        else None,
        script=_script(reader, entry.get("script", []), (*at, "script")),
        result=entry.get("result"),
        error=reader.text(entry["error"], (*at, "error")) if "error" in entry else None,
    )


def _tool(reader: _Reader, value: Any, path: KeyPath) -> ToolCallStep:
    entry = reader.mapping(value, path, _TOOL_KEYS)
    return ToolCallStep(
        name=reader.text(entry.get("name"), (*path, "name")),
        args=entry.get("args", {}),
        result=entry.get("result"),
        has_result="result" in entry,
    )


def _outcome(reader: _Reader, value: Any, path: KeyPath) -> Outcome:
    if value == "success":
        return Outcome()
    if isinstance(value, str):
        raise reader.fail(
            f"unknown outcome `{value}`",
            path,
            choices=_OUTCOMES,
            suggestion=did_you_mean(value, _OUTCOMES),
        )
    entry = reader.mapping(value, path, _OUTCOMES)
    if len(entry) != 1:
        raise reader.fail("an outcome is one of `success`, `interrupt` and `error`", path)
    ((kind, body),) = entry.items()
    at = (*path, kind)
    if kind == "success":
        fields = reader.mapping(body if body is not None else {}, at, ("result",))
        return Outcome("success", result=fields.get("result"))
    if kind == "error":
        fields = reader.mapping(body, at, ("message", "code"))
        code = fields.get("code")
        return Outcome(
            "error",
            message=reader.text(fields.get("message"), (*at, "message")),
            code=reader.text(code, (*at, "code")) if code is not None else None,
        )
    fields = reader.mapping(
        body, at, ("id", "reason", "message", "tool_call", "response_schema", "metadata")
    )
    for key in ("response_schema", "metadata"):
        if key in fields and not isinstance(fields[key], dict):
            raise reader.fail(f"expected a mapping, got {_kind(fields[key])}", (*at, key))
    optional = {
        k: reader.text(fields[k], (*at, k)) for k in ("id", "message", "tool_call") if k in fields
    }
    return Outcome(
        "interrupt",
        reason=reader.text(fields.get("reason"), (*at, "reason")),
        message=optional.get("message"),
        interrupt_id=optional.get("id"),
        tool_call=optional.get("tool_call"),
        response_schema=fields.get("response_schema"),
        metadata=fields.get("metadata"),
    )
