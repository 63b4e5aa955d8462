"""The worked example plugin (examples/plugin), really installed with pip, used from YAML.

Installed with ``pip install --target`` into a temporary directory that the
subprocesses get on PYTHONPATH, so the test venv itself is left untouched. The
build needs setuptools in the running environment (no build isolation: no
network); without it the test is skipped, and the in-process fake distribution
test in test_config_registry.py still covers entry-point discovery.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PLUGIN = ROOT / "examples" / "plugin"

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("setuptools") is None,
    reason="building the example plugin offline needs setuptools in the test environment",
)


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    work = tmp_path_factory.mktemp("plugin")
    source = work / "src"
    # Build from a copy: setuptools writes build/ and *.egg-info next to the sources.
    shutil.copytree(PLUGIN, source, ignore=shutil.ignore_patterns("build", "*.egg-info"))
    target = work / "site"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            "--target",
            str(target),
            str(source),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(target), env.get("PYTHONPATH", "")])
    env.pop("NO_COLOR", None)
    return env


def cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agui_pipes", *args],
        capture_output=True,
        text=True,
        env=env,
        check=False,
        timeout=120,
    )


def test_installed_plugin_is_listed(installed: dict[str, str]) -> None:
    done = cli(installed, "list")
    assert done.returncode == 0, done.stderr
    assert "rename_tools  [agui-pipes-rename-tools]" in done.stdout
    assert "- names: mapping of string (required)" in done.stdout


def test_installed_plugin_is_used_from_yaml(installed: dict[str, str], tmp_path: Path) -> None:
    chain = tmp_path / "chain.yaml"
    chain.write_text("transformers:\n  - type: rename_tools\n    names: {pg_search_v2: search}\n")
    done = cli(installed, "check", str(chain))
    assert done.returncode == 0, done.stderr
    assert "ok, 1 transformer: rename_tools" in done.stdout
    chain.write_text("transformers:\n  - type: rename_tools\n    nmes: {a: b}\n")
    done = cli(installed, "check", str(chain))
    assert done.returncode == 2
    assert ":3:5: transformers[0].nmes: unknown option `nmes` for `rename_tools`" in done.stderr
    assert "did you mean `names`?" in done.stderr


def test_plugin_own_unit_tests_pass(installed: dict[str, str]) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(PLUGIN / "tests")],
        capture_output=True,
        text=True,
        env=installed,
        cwd=PLUGIN,
        check=False,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "3 passed" in done.stdout
