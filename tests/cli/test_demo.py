"""The demo agent, the transcript view, and the `agui-pipes demo` command."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from ag_ui.core import BaseEvent, EventType

from agui_pipes import run
from agui_pipes._cli._transcript import Transcript, use_color
from agui_pipes.demo import DemoAgent, demo_input
from agui_pipes.testing import (
    reasoning,
    run_events,
    step,
    subagent,
    text,
    tool_call,
)
from agui_pipes.verify import Verifier


async def collect(agent: DemoAgent, message: str = "A weekend in Porto?") -> list[BaseEvent]:
    async with run(agent, demo_input(message)) as events:
        return [event async for event in events]


@pytest.mark.anyio
async def test_demo_agent_emits_every_kind_of_event() -> None:
    events = await collect(DemoAgent())
    types = {e.type for e in events}
    for expected in (
        EventType.RUN_STARTED,
        EventType.REASONING_MESSAGE_CONTENT,
        EventType.TEXT_MESSAGE_CONTENT,
        EventType.TOOL_CALL_START,
        EventType.TOOL_CALL_RESULT,
        EventType.STEP_STARTED,
        EventType.SUBAGENT_STARTED,
        EventType.SUBAGENT_FINISHED,
        EventType.STATE_SNAPSHOT,
        EventType.STATE_DELTA,
        EventType.RUN_FINISHED,
    ):
        assert expected in types, expected
    assert events[-1].type is EventType.RUN_FINISHED
    starts = [e for e in events if e.type is EventType.TOOL_CALL_START]
    names = [getattr(e, "tool_call_name", None) for e in starts]
    assert "internal_price_lookup" in names
    nested = [e for e in events if e.type is EventType.SUBAGENT_STARTED]
    assert nested[1].parent_subagent_run_id == nested[0].subagent_run_id  # type: ignore[attr-defined]
    contents = [e for e in events if e.type is EventType.TEXT_MESSAGE_CONTENT]
    texts = "".join(getattr(e, "delta", "") for e in contents)
    assert "weekend in Porto" in texts


@pytest.mark.anyio
async def test_demo_stream_is_valid_for_consumers_and_producers() -> None:
    events = await collect(DemoAgent())
    for profile in ("consumer", "producer"):
        verifier = Verifier(profile)  # type: ignore[arg-type]
        verifier.observe_all(events)
        verifier.finish()


@pytest.mark.anyio
async def test_demo_is_deterministic() -> None:
    first = [e.model_dump_json() for e in await collect(DemoAgent())]
    second = [e.model_dump_json() for e in await collect(DemoAgent())]
    assert first == second


def render(events: list[BaseEvent], color: bool = False) -> str:
    out = io.StringIO()
    transcript = Transcript(out, color=color)
    for event in events:
        transcript.feed(event)
    transcript.close()
    return out.getvalue()


def test_transcript_renders_text_tools_reasoning_and_nesting() -> None:
    events = run_events(
        reasoning("r1", "Let me ", "think")
        + text("m1", "Hello ", "there")
        + step("work", tool_call("c1", "search", '{"q":', '"x"}', result='["a"]'))
        + subagent(
            "s1",
            "helper",
            text("m2", "from the helper")
            + subagent("s2", "inner", text("m3", "deep"), parent="s1"),
            result={"ok": True},
        )
    )
    lines = render(events).splitlines()
    assert lines[0].startswith("● run ")
    assert "thinking: Let me think" in lines
    assert "assistant: Hello there" in lines
    assert "▸ step work" in lines
    assert '→ search({"q":"x"})' in lines
    assert '← search: ["a"]' in lines
    assert any(line.startswith("┌ subagent helper") for line in lines)
    assert "│ assistant: from the helper" in lines
    assert any(line.startswith("│ ┌ subagent inner") for line in lines)
    assert "│ │ assistant: deep" in lines
    assert '└ helper finished → {"ok": true}' in lines
    assert lines[-1].startswith("● run finished: success")


def test_transcript_interleaved_streams_start_new_lines() -> None:
    from ag_ui.core import TextMessageContentEvent, TextMessageEndEvent, TextMessageStartEvent

    events: list[BaseEvent] = [
        TextMessageStartEvent(message_id="a", role="assistant"),
        TextMessageContentEvent(message_id="a", delta="one"),
        TextMessageStartEvent(message_id="b", role="assistant"),
        TextMessageContentEvent(message_id="b", delta="two"),
        TextMessageContentEvent(message_id="a", delta=" more"),
        TextMessageEndEvent(message_id="a"),
        TextMessageEndEvent(message_id="b"),
    ]
    assert render(events).splitlines() == [
        "assistant: one",
        "assistant: two",
        "assistant:  more",
    ]


def test_color_codes_only_when_asked() -> None:
    events = run_events(text("m1", "hi"))
    assert "\x1b[" not in render(events, color=False)
    assert "\x1b[" in render(events, color=True)


def test_use_color_respects_no_color(monkeypatch: pytest.MonkeyPatch) -> None:
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.delenv("NO_COLOR", raising=False)
    assert use_color(Tty()) is True
    assert use_color(io.StringIO()) is False
    assert use_color(io.StringIO(), "always") is True
    monkeypatch.setenv("NO_COLOR", "1")
    assert use_color(Tty()) is False
    assert use_color(Tty(), "never") is False


# -- the command -------------------------------------------------------------------


def demo_cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "NO_COLOR"}
    return subprocess.run(
        [sys.executable, "-m", "agui_pipes", "demo", *args],
        capture_output=True,
        text=True,
        env=env,
        check=False,
        timeout=120,
    )


def test_demo_command_with_your_own_chain(tmp_path: Path) -> None:
    chain = tmp_path / "chain.yaml"
    chain.write_text("version: 1\ntransformers: []\n")
    done = demo_cli("--config", str(chain), "--message", "Weekend in Porto")
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "\x1b[" not in out  # not a terminal: plain text
    assert "→ internal_price_lookup(" in out  # an empty chain hides nothing
    assert "┌ subagent local_expert" in out
    assert "│ ┌ subagent weather" in out
    assert "Here is your weekend in Porto." in out
    assert out.rstrip().endswith("● run finished: success")


def test_demo_raw_is_the_agents_unfiltered_ndjson() -> None:
    done = demo_cli("--raw")
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    assert lines[0]["type"] == "RUN_STARTED"
    assert lines[-1]["type"] == "RUN_FINISHED"
    assert any(line["type"] == "SUBAGENT_STARTED" for line in lines)
    # The default chain hides this tool and promotes search results to /places:
    # neither has happened to the agent's own events.
    assert "internal_price_lookup" in done.stdout
    assert '"/places"' not in done.stdout
    # Still a valid stream on its own.
    verify = subprocess.run(
        [sys.executable, "-m", "agui_pipes", "verify", "--profile", "producer", "-"],
        input=done.stdout,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert verify.returncode == 0, verify.stderr


def test_demo_raw_refuses_a_chain_with_the_pipe_to_use(tmp_path: Path) -> None:
    chain = tmp_path / "chain.yaml"
    chain.write_text("transformers: []\n")
    done = demo_cli("--config", str(chain), "--raw")
    assert done.returncode == 2
    assert done.stdout == ""
    assert "--raw prints the demo agent's own events, before any chain" in done.stderr
    assert "agui-pipes demo --raw | agui-pipes run --config CHAIN.yaml" in done.stderr


def test_demo_invalid_config_exits_2(tmp_path: Path) -> None:
    chain = tmp_path / "chain.yaml"
    chain.write_text("transformers:\n  - type: nope\n")
    done = demo_cli("--config", str(chain))
    assert done.returncode == 2
    assert f"{chain}:2:11" in done.stderr


def test_demo_show_chain_prints_a_loadable_chain() -> None:
    done = demo_cli("--show-chain")
    assert done.returncode == 0
    assert "filter_tool_calls" in done.stdout
    assert "internal_*" in done.stdout


def test_demo_refuses_async_stages_with_a_hint(tmp_path: Path) -> None:
    chain = tmp_path / "chain.yaml"
    chain.write_text(
        "transformers:\n  - type: agui_pipes._pipeline.transformer:AsyncStreamTransformer\n"
    )
    done = demo_cli("--config", str(chain), "--allow-imports")
    assert done.returncode == 2
    assert "these are not: AsyncStreamTransformer" in done.stderr
    assert "agui-pipes demo --raw | agui-pipes run --config" in done.stderr
    assert "Traceback" not in done.stderr


def test_demo_raw_piped_into_run(tmp_path: Path) -> None:
    hide = tmp_path / "hide.yaml"
    hide.write_text('transformers:\n  - filter_tool_calls: {deny: ["internal_*"]}\n')
    raw = demo_cli("--raw")
    done = subprocess.run(
        [sys.executable, "-m", "agui_pipes", "run", "--config", str(hide)],
        input=raw.stdout,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "internal_price_lookup" in raw.stdout
    assert "internal_price_lookup" not in done.stdout
    assert len(done.stdout.splitlines()) == len(raw.stdout.splitlines()) - 4


def test_demo_raw_through_the_default_chain_applies_it_once(tmp_path: Path) -> None:
    """The documented `demo --raw | run -c chain.yaml` once applied the chain twice.

    `--raw` used to print the default chain's output, so `tool_result_to_state`
    promoted the search results to /places in the demo and again in `run`.
    """
    chain = tmp_path / "chain.yaml"
    chain.write_text(demo_cli("--show-chain").stdout)
    raw = demo_cli("--raw")
    done = subprocess.run(
        [sys.executable, "-m", "agui_pipes", "run", "--config", str(chain)],
        input=raw.stdout,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    places = [line for line in done.stdout.splitlines() if '"/places"' in line]
    assert len(places) == 1, places
    assert "internal_price_lookup" not in done.stdout


def test_demo_raw_is_the_recording_the_chain_tests_replay() -> None:
    recorded = Path(__file__).parents[1] / "data" / "demo-run.ndjson"
    done = demo_cli("--raw")
    assert done.returncode == 0, done.stderr
    assert done.stdout == recorded.read_text(encoding="utf-8"), (
        "the demo agent changed: regenerate the recording with "
        "`agui-pipes demo --raw > tests/data/demo-run.ndjson`"
    )
