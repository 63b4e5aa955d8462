"""``serve --server NAME``: the registry of HTTP stacks, and a stack that is not installed."""

from __future__ import annotations

import importlib.util

import pytest

from agui_pipes._cli import main
from agui_pipes._cli._servers import DEFAULT_SERVER, SERVERS, UnavailableServer, stack_of

_FAST = all(importlib.util.find_spec(module) is not None for module in ("httptools", "uvloop"))


def test_every_name_is_a_stack_or_says_what_to_install() -> None:
    assert DEFAULT_SERVER in SERVERS
    for name in SERVERS:
        if name == "uvicorn-fast" and not _FAST:
            with pytest.raises(UnavailableServer, match=r"pip install 'agui-pipes\[fast\]'"):
                stack_of(name)
            continue
        stack = stack_of(name)
        assert stack.name == name
        assert (stack.http, stack.loop) in (("h11", "asyncio"), ("httptools", "uvloop"))


def test_the_default_is_the_pure_stack_and_uvicorn_the_fastest_installed() -> None:
    assert (stack_of("uvicorn-h11").http, stack_of("uvicorn-h11").loop) == ("h11", "asyncio")
    default = stack_of(DEFAULT_SERVER)
    assert (default.http, default.loop) == ("h11", "asyncio")
    fastest = stack_of("uvicorn")
    assert (fastest.http, fastest.loop) == (
        ("httptools", "uvloop") if _FAST else ("h11", "asyncio")
    )


def test_an_unknown_server_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["serve", "--demo", "--server", "tornado"])
    assert exited.value.code == 2
    assert "invalid choice: 'tornado'" in capsys.readouterr().err


def test_a_stack_whose_packages_are_missing_is_a_usage_error(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    real = importlib.util.find_spec

    def without_uvloop(name: str, *args: object, **kwargs: object) -> object:
        return None if name == "uvloop" else real(name, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(importlib.util, "find_spec", without_uvloop)
    assert main(["serve", "--demo", "--server", "uvicorn-fast"]) == 2
    err = capsys.readouterr().err
    assert "--server uvicorn-fast needs uvloop" in err
    assert "pip install 'agui-pipes[fast]'" in err
    # the default falls back to the pure stack rather than refusing
    stack = stack_of("uvicorn")
    assert (stack.http, stack.loop) == ("h11", "asyncio")
