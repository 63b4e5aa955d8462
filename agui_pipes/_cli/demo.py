"""``agui-pipes demo`` — watch a pipeline at work, with nothing to configure.

Runs the scripted demo agent (``agui_pipes.demo``: reasoning, streamed text,
tool calls including an internal one, a nested subagent, state updates)
through the run driver and a chain — the built-in default chain, or yours with
``--config`` — and prints a readable transcript. ``--raw`` prints the agent's
own events instead, as NDJSON and before any chain, so that piping them into
``agui-pipes run --config`` applies a chain exactly once. ``--otel`` adds the
``opentelemetry`` stage and prints the run's span tree after the transcript.
No network, no model, no API key.

Exit status: 0 when the run finished, 1 when it ended in RUN_ERROR (e.g. a
stage of your chain rejected the stream), 2 for an invalid chain file.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any

import anyio

from .._pipeline.chain import TransformerChain
from .._pipeline.transformer import StreamTransformer
from ..codecs import encode_ndjson
from ..config import ConfigError, LoadedChain, load_chain
from ..demo import DEFAULT_CHAIN, DemoAgent, demo_input
from ..driver import run
from ._chainfile import EXIT_CONFIG, load_or_report, plugin_warnings_on_stderr
from ._transcript import Transcript, use_color

__all__ = ["register"]

_DEFAULT_PACE = 0.015


def register(subparsers: Any) -> None:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "demo",
        help="run a built-in demo agent through a chain and show the result",
        description=(
            "Run a scripted demo agent (no network, no LLM) through the run driver and a "
            "chain, and print a readable transcript of what the client receives."
        ),
    )
    parser.add_argument(
        "--config",
        metavar="CHAIN.yaml",
        help="your own chain file instead of the default chain (see --show-chain)",
    )
    parser.add_argument(
        "--allow-imports",
        action="store_true",
        help="permit `type: module:attr` references in --config",
    )
    parser.add_argument(
        "--raw",
        action="store_true",
        help=(
            "print the agent's own events as NDJSON, before any chain (pipe them into "
            "`agui-pipes run --config CHAIN.yaml` to apply one)"
        ),
    )
    parser.add_argument(
        "--message",
        default="Plan me a weekend in Lisbon, please.",
        help="the user's request (the demo plans a weekend in the city it names)",
    )
    parser.add_argument(
        "--pace",
        type=float,
        default=None,
        metavar="SECONDS",
        help=f"pause between streamed words (default {_DEFAULT_PACE} on a terminal, else 0)",
    )
    parser.add_argument(
        "--color",
        choices=("auto", "always", "never"),
        default="auto",
        help="color the transcript (auto: when stdout is a terminal and NO_COLOR is unset)",
    )
    parser.add_argument(
        "--otel",
        action="store_true",
        help=(
            "after the transcript, print the OpenTelemetry span tree of the run (the "
            "opentelemetry stage is added last unless your chain has one; needs: "
            "pip install 'agui-pipes[otel]')"
        ),
    )
    parser.add_argument(
        "--show-chain",
        action="store_true",
        help="print the default chain (a starting point for your own) and exit",
    )
    parser.set_defaults(handler=_demo)


def _chain(args: argparse.Namespace) -> LoadedChain | None:
    if args.config is not None:
        return load_or_report(args.config, allow_imports=args.allow_imports)
    with plugin_warnings_on_stderr():
        try:
            return load_chain(DEFAULT_CHAIN)
        except ConfigError as exc:  # only if an installation is broken
            print(f"agui-pipes: the default demo chain did not load: {exc}", file=sys.stderr)
            return None


def _demo(args: argparse.Namespace) -> int:
    if args.show_chain:
        sys.stdout.write(DEFAULT_CHAIN)
        return 0
    if args.raw:
        if args.config is not None:
            print(
                "agui-pipes: --raw prints the demo agent's own events, before any chain, so "
                "it takes no --config; to see your chain's output as NDJSON: "
                "agui-pipes demo --raw | agui-pipes run --config CHAIN.yaml",
                file=sys.stderr,
            )
            return 2  # usage error, like a bad --pace
        if args.otel:
            print(
                "agui-pipes: --raw prints the agent's own events, before any chain, so there "
                "is no stage to trace them; drop --raw to see the span tree",
                file=sys.stderr,
            )
            return 2
        return _run(args, None)
    chain = _chain(args)
    if chain is None:
        return EXIT_CONFIG
    if not chain().is_sync:
        async_stages = [
            type(s).__name__ for s in chain().stages if not isinstance(s, StreamTransformer)
        ]
        print(
            "agui-pipes: the demo runs the chain inside the run driver, which emits "
            "synchronously, so every stage must be a synchronous StreamTransformer; "
            f"these are not: {', '.join(async_stages)}. Run them over the demo's output "
            "instead: agui-pipes demo --raw | agui-pipes run --config CHAIN.yaml",
            file=sys.stderr,
        )
        return EXIT_CONFIG
    return _run(args, chain)


def _run(args: argparse.Namespace, chain: LoadedChain | None) -> int:
    """Run the demo agent through ``chain`` (``None``: no stage at all, for ``--raw``)."""
    spans = None
    factory: Callable[[], TransformerChain] | None = chain
    if args.otel:
        from ._otel import SetupError, with_trace

        try:
            factory = with_trace(chain, agent_name="trip_planner")
        except SetupError as exc:
            print(f"agui-pipes: {exc}", file=sys.stderr)
            return 2
        spans = _in_memory_tracing()
    interactive = bool(sys.stdout.isatty()) and not args.raw
    pace = args.pace if args.pace is not None else (_DEFAULT_PACE if interactive else 0.0)
    if pace < 0:
        print("agui-pipes: --pace must be zero or positive", file=sys.stderr)
        return 2
    agent = DemoAgent(pace=pace)
    ended_in_error = False

    async def main() -> None:
        nonlocal ended_in_error
        transcript = (
            None if args.raw else Transcript(sys.stdout, color=use_color(sys.stdout, args.color))
        )
        out = sys.stdout.buffer if args.raw else None
        async with run(agent, demo_input(args.message), transformers=factory) as events:
            async for event in events:
                ended_in_error = event.type.value == "RUN_ERROR"
                if transcript is not None:
                    transcript.feed(event)
                else:
                    assert out is not None
                    out.write(encode_ndjson(event))
                    out.flush()
        if transcript is not None:
            transcript.close()

    anyio.run(main)
    if spans is not None:
        from ._otel import span_tree

        sys.stdout.write("\nTrace (OpenTelemetry spans):\n")
        sys.stdout.write("".join(f"  {line}\n" for line in span_tree(spans.get_finished_spans())))
    return 1 if ended_in_error else 0


def _in_memory_tracing() -> Any:
    """Make an in-memory exporter the global tracer provider's, so a stage of the
    user's own chain (which uses the global provider) is caught too."""
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    return exporter
