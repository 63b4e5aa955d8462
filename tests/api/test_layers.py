"""The package's layers, held to their one direction.

docs/architecture.md ("Layers") states the rules; this file is where they are
enforced. Two checks:

* **No upward import** (``ast``): every module of ``agui_pipes`` belongs to one
  layer, and no import in it — at module level or inside a function, anything but
  an ``if TYPE_CHECKING:`` block — names a module of a higher layer. A module may
  import its own layer and every layer below.
* **The reference path never loads the fast path**: each module below the wire
  layer, imported alone in a fresh interpreter, leaves no ``agui_pipes._fastpath``
  module in ``sys.modules``.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "agui_pipes"

# Lowest first. A module's layer is the one of the longest prefix naming it.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("plumbing", ("agui_pipes._version", "agui_pipes._lazy")),
    ("foundation", ("agui_pipes._foundation",)),
    ("protocol", ("agui_pipes._protocol", "agui_pipes.events", "agui_pipes.verify")),
    ("pipeline", ("agui_pipes._pipeline",)),
    ("stages", ("agui_pipes._stagekit", "agui_pipes.transformers")),
    ("consumer", ("agui_pipes._consumer",)),
    ("wire", ("agui_pipes.codecs", "agui_pipes.relay", "agui_pipes._fastpath")),
    (
        "runtime",
        (
            "agui_pipes.config",
            "agui_pipes.driver",
            "agui_pipes.store",
            "agui_pipes.client",
            "agui_pipes._client",
            "agui_pipes.aiostream",
            "agui_pipes.testing",
        ),
    ),
    (
        "serving",
        # The mock backend is a server (it builds on server/), though its public
        # names live in the testing kit.
        (
            "agui_pipes.server",
            "agui_pipes.inspector",
            "agui_pipes.demo",
            "agui_pipes.testing._mock",
            "agui_pipes.integrations",
        ),
    ),
    ("command line", ("agui_pipes._cli", "agui_pipes.__main__")),
)
# The package root only maps public names to their modules (imported lazily): a face,
# above every layer.
FACES = frozenset({"agui_pipes"})
REFERENCE_LAYERS = ("plumbing", "foundation", "protocol", "pipeline", "stages", "consumer")


def _layer_index(module: str) -> int | None:
    best: tuple[int, int] | None = None
    for index, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and (
                best is None or len(prefix) > best[1]
            ):
                best = (index, len(prefix))
    return None if best is None else best[0]


def _modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        if "__pycache__" in path.parts:
            continue
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _runtime_imports(module: str, path: Path) -> list[tuple[int, str]]:
    """(line, imported module) for every import that runs, resolved to absolute names."""
    is_package = path.name == "__init__.py"
    package = module if is_package else module.rpartition(".")[0]
    found: list[tuple[int, str]] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join([*base, *([node.module] if node.module else [])])
            else:
                target = node.module or ""
            found.append((node.lineno, target))
            # ``from . import name`` may import a submodule: count it as one.
            found.extend((node.lineno, f"{target}.{alias.name}") for alias in node.names)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(path.read_text(encoding="utf-8")))
    return found


def test_every_module_has_a_layer() -> None:
    unplaced = sorted(m for m in _modules() if m not in FACES and _layer_index(m) is None)
    assert not unplaced, (
        f"these modules belong to no layer: {unplaced}; add them to LAYERS in "
        "tests/api/test_layers.py and to the layer list in docs/architecture.md"
    )


def test_no_module_imports_a_higher_layer() -> None:
    modules = _modules()
    upward: list[str] = []
    for module, path in modules.items():
        if module in FACES:
            continue
        own = _layer_index(module)
        assert own is not None
        for line, target in _runtime_imports(module, path):
            if not target.startswith("agui_pipes") or target in FACES:
                continue
            if target not in modules:  # ``from pkg import name`` where name is no module
                continue
            other = _layer_index(target)
            if other is not None and other > own:
                upward.append(
                    f"{path.relative_to(ROOT)}:{line}: {module} ({LAYERS[own][0]}) imports "
                    f"{target} ({LAYERS[other][0]})"
                )
    assert not upward, "upward imports (see docs/architecture.md, Layers):\n" + "\n".join(upward)


def _reference_modules() -> list[str]:
    return [
        module
        for module in _modules()
        if module not in FACES and LAYERS[_layer_index(module) or 0][0] in REFERENCE_LAYERS
    ]


_PROBE = """
import importlib, sys
loaded = [m for m in sys.modules if m.startswith("agui_pipes._fastpath")]
assert not loaded, loaded
importlib.import_module(sys.argv[1])
print("\\n".join(m for m in sys.modules if m.startswith("agui_pipes._fastpath")))
"""


@pytest.mark.parametrize("module", _reference_modules())
def test_reference_module_loads_no_fast_path(module: str) -> None:
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, module],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    loaded = done.stdout.split()
    assert not loaded, f"importing {module} alone loads the fast path: {loaded}"


def test_the_checks_see_a_violation(tmp_path: Path) -> None:
    """The rules are not vacuous: an upward import and a fast-path load are both seen."""
    path = tmp_path / "decode.py"
    path.write_text("from ..server import build_app\nfrom .._fastpath import builders\n")
    targets = [t for _, t in _runtime_imports("agui_pipes._protocol.decode", path)]
    assert "agui_pipes.server" in targets
    assert "agui_pipes._fastpath" in targets
    assert _layer_index("agui_pipes.server") > _layer_index("agui_pipes._protocol.decode")  # type: ignore[operator]
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, "agui_pipes.codecs"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
    )
    assert done.stdout.split(), "the probe must see what the wire entry point loads"
