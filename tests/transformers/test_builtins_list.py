"""The one list of built-in stages, and the layout it keeps: a stage folder of stages.

``agui_pipes/_stagekit/builtins.py`` is the only place a built-in is registered;
everything else is derived from it or checked against it here. The helpers the
stages share live in ``agui_pipes/_stagekit/`` and sit below the stages.
"""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import BaseModel

import agui_pipes.transformers
from agui_pipes import Stage
from agui_pipes._stagekit.builtins import BUILTINS, Builtin, transformer_exports
from agui_pipes.config import Registry
from agui_pipes.config import options as options_module

PACKAGE = Path(agui_pipes.transformers.__file__).parent
STAGEKIT = PACKAGE.parent / "_stagekit"


def _typing_imports() -> dict[str, str]:
    """What the ``if TYPE_CHECKING:`` block of transformers/__init__.py imports, from where."""
    tree = ast.parse((PACKAGE / "__init__.py").read_text(encoding="utf-8"))
    block = next(node for node in tree.body if isinstance(node, ast.If))
    found: dict[str, str] = {}
    for node in block.body:
        assert isinstance(node, ast.ImportFrom), ast.dump(node)
        for alias in node.names:
            assert alias.asname == alias.name, f"re-export {alias.name} as itself"
            found[alias.name] = "." * node.level + (node.module or "")
    return found


def test_the_type_checking_imports_say_what_the_list_says() -> None:
    assert _typing_imports() == transformer_exports(), (
        "the TYPE_CHECKING imports of agui_pipes/transformers/__init__.py must name "
        "exactly the stages (and exports) of agui_pipes/_stagekit/builtins.py"
    )


def test_the_package_exports_the_list() -> None:
    assert sorted(agui_pipes.transformers.__all__) == sorted(transformer_exports())
    for name, module in transformer_exports().items():
        value = getattr(agui_pipes.transformers, name)
        assert sys.modules[f"agui_pipes.transformers{module}"].__dict__[name] is value


def test_the_registry_lists_the_list_in_its_order() -> None:
    assert Registry(plugins=False).names() == [builtin.name for builtin in BUILTINS]


def test_the_folder_holds_only_the_listed_stage_modules() -> None:
    modules = {path.stem for path in PACKAGE.glob("*.py")} - {"__init__"}
    assert modules == {builtin.module for builtin in BUILTINS}, (
        "agui_pipes/transformers/ holds stage modules only; a helper shared by stages "
        "goes to agui_pipes/_stagekit/"
    )


@pytest.mark.parametrize("builtin", BUILTINS, ids=lambda b: b.name)
def test_each_entry_names_a_stage_and_an_options_model(builtin: Builtin) -> None:
    module = importlib.import_module(f"agui_pipes.transformers.{builtin.module}")
    assert builtin.stage in vars(module), f"{builtin.module}.py does not define {builtin.stage}"
    model = getattr(options_module, builtin.options)
    assert isinstance(model, type) and issubclass(model, BaseModel)
    spec = Registry(plugins=False).get(builtin.name)
    assert spec is not None and spec.options is model
    assert isinstance(spec.build(spec.validate(_example(model))), Stage)


def _example(model: type[BaseModel]) -> dict[str, object]:
    extra = model.model_config.get("json_schema_extra")
    examples = extra.get("examples", [{}]) if isinstance(extra, dict) else [{}]
    assert isinstance(examples, list) and isinstance(examples[0], dict)
    return examples[0]


# -- layering of the stage helpers ---------------------------------------------------

_ABOVE_STAGEKIT = (
    "agui_pipes.transformers",
    "agui_pipes.codecs",
    "agui_pipes.relay",
    "agui_pipes._fastpath",
    "agui_pipes.server",
    "agui_pipes.store",
    "agui_pipes.driver",
    "agui_pipes.config",
    "agui_pipes._cli",
)


def _module_level_imports(source: str) -> set[str]:
    """Absolute names of what a _stagekit module (its source) imports at module level."""
    found: set[str] = set()
    for node in ast.parse(source).body:
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0:
                found.add(node.module or "")
                continue
            base = ["agui_pipes", "_stagekit"][: 2 - (node.level - 1)]
            target = ".".join([*base, *([node.module] if node.module else [])])
            found |= {target} if node.module else {f"{target}.{a.name}" for a in node.names}
    return found


@pytest.mark.parametrize("path", sorted(STAGEKIT.glob("*.py")), ids=lambda p: p.stem)
def test_stagekit_sits_below_the_stages(path: Path) -> None:
    upward = sorted(
        name
        for name in _module_level_imports(path.read_text(encoding="utf-8"))
        if any(name == above or name.startswith(above + ".") for above in _ABOVE_STAGEKIT)
    )
    assert not upward, f"_stagekit/{path.name} imports {upward} at module level"


def test_the_layering_check_sees_an_upward_import() -> None:
    # The check above must catch a relative import of a stage or of the wire.
    source = "from ..transformers.verify import Verify\nfrom .. import codecs\n"
    found = _module_level_imports(source)
    assert {"agui_pipes.transformers.verify", "agui_pipes.codecs"} <= found


@pytest.mark.parametrize(
    "module",
    sorted(
        {f"agui_pipes.transformers.{b.module}" for b in BUILTINS}
        | {f"agui_pipes._stagekit.{p.stem}" for p in STAGEKIT.glob("*.py") if p.stem != "__init__"}
    ),
)
def test_importing_a_stage_or_helper_loads_no_fast_path_and_no_wire(module: str) -> None:
    code = (
        f"import sys, {module}\n"
        "print([m for m in sys.modules if '_fastpath' in m "
        "or m in ('agui_pipes.codecs', 'agui_pipes.relay')])"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]", f"importing {module} loads {done.stdout.strip()}"
