"""Store backends come from the entry-point group ``agui_pipes.stores``: built-ins and plugins.

Each case runs in a subprocess, because the registry reads the entry points
once per process: the toy backend is a real distribution installed with
``pip install --target`` into a directory the subprocess gets on PYTHONPATH,
then uninstalled (its directory removed) and looked up again. Broken plugins
are minimal dist-info directories. The test venv itself is never changed.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import site
import subprocess
import sys
from importlib.metadata import entry_points
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
GROUP = "agui_pipes.stores"

TOY_MODULE = '''
from agui_pipes.store import MemoryEventLog, StoreURL


class ToyEventLog(MemoryEventLog):
    """A memory log that remembers which shelf its URL named."""

    @classmethod
    def from_url(cls, url: StoreURL) -> "ToyEventLog":
        flavour = url.options.pop("flavour", "plain")
        url.no_more()
        log = cls(url.retention)
        log.shelf = url.parts.netloc
        log.flavour = flavour
        return log
'''

TOY_PYPROJECT = f'''
[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "agui-pipes-toy-store"
version = "0.1.0"
dependencies = []

[project.entry-points."{GROUP}"]
toy = "toy_store:ToyEventLog"

[tool.setuptools]
py-modules = ["toy_store"]
'''

USE_TOY = """
import anyio, json
from agui_pipes.store import open_store

async def main() -> None:
    store = open_store("toy://pantry?flavour=plum&max_runs=3")
    async with store:
        await store.append("thread-1", "run-1", [b'{"n":1}', b'{"n":2}'])
        stored = [data.decode() for _, data in await store.read("run-1")]
    print(json.dumps({
        "class": f"{type(store).__module__}.{type(store).__qualname__}",
        "shelf": store.shelf, "flavour": store.flavour,
        "max_runs": store.retention.max_runs, "stored": stored,
    }))

anyio.run(main)
"""

OUTCOMES = """
import json, sys
from agui_pipes.store import open_store

out = {}
for url in sys.argv[1:]:
    try:
        out[url] = type(open_store(url)).__name__
    except Exception as exc:
        out[url] = f"{type(exc).__name__}: {exc}"
