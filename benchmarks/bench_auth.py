"""What authorization and scope keys cost: per request, and per event on the gateway path.

    python benchmarks/bench_auth.py [--requests 20000] [--runs 40] [--repeat 5]

Two measurements, in process, CPU time (median of ``--repeat`` rounds, the
variants alternated within each round so they share the machine's state):

* **per request** — ``authorize=`` run the way a server runs it before reading a
  body: the Starlette ``Request`` built from the ASGI scope, the bearer token
  parsed and looked up. ``TokenFile`` with 100 tokens (every one compared, in
  constant time) and ``JWTAuthenticator`` (HS256), against no hook;
* **per event, gateway path** — whole runs through a ``Gateway`` with
  ``store="memory:"`` in front of an in-process upstream (the demo agent, ~140
  events a run), with and without ``authorize=TokenFile``: the hook per request
  plus the scope in every store key of the run, divided by the events relayed;
  beside it the same figure between two identical gateways without a hook (the
  noise of the measurement), and the hook's own cost spread over a run's events.

The issue's bound: at most 0.2 ms per request and 2 % CPU per event.
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
import httpx

from agui_pipes.demo import DemoAgent
from agui_pipes.server import Gateway, build_app
from agui_pipes.server._access import Access
from agui_pipes.server.auth import JWTAuthenticator, TokenFile

SECRET = b"s" * 48


def _scope(token: str) -> dict[str, Any]:
    return {
        "type": "http",
        "method": "POST",
        "path": "/chat",
        "headers": [
            (b"content-type", b"application/json"),
            (b"authorization", f"Bearer {token}".encode()),
        ],
    }


async def _refused(message: Any) -> None:
    raise AssertionError(f"refused: {message}")


async def _per_request(access: Access, token: str, count: int) -> float:
    scope = _scope(token)
    start = time.process_time()
    for _ in range(count):
        await access.principal(scope, _refused)
    return (time.process_time() - start) / count


def _jwt_token() -> str:
    import jwt

    return str(jwt.encode({"sub": "alice", "exp": int(time.time()) + 3600}, SECRET, "HS256"))


async def _gateway_runs(gateway: Gateway, runs: int, token: str) -> tuple[float, int]:
    events = 0
    transport = httpx.ASGITransport(app=gateway)
    headers = {"content-type": "application/json", "authorization": f"Bearer {token}"}
    async with httpx.AsyncClient(transport=transport, base_url="http://gateway") as client:
        start = time.process_time()
        for n in range(runs):
            body = {
                "threadId": f"t{n}-{time.monotonic_ns()}",
                "runId": f"r{time.monotonic_ns()}",
                "messages": [],
            }
            response = await client.post("/", content=json.dumps(body), headers=headers)
            assert response.status_code == 200, response.text
            frames = response.text.count("\ndata: ")  # one per frame: id, then data
            events += frames
            _EVENTS_PER_RUN[0] = frames
        return time.process_time() - start, events


def _round(values: list[float]) -> float:
    return statistics.median(values)


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    logging.getLogger("agui_pipes").setLevel(logging.WARNING)
    log = logging.getLogger("bench")
    with tempfile.TemporaryDirectory() as directory:
        tokens_path = Path(directory) / "tokens"
        tokens_path.write_text(
            "".join(f"token-{n:04d}-abcdefghijklmnop scope{n}\n" for n in range(100)),
            encoding="utf-8",
        )
        secret = Path(directory) / "secret"
        secret.write_bytes(SECRET)
        tokens = TokenFile(tokens_path)
        jwt_auth = JWTAuthenticator(secret_file=secret)
        token = "token-0099-abcdefghijklmnop"
        variants: dict[str, tuple[Access, str]] = {
            "none": (Access(None, log), token),
            "tokens": (Access(tokens, log), token),
            "jwt": (Access(jwt_auth, log), _jwt_token()),
        }
        per_request: dict[str, list[float]] = {name: [] for name in variants}
        for _ in range(args.repeat):
            for name, (access, sent) in variants.items():
                per_request[name].append(await _per_request(access, sent, args.requests))

        upstream = build_app(agent=DemoAgent(), path="/")
        client = httpx.AsyncClient(transport=httpx.ASGITransport(app=upstream))
        plain = Gateway("http://upstream/", store="memory:", client=client)
        control = Gateway("http://upstream/", store="memory:", client=client)
        guarded = Gateway("http://upstream/", store="memory:", client=client, authorize=tokens)
        order = [("none", plain), ("none-again", control), ("tokens", guarded)]
        for _, gateway in order:
            assert gateway.durable is not None
            await gateway.durable.store()
            await _gateway_runs(gateway, 5, token)  # warm up
        per_event: dict[str, list[float]] = {name: [] for name, _ in order}
        for _ in range(args.repeat):
            for name, gateway in order:
                cpu, events = await _gateway_runs(gateway, args.runs, token)
                per_event[name].append(cpu / events)
            order.reverse()  # neither variant always runs on a warmer machine
        for _, gateway in order:
            await gateway.aclose()
        await client.aclose()

    none_request = _round(per_request["none"])
    none_event = _round(per_event["none"])
    tokens_event = _round(per_event["tokens"])
    control_event = _round(per_event["none-again"])
    events_per_run = _EVENTS_PER_RUN[0]
    return {
        "per_request_us": {name: round(_round(v) * 1e6, 2) for name, v in per_request.items()},
        "added_per_request_us": {
            name: round((_round(v) - none_request) * 1e6, 2)
            for name, v in per_request.items()
            if name != "none"
        },
        "gateway_cpu_per_event_us": {
            "none": round(none_event * 1e6, 3),
            "none-again": round(control_event * 1e6, 3),
            "tokens": round(tokens_event * 1e6, 3),
        },
        "gateway_added_per_event_percent": round((tokens_event / none_event - 1) * 100, 2),
        "noise_between_identical_gateways_percent": round(
            (control_event / none_event - 1) * 100, 2
        ),
        "events_per_run": events_per_run,
        "hook_per_event_percent": round(
            (_round(per_request["tokens"]) - none_request) / events_per_run / none_event * 100, 3
        ),
    }


_EVENTS_PER_RUN = [0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--requests", type=int, default=20_000)
    parser.add_argument("--runs", type=int, default=40)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    print(json.dumps(anyio.run(main_async, args), indent=2))


if __name__ == "__main__":
    main()
