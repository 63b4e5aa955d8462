"""The fast path's switch and its readable generated code.

``AGUI_PIPES_FAST_PATH=0`` (or ``fast_path=False``) keeps every wire entry
point on the reference path: no code is generated at all. What is generated
carries a file name saying what it is and for which shape, with its source
in ``linecache``, so a traceback shows the generated lines; ``python -m
agui_pipes._fastpath show`` prints it.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import traceback
from pathlib import Path

import pytest

from agui_pipes import TransformerChain
from agui_pipes._fastpath import enabled_in, generated_source
from agui_pipes._fastpath.builders import compile_builder
from agui_pipes.codecs import decode, encode_sse
from agui_pipes.relay import Relay
from agui_pipes.testing import run_events, text
from agui_pipes.transformers import Verify

# Crosses the wire entry points: CI runs it again with AGUI_PIPES_FAST_PATH=0 (`-m wire`).
pytestmark = pytest.mark.wire

ROOT = Path(__file__).resolve().parents[2]

_USE_EVERY_ENTRY_POINT = """
import linecache
import agui_pipes._fastpath as fastpath
from agui_pipes import TransformerChain
from agui_pipes.codecs import decode, encode_json, encode_ndjson, encode_sse
from agui_pipes.relay import Relay
from agui_pipes.testing import run_events, text
from agui_pipes.transformers import Verify

events = run_events(text("m1", "a", "b"))
lines = [encode_sse(e)[6:-2] for e in events]
assert [decode(line).event for line in lines] == events
assert b"".join(encode_ndjson(e) for e in events).count(b"\\n") == len(events)
relay = Relay(TransformerChain([Verify()]))
out = relay.feed(lines) + relay.finish()
assert out == b"".join(encode_sse(e) for e in events)
generated = sorted(k for k in linecache.cache if k.startswith("<agui_pipes._fastpath: "))
print(fastpath.ENABLED, relay.events_forwarded, len(generated))
"""


def _run_with(value: str | None) -> list[str]:
    env = {k: v for k, v in os.environ.items() if k != "AGUI_PIPES_FAST_PATH"}
    if value is not None:
        env["AGUI_PIPES_FAST_PATH"] = value
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    done = subprocess.run(
        [sys.executable, "-c", _USE_EVERY_ENTRY_POINT],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


@pytest.mark.parametrize("value", ["0", "false", "OFF", " no "])
def test_the_environment_variable_keeps_every_entry_point_on_the_reference_path(
    value: str,
) -> None:
    enabled, forwarded, generated = _run_with(value)
    assert (enabled, forwarded, generated) == ("False", "0", "0")


def test_without_the_variable_the_fast_path_generates_and_bypasses() -> None:
    enabled, forwarded, generated = _run_with(None)
    assert enabled == "True"
    assert int(forwarded) > 0  # the deltas went through the relay's bypass
    assert int(generated) > 0


@pytest.mark.parametrize(("value", "on"), [("1", True), ("", True), ("yes", True), ("0", False)])
def test_enabled_in_reads_only_an_explicit_off(value: str, on: bool) -> None:
    assert enabled_in({"AGUI_PIPES_FAST_PATH": value}) is on
    assert enabled_in({}) is True


_WHICH_FUNCTION_THE_CHAIN_CALLS = """
from agui_pipes import StreamTransformer, TransformerChain
from agui_pipes.testing import run_events as run, text

calls = []

class Routed(StreamTransformer):
    def transform(self, event):
        calls.append("transform")
        return (event,)

    def route(self, event_class):
        def handler(event):
            calls.append("route")
            return (event,)
        return handler