print(json.dumps(out))
"""


def python(
    code: str, env: dict[str, str], cwd: Path, *args: str, flags: tuple[str, ...] = ()
) -> str:
    """Run ``code`` in a fresh interpreter in ``cwd``: away from the source tree's *.egg-info."""
    done = subprocess.run(
        [sys.executable, *flags, "-c", code, *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        check=False,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def with_path(*entries: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([*map(str, entries), env.get("PYTHONPATH", "")])
    return env


def fake_distribution(root: Path, name: str, entries: dict[str, str]) -> None:
    """A minimal installed distribution: a dist-info with entry points, nothing to import."""
    info = root / f"{name}-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
    lines = [f"[{GROUP}]", *(f"{k} = {v}" for k, v in entries.items())]
    (info / "entry_points.txt").write_text("\n".join(lines) + "\n")


@pytest.mark.skipif(
    importlib.util.find_spec("setuptools") is None,
    reason="building the toy store offline needs setuptools in the test environment",
)
def test_a_backend_installed_by_entry_point_serves_its_scheme(tmp_path: Path) -> None:
    source = tmp_path / "src"
    source.mkdir()
    (source / "pyproject.toml").write_text(TOY_PYPROJECT)
    (source / "toy_store.py").write_text(TOY_MODULE)
    target = tmp_path / "site"
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
    env = with_path(target)
    assert json.loads(python(USE_TOY, env, tmp_path)) == {
        "class": "toy_store.ToyEventLog",
        "shelf": "pantry",
        "flavour": "plum",
        "max_runs": 3,  # retention options are read for every backend, plugins too
        "stored": ['{"n":1}', '{"n":2}'],
    }

    shutil.rmtree(target)  # uninstalled: the scheme is gone with it
    message = json.loads(python(OUTCOMES, env, tmp_path, "toy://pantry"))["toy://pantry"]
    assert message.startswith(
        "ValueError: unknown store URL scheme in 'toy://pantry' "
        "(registered schemes: memory, postgres, postgresql, redis, rediss, sqlite)"
    )
    assert "sqlite:///runs.db" in message


def test_a_broken_plugin_names_its_entry_point_and_breaks_only_its_scheme(
    tmp_path: Path,
) -> None:
    fake_distribution(
        tmp_path,
        "store_plugins_test",
        {
            "broken": "no_such_module_for_store_tests:Log",
            "notabackend": "json:dumps",
            "twice": "json:JSONDecoder",
            "memory": "json:JSONDecoder",  # a built-in scheme is not a plugin's to take
        },
    )
    fake_distribution(tmp_path, "other_store_plugins_test", {"twice": "json:JSONEncoder"})
    urls = ["broken://x", "notabackend://x", "twice://x", "memory:", "sqlite:///runs.db"]
    out = json.loads(python(OUTCOMES, with_path(tmp_path), tmp_path, *urls))
    assert out["broken://x"] == (
        "ValueError: store URL 'broken://x': the backend for 'broken', entry point `broken` "
        "(no_such_module_for_store_tests:Log, from store_plugins_test) in group "
        "'agui_pipes.stores', failed to import: ModuleNotFoundError: No module named "
        "'no_such_module_for_store_tests'"
    )
    assert out["notabackend://x"].startswith(
        "ValueError: store URL 'notabackend://x': entry point `notabackend` (json:dumps, "
        "from store_plugins_test) in group 'agui_pipes.stores' is not a store backend: "
    )
    assert out["notabackend://x"].endswith("has no from_url(url) classmethod")
    assert out["twice://x"].startswith(
        "ValueError: store URL 'twice://x': scheme 'twice' is registered by more than one backend: "
    )
    assert "json:JSONEncoder, from other_store_plugins_test" in out["twice://x"]
    assert "json:JSONDecoder, from store_plugins_test" in out["twice://x"]
    assert out["memory:"] == "MemoryEventLog"
    assert out["sqlite:///runs.db"] == "SQLiteEventLog"


def dependencies_only(view: Path) -> Path:
    """``view``: this environment's site-packages without agui_pipes (nor its metadata)."""
    view.mkdir()
    for directory in map(Path, site.getsitepackages()):
        for entry in directory.iterdir() if directory.is_dir() else ():
            name = entry.name.lower()
            if name.startswith(("agui_pipes", "agui-pipes", "__editable__")):
                continue
            if not (view / entry.name).exists():
                (view / entry.name).symlink_to(entry)
    return view


def test_a_source_tree_without_metadata_reads_the_builtins_from_pyproject(
    tmp_path: Path,
) -> None:
    # The package from the source tree, no metadata of it: the tree run without installing.
    view = dependencies_only(tmp_path / "site")
    (view / "agui_pipes").symlink_to(ROOT / "agui_pipes")
    env = {**os.environ, "PYTHONPATH": str(view)}
    check = (
        "import importlib.metadata as m, agui_pipes\n"
        "try:\n    m.distribution('agui-pipes')\nexcept m.PackageNotFoundError:\n"
        "    print('no metadata', agui_pipes.__file__)\n"
    )
    expected = f"no metadata {view / 'agui_pipes' / '__init__.py'}"
    assert python(check, env, tmp_path, flags=("-S",)).strip() == expected
    installed = {ep.name: ep.value for ep in entry_points(group=GROUP)}
    assert set(installed) == {"memory", "sqlite", "redis", "rediss", "postgres", "postgresql"}
    urls = ["memory:", "sqlite:///runs.db", "redis://cache/0", "rediss://cache/0", "pg://db"]
    urls += ["postgresql://db/runs", "postgres://db/runs"]
    out = json.loads(python(OUTCOMES, env, tmp_path, *urls, flags=("-S",)))
    assert out.pop("pg://db").startswith(
        "ValueError: unknown store URL scheme in 'pg://db' (registered schemes: "
        f"{', '.join(sorted(installed))})"
    )
    assert out == {
        "memory:": "MemoryEventLog",
        "sqlite:///runs.db": "SQLiteEventLog",
        "redis://cache/0": "RedisEventLog",
        "rediss://cache/0": "RedisEventLog",
        "postgresql://db/runs": "PostgresEventLog",
        "postgres://db/runs": "PostgresEventLog",
    }


def test_an_installed_copy_takes_its_builtins_from_its_metadata(tmp_path: Path) -> None:
    # A copy of the package with metadata of its own and no pyproject.toml near it, whose
    # built-in table names the memory backend `memo`: only the metadata can say so.
    view = dependencies_only(tmp_path / "site")
    shutil.copytree(
        ROOT / "agui_pipes", view / "agui_pipes", ignore=shutil.ignore_patterns("__pycache__")
    )
    info = view / "agui_pipes-0.0.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: agui-pipes\nVersion: 0.0.0\n")
    (info / "entry_points.txt").write_text(
        f"[{GROUP}]\nmemo = agui_pipes.store.memory:MemoryEventLog\n"
        "sqlite = agui_pipes.store.sqlite:SQLiteEventLog\n"
    )
    env = {**os.environ, "PYTHONPATH": str(view)}
    out = json.loads(python(OUTCOMES, env, tmp_path, "memo:", "memory:", flags=("-S",)))
    assert out["memo:"] == "MemoryEventLog"
    assert out["memory:"].startswith(
        "ValueError: unknown store URL scheme in 'memory:' (registered schemes: memo, sqlite)"
    )
