"""The command line entry points exist and report the version."""

from __future__ import annotations

import subprocess
import sys

import pytest

from agui_pipes import __version__
from agui_pipes._cli import main


def test_version_flag(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["--version"])
    assert info.value.code == 0
    assert capsys.readouterr().out.strip() == f"agui-pipes {__version__}"


def test_python_dash_m() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "agui_pipes", "--version"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0
    assert done.stdout.strip() == f"agui-pipes {__version__}"


def test_no_command_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 2
    assert "usage: agui-pipes" in capsys.readouterr().err