events = run(text("m1", "a", "b"))
assert TransformerChain([Routed()]).apply_sync(events) == events
print(",".join(sorted(set(calls))))
"""


@pytest.mark.parametrize(("value", "called"), [(None, "route"), ("0", "transform")])
def test_the_switch_also_keeps_the_chain_to_each_stages_transform(
    value: str | None, called: str
) -> None:
    # ``route`` is an optional hook, an optimisation: with the fast path off the
    # chain runs the stage contract itself, ``transform``, for every event.
    env = {k: v for k, v in os.environ.items() if k != "AGUI_PIPES_FAST_PATH"}
    if value is not None:
        env["AGUI_PIPES_FAST_PATH"] = value
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    done = subprocess.run(
        [sys.executable, "-c", _WHICH_FUNCTION_THE_CHAIN_CALLS],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [called]


def test_the_parameter_overrides_the_process_default() -> None:
    events = run_events(text("m1", "a", "b"))
    lines = [encode_sse(e)[6:-2] for e in events]
    outputs = []
    for fast_path in (True, False):
        relay = Relay(TransformerChain([Verify()]), fast_path=fast_path)
        outputs.append(relay.feed(lines) + relay.finish())
        assert (relay.events_forwarded > 0) is fast_path
        assert [decode(line, fast_path=fast_path).event for line in lines] == events
    assert outputs[0] == outputs[1] == b"".join(encode_sse(e) for e in events)


def test_a_traceback_into_a_builder_names_it_and_shows_its_line() -> None:
    keys = ("type", "messageId", "delta")
    builder = compile_builder("TEXT_MESSAGE_CONTENT", keys)
    assert builder is not None
    with pytest.raises(KeyError) as caught:
        builder({"type": "TEXT_MESSAGE_CONTENT"})  # no messageId: fails inside the code
    shown = "".join(traceback.format_exception(caught.value))
    # One builder serves every order of a key set: it is named after the order it
    # was first compiled for (this one, unless an earlier test met another first).
    name = builder.__code__.co_filename
    assert name.startswith("<agui_pipes._fastpath: builder TEXT_MESSAGE_CONTENT (")
    assert sorted(name[name.index("(") + 1 : name.index(")")].split(",")) == sorted(keys)
    assert f'File "{name}", line 2, in build' in shown
    assert "v0 = raw[" in shown  # the generated line itself, from linecache


def _builder_keys(source: str, type_name: str) -> list[str]:
    """The key order named in the builder's heading (one builder serves every order)."""
    heading = rf"^# <agui_pipes\._fastpath: builder {type_name} \(([^)]*)\)>$"
    found = re.search(heading, source, re.M)
    assert found is not None, source
    return sorted(found.group(1).split(","))


def test_generated_source_shows_the_builder_and_the_writer() -> None:
    source = generated_source("TOOL_CALL_START")
    assert _builder_keys(source, "TOOL_CALL_START") == ["toolCallId", "toolCallName", "type"]
    assert "def build(raw):" in source
    assert "# <agui_pipes._fastpath: writer TOOL_CALL_START>" in source
    assert "def write(d):" in source
    chosen = generated_source("TEXT_MESSAGE_START", ["type", "role", "messageId"])
    assert _builder_keys(chosen, "TEXT_MESSAGE_START") == ["messageId", "role", "type"]
    assert "ALLOWED" in chosen  # the role is checked against its choices


def test_generated_source_says_why_it_has_nothing() -> None:
    with pytest.raises(ValueError, match="unknown event type 'NOPE'"):
        generated_source("NOPE")
    with pytest.raises(ValueError, match="no builder for STATE_SNAPSHOT"):
        generated_source("STATE_SNAPSHOT", ["type", "snapshot", "rawEvent"])  # legacy null?


def test_generated_source_shows_open_value_builders_and_writers() -> None:
    source = generated_source("STATE_DELTA")
    # One builder serves every order of a key set (cached by the set), so its label
    # names the order it was first generated for: an earlier decode may have chosen.
    assert re.search(
        r"# <agui_pipes\._fastpath: open-value builder STATE_DELTA \((type,delta|delta,type)\)>",
        source,
    ), source[:200]
    assert "operations(raw['delta'])" in source
    assert "# <agui_pipes._fastpath: open-value writer STATE_DELTA>" in source
    assert "return finish(out)" in source  # finish_open: the checks that keep it exact


def _show(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return subprocess.run(
        [sys.executable, "-m", "agui_pipes._fastpath", "show", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_the_show_command_prints_generated_source() -> None:
    shown = _show("TEXT_MESSAGE_CONTENT")
    assert shown.returncode == 0, shown.stderr
    assert "builder TEXT_MESSAGE_CONTENT (type,messageId,delta)" in shown.stdout
    assert "def write(d):" in shown.stdout
    keyed = _show("TEXT_MESSAGE_CONTENT", "--keys", "delta,messageId,type")
    assert "builder TEXT_MESSAGE_CONTENT (delta,messageId,type)" in keyed.stdout
    bad = _show("NOT_A_TYPE")
    assert bad.returncode == 2
    assert "unknown event type 'NOT_A_TYPE'" in bad.stderr
