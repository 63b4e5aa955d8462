"""Record real producers' AG-UI streams into tests/data/producers/.

    python tests/producers/record.py                 # every scenario
    python tests/producers/record.py pydantic-ai-reasoning langgraph-subagent
    python tests/producers/record.py --list
    python tests/producers/record.py --out /tmp/rec  # somewhere else

Needs the ``producers`` extra (``pip install -e '.[producers]'``). Each
scenario writes ``<producer>-<scenario>.sse`` — the HTTP response body exactly
as the producer's endpoint sent it — and ``<producer>-<scenario>.json`` with
the package versions, the request, what the stream contains and which fields
change from one recording to the next. tests/interop/test_real_producers.py replays
the files (without the producer packages) and, when they are installed,
re-records to check the stored files still describe what the producers send.
"""

from __future__ import annotations

import argparse
import importlib
import json
import platform
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio

if __package__ in (None, ""):  # run as a script: make `tests.producers` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.producers._common import Scenario, capture

DATA_DIR = Path(__file__).resolve().parents[1] / "data" / "producers"
PRODUCER_MODULES = {
    "pydantic-ai": "tests.producers.pydantic_ai_scenarios",
    "langgraph": "tests.producers.langgraph_scenarios",
}
REQUIREMENTS = {
    "pydantic-ai": "pydantic-ai-slim[ag-ui]",
    "langgraph": "ag-ui-langgraph",
}


def scenarios(producer: str) -> tuple[Scenario, ...]:
    """The producer's scenarios (ImportError when its packages are not installed)."""
    module = importlib.import_module(PRODUCER_MODULES[producer])
    found: tuple[Scenario, ...] = module.SCENARIOS
    return found


def versions(producer: str) -> dict[str, str]:
    module = importlib.import_module(PRODUCER_MODULES[producer])
    found: dict[str, str] = module.versions()
    return found


def record(scenario: Scenario) -> bytes:
    """Run the scenario against its producer's endpoint; the response body verbatim."""
    return anyio.run(capture, scenario)


def payloads(body: bytes) -> list[dict[str, Any]]:
    """The JSON objects of the ``data:`` lines (the recorder's own minimal SSE reading)."""
    events: list[dict[str, Any]] = []
    for frame in body.replace(b"\r\n", b"\n").split(b"\n\n"):
        data = [
            line[5:].removeprefix(b" ") for line in frame.split(b"\n") if line.startswith(b"data:")
        ]
        if data:
            events.append(json.loads(b"\n".join(data)))
    return events


def event_types(body: bytes) -> list[str]:
    return [str(event.get("type")) for event in payloads(body)]


def metadata(scenario: Scenario, body: bytes) -> dict[str, Any]:
    types = event_types(body)
    return {
        "producer": scenario.producer,
        "scenario": scenario.name,
        "description": scenario.description,
        "contains": list(scenario.contains),
        "notes": list(scenario.notes),
        "varying_fields": list(scenario.varying),
        "packages": versions(scenario.producer),
        "python": platform.python_version(),
        "transport": "httpx.ASGITransport POST to the producer's own AG-UI endpoint, "
        "Accept: text/event-stream; the .sse file is the response body verbatim",
        "request": scenario.run_input(),
        "bytes": len(body),
        "event_count": len(types),
        "event_type_counts": dict(sorted(Counter(types).items())),
        "event_types": types,
    }


def write(scenario: Scenario, body: bytes, directory: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    sse = directory / f"{scenario.stem}.sse"
    sse.write_bytes(body)
    meta = json.dumps(metadata(scenario, body), indent=2, ensure_ascii=False) + "\n"
    (directory / f"{scenario.stem}.json").write_text(meta, encoding="utf-8")
    return sse


def _available() -> dict[str, tuple[Scenario, ...]]:
    found: dict[str, tuple[Scenario, ...]] = {}
    for producer in PRODUCER_MODULES:
        try:
            found[producer] = scenarios(producer)
        except ImportError as error:
            print(
                f"skipping {producer}: {error} (pip install '{REQUIREMENTS[producer]}' "
                "or the project's 'producers' extra)",
                file=sys.stderr,
            )
    return found


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("stems", nargs="*", help="scenarios to record (default: all)")
    parser.add_argument("--out", type=Path, default=DATA_DIR, help=f"default {DATA_DIR}")
    parser.add_argument("--list", action="store_true", help="list the scenarios and exit")
    args = parser.parse_args(argv)
    chosen = [s for group in _available().values() for s in group]
    if args.list:
        for scenario in chosen:
            print(f"{scenario.stem}: {scenario.description}")
        return 0
    unknown = set(args.stems) - {s.stem for s in chosen}
    if unknown:
        print(f"unknown or unavailable scenarios: {', '.join(sorted(unknown))}", file=sys.stderr)
        return 2
    for scenario in chosen:
        if args.stems and scenario.stem not in args.stems:
            continue
        body = record(scenario)
        path = write(scenario, body, args.out)
        print(f"{path}: {len(body)} bytes, {len(event_types(body))} events")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
