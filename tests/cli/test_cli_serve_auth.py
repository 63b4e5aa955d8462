"""``agui-pipes serve`` with authentication: the flags, the refusal to serve everyone, SIGHUP.

``--host 0.0.0.0`` without an auth flag must not start (exit 2, naming the
flags to add); with ``--auth-tokens`` it serves, refuses a request without a
token (401) and runs each token's requests in its scope; SIGHUP re-reads the
tokens file, and a file that no longer parses leaves the old tokens in force.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from agui_pipes._cli import main
from tests.cli.test_cli_serve import Served, free_port

RUN = {"threadId": "t", "runId": "r", "messages": []}


def _start(*args: str) -> tuple[Served, int]:
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "agui_pipes", "serve", "--port", str(port), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    deadline = time.monotonic() + 30
    while True:
        if process.poll() is not None:
            _, err = process.communicate()
            raise AssertionError(f"serve exited early: {err.decode()}")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).text == "ok":
                return Served(process, port), port
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline:
            process.kill()
            raise AssertionError("serve did not come up")
        time.sleep(0.1)


def _stop(served: Served) -> str:
    served.process.send_signal(signal.SIGINT)
    try:
        _, err = served.process.communicate(timeout=15)
    except subprocess.TimeoutExpired:
        served.process.kill()
        raise
    return err.decode()


def _post(url: str, token: str | None, run_id: str = "r") -> int:
    headers = {"content-type": "application/json"}
    if token is not None:
        headers["authorization"] = f"Bearer {token}"
    # Each token's runs on a thread of its own: a thread is the scope's that created it.
    body = {**RUN, "runId": run_id, "threadId": f"t-{token}"}
    response = httpx.post(url, content=json.dumps(body), headers=headers)
    return response.status_code


def _wait_for(condition: object, what: str) -> None:
    deadline = time.monotonic() + 10
    while not condition():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise AssertionError(f"not within 10 s: {what}")
        time.sleep(0.05)


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.0.2.1", "example.org"])
def test_a_reachable_host_without_auth_refuses_to_start(
    host: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["serve", "--demo", "--host", host]) == 2
    err = capsys.readouterr().err
    assert f"--host {host} can be reached from other machines" in err
    assert "add --auth-tokens FILE or --auth-jwt" in err and "--insecure-no-auth" in err


@pytest.mark.parametrize(
    ("flags", "said"),
    [
        (["--auth-jwt"], "exactly one of --jwt-secret-file and --jwt-jwks-file"),
        (["--jwt-audience", "x"], "--jwt-audience only apply with --auth-jwt"),
        (["--auth-tokens", "f", "--auth-jwt"], "one of --auth-tokens and --auth-jwt"),
        (["--auth-tokens", "f", "--insecure-no-auth"], "--insecure-no-auth contradicts"),
    ],
)
def test_auth_flags_that_do_not_fit_are_usage_errors(
    flags: list[str], said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["serve", "--demo", *flags]) == 2
    assert said in capsys.readouterr().err


def test_an_unreadable_or_bad_auth_file_exits_2_with_file_and_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tokens = tmp_path / "tokens"
    tokens.write_text("good-token-123 alice\n\nonly-a-token\n", encoding="utf-8")
    assert main(["serve", "--demo", "--auth-tokens", str(tokens)]) == 2
    assert f"{tokens}:3: expected 'TOKEN SCOPE'" in capsys.readouterr().err
    jwks = tmp_path / "jwks.json"
    jwks.write_text('{"keys": [\n  {"kty": "RSA",\n  }]}', encoding="utf-8")
    assert main(["serve", "--demo", "--auth-jwt", "--jwt-jwks-file", str(jwks)]) == 2
    assert f"{jwks}:3: not JSON" in capsys.readouterr().err
    missing = tmp_path / "missing"
    assert main(["serve", "--demo", "--auth-tokens", str(missing)]) == 2
    assert f"{missing}: cannot read the tokens file" in capsys.readouterr().err


def test_with_tokens_on_a_reachable_host_it_serves_and_reloads_on_sighup(
    tmp_path: Path,
) -> None:
    tokens = tmp_path / "tokens"
    tokens.write_text("first-token-1234 alice\n", encoding="utf-8")
    served, port = _start(
        "--demo", "--host", "0.0.0.0", "--auth-tokens", str(tokens), "--store", "memory:"
    )
    url = f"http://127.0.0.1:{port}/"
    try:
        assert _post(url, None) == 401
        assert _post(url, "first-token-1234", "r1") == 200
        assert _post(url, "second-token-123", "r2") == 401
        tokens.write_text("first-token-1234 alice\nsecond-token-123 bob\n", encoding="utf-8")
        served.process.send_signal(signal.SIGHUP)
        _wait_for(
            lambda: _post(url, "second-token-123", f"r{time.monotonic()}") == 200,
            "the new token works",
        )
        tokens.write_text("second-token-123 bob extra words\n", encoding="utf-8")
        served.process.send_signal(signal.SIGHUP)
        time.sleep(0.3)  # nothing to wait on: the old tokens must simply stay
        assert _post(url, "second-token-123", "r3") == 200
        assert _post(url, "first-token-1234", "r4") == 200
        page = httpx.get(f"{url}threads", headers={"authorization": "Bearer first-token-1234"})
        assert [t["threadId"] for t in page.json()["threads"]] == ["t-first-token-1234"]
    finally:
        err = _stop(served)
    assert "authentication: 1 bearer tokens from" in err
    assert "SIGHUP: 2 bearer tokens" in err
    assert f"SIGHUP: kept the previous tokens: {tokens}:1:" in err


def test_on_loopback_without_auth_one_line_says_every_client_shares_one_scope() -> None:
    served, _ = _start("--demo")
    err = _stop(served)
    lines = [line for line in err.splitlines() if "every client shares one scope" in line]
    assert len(lines) == 1 and "no authentication" in lines[0]


def test_with_jwt_it_serves_valid_tokens_and_refuses_expired_ones(tmp_path: Path) -> None:
    import jwt

    secret = b"a-long-enough-hmac-secret-for-hs256-0123"
    (tmp_path / "secret").write_bytes(secret)
    served, port = _start(
        "--demo",
        "--host",
        "0.0.0.0",
        "--auth-jwt",
        "--jwt-secret-file",
        str(tmp_path / "secret"),
        "--jwt-audience",
        "agui",
        "--jwt-scope-claim",
        "tenant",
    )
    url = f"http://127.0.0.1:{port}/"
    now = int(time.time())

    def token(**claims: object) -> str:
        base = {"sub": "ada", "tenant": "acme", "aud": "agui", "exp": now + 600}
        return str(jwt.encode({**base, **claims}, secret, "HS256"))

    try:
        assert _post(url, token()) == 200
        assert _post(url, token(exp=now - 600)) == 401
        assert _post(url, token(aud="someone-else")) == 401
        assert _post(url, token(tenant=None)) == 401  # no scope in the token
    finally:
        err = _stop(served)
    assert "authentication: bearer JWTs (scope from the 'tenant' claim)" in err
