"""Where users meet tracing: ``agui-pipes demo --otel`` and ``agui-pipes serve --otel``."""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests._servers import run_input

TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agui_pipes", *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
        env={**os.environ, **(env or {})},
    )


def test_demo_trace_prints_the_span_tree_after_the_transcript() -> None:
    done = _cli("demo", "--otel", "--color", "never")
    assert done.returncode == 0, done.stderr
    transcript, tree = done.stdout.split("Trace (OpenTelemetry spans):\n")
    assert "run finished: success" in transcript
    names = [line.strip(" │├└─").split("  (")[0] for line in tree.splitlines()]
    assert names == [
        "invoke_agent trip_planner",
        "step",
        "execute_tool search_places",
        "execute_tool ask_local_expert",
        "invoke_agent local_expert",
        "invoke_agent weather",
        "execute_tool get_forecast",
    ]
    assert "        └─ invoke_agent weather" in tree  # nested under local_expert
    assert "internal_price_lookup" not in tree  # the default chain hides it from the client


def test_demo_trace_uses_the_stage_of_your_chain(tmp_path: Path) -> None:
    chain = tmp_path / "chain.yaml"
    chain.write_text("transformers:\n  - type: opentelemetry\n    agent_name: mine\n")
    done = _cli("demo", "--otel", "--config", str(chain))
    assert done.returncode == 0, done.stderr
    tree = done.stdout.split("Trace (OpenTelemetry spans):\n")[1]
    assert tree.splitlines()[0].strip().startswith("invoke_agent mine  (")
    assert "internal_price_lookup" in tree  # your chain filters nothing
    assert tree.count("invoke_agent mine") == 1  # no second stage was added


def test_demo_trace_refuses_raw() -> None:
    done = _cli("demo", "--otel", "--raw")
    assert done.returncode == 2
    assert "no stage to trace" in done.stderr


def test_serve_otel_refuses_an_unknown_exporter() -> None:
    done = _cli("serve", "--demo", "--otel", env={"OTEL_TRACES_EXPORTER": "zipkin"})
    assert done.returncode == 2
    assert "OTEL_TRACES_EXPORTER='zipkin' is not supported here" in done.stderr


@pytest.mark.anyio
async def test_serve_otel_exports_each_run_under_the_request_traceparent() -> None:
    """No OTLP exporter is installed for the tests: the spans go to the console, said on
    stderr, and are flushed at shutdown."""
    env = {"OTEL_METRICS_EXPORTER": "none", "OTEL_SERVICE_NAME": "trip-demo"}
    process, url = _start("--demo", "--otel", env=env)
    try:
        async with httpx.AsyncClient(timeout=30) as client:
            response = await client.post(
                url + "/",
                json=run_input("r-otel"),
                headers={"accept": "text/event-stream", "traceparent": TRACEPARENT},
            )
            assert response.status_code == 200
    finally:
        process.send_signal(signal.SIGINT)
        out, log = process.communicate(timeout=30)
    assert process.returncode == 0, log
    if not _installed("opentelemetry.exporter.otlp.proto.http"):
        assert "OTLP trace exporter not installed, printing spans instead" in log
    spans = _console_spans(out)
    run_span = next(s for s in spans if s["attributes"].get("agui.run.id") == "r-otel")
    assert run_span["name"] == "invoke_agent"
    assert run_span["parent_id"] == "0x00f067aa0ba902b7"
    assert run_span["context"]["trace_id"] == "0x4bf92f3577b34da6a3ce929d0e0e4736"
    assert run_span["resource"]["attributes"]["service.name"] == "trip-demo"
    assert {s["name"] for s in spans} >= {"invoke_agent weather", "execute_tool search_places"}


def _console_spans(text: str) -> list[dict[str, object]]:
    """The JSON objects the console span exporter printed (one per span, pretty-printed)."""
    decoder = json.JSONDecoder()
    spans: list[dict[str, object]] = []
    index = 0
    while (start_at := text.find("{", index)) != -1:
        try:
            value, index = decoder.raw_decode(text, start_at)
        except json.JSONDecodeError:
            index = start_at + 1
            continue
        if isinstance(value, dict) and "context" in value:
            spans.append(value)
    return spans


def _start(*args: str, env: dict[str, str]) -> tuple[subprocess.Popen[str], str]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    process = subprocess.Popen(
        [sys.executable, "-m", "agui_pipes", "serve", "--port", str(port), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1", **env},
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:
        if process.poll() is not None:
            raise AssertionError(f"serve exited early: {process.communicate()[1]}")
        try:
            if httpx.get(url + "/healthz", timeout=1).text == "ok":
                return process, url
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline:
            process.kill()
            raise AssertionError("serve did not come up")
        time.sleep(0.1)


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:
        return False


def test_otel_sdk_disabled_sets_nothing_up() -> None:
    script = (
        "from agui_pipes._cli._otel import configure_from_environment\n"
        "from opentelemetry import trace\n"
        "print(configure_from_environment(print))\n"
        "print(type(trace.get_tracer_provider()).__name__)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
        env={**os.environ, "OTEL_SDK_DISABLED": "true"},
    )
    assert done.stdout.splitlines() == ["nowhere (OTEL_SDK_DISABLED=true)", "ProxyTracerProvider"]
