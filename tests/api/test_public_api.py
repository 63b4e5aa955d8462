"""The public API a newcomer meets: lazy imports, names, modules, removed names.

Start-up *timings* are measured by benchmarks/bench_startup.py, never asserted;
what is asserted here is behaviour: which modules a command imports.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import inspect
import json
import pickle
import pkgutil
import subprocess
import sys
import textwrap
import typing
import warnings
from pathlib import Path
from types import ModuleType

import pytest

import agui_pipes

PACKAGE_DIR = Path(agui_pipes.__file__).parent

LAZY_PACKAGES = [
    "agui_pipes",
    "agui_pipes.config",
    "agui_pipes.driver",
    "agui_pipes.inspector",
    "agui_pipes.server",
    "agui_pipes.store",
    "agui_pipes.testing",
    "agui_pipes.transformers",
]


def _is_public(name: str) -> bool:
    return not any(part.startswith("_") for part in name.split("."))


def _public_modules() -> list[str]:
    found = ["agui_pipes"]
    for info in pkgutil.walk_packages([str(PACKAGE_DIR)], prefix="agui_pipes."):
        if _is_public(info.name):
            found.append(info.name)
    return sorted(found)


PUBLIC_MODULES = _public_modules()


def _imported_after(code: str) -> set[str]:
    """The modules ``code`` leaves in ``sys.modules``, run in a fresh interpreter."""
    script = code + "\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))\n"
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    )
    return set(json.loads(done.stdout.splitlines()[-1]))


def _heavy(modules: set[str]) -> set[str]:
    roots = {"pydantic", "pydantic_core", "ag_ui", "yaml", "anyio", "jsonpatch"}
    return {name for name in modules if name.partition(".")[0] in roots}


# -- lazy imports ---------------------------------------------------------------


def test_importing_the_package_imports_no_dependency() -> None:
    modules = _imported_after("import agui_pipes")
    assert _heavy(modules) == set()
    assert sorted(m for m in modules if m.startswith("agui_pipes")) == [
        "agui_pipes",
        "agui_pipes._lazy",
        "agui_pipes._version",
    ]


@pytest.mark.parametrize("argv", [["--version"], ["--help"], []])
def test_version_and_help_import_no_dependency_and_no_command(argv: list[str]) -> None:
    modules = _imported_after(
        "from agui_pipes._cli import main\n"
        "try:\n"
        f"    main({argv!r})\n"
        "except SystemExit:\n"
        "    pass\n"
    )
    assert _heavy(modules) == set()
    commands = {m for m in modules if m.startswith("agui_pipes._cli.")}
    assert commands == set()


def test_python_dash_m_version_imports_no_dependency() -> None:
    modules = _imported_after(
        "import runpy, sys\n"
        "sys.argv = ['agui_pipes', '--version']\n"
        "try:\n"
        "    runpy.run_module('agui_pipes', run_name='__main__')\n"
        "except SystemExit:\n"
        "    pass\n"
    )
    assert "agui_pipes._cli" in modules  # __main__ ran the command line
    assert _heavy(modules) == set()


def test_a_command_imports_only_its_own_module(tmp_path: Path) -> None:
    chain = tmp_path / "chain.yaml"
    chain.write_text("transformers: []\n")
    modules = _imported_after(
        f"from agui_pipes._cli import main\nassert main(['check', {str(chain)!r}]) == 0\n"
    )
    commands = {m for m in modules if m.startswith("agui_pipes._cli.") and "._" not in m[15:]}
    assert commands == {"agui_pipes._cli.check"}
    # a chain check needs neither the driver, the server nor any stage it does not name
    assert not {m for m in modules if m.startswith(("agui_pipes.driver", "agui_pipes.server"))}


def test_reading_one_name_imports_what_it_needs_only() -> None:
    modules = _imported_after("from agui_pipes import Limits")
    assert _heavy(modules) == set()
    modules = _imported_after("from agui_pipes import TransformerChain")
    assert "ag_ui.core" in modules
    assert not {m for m in modules if m.startswith(("agui_pipes.driver", "agui_pipes.config"))}


def test_every_command_lists_the_summary_its_module_registers() -> None:
    import argparse

    from agui_pipes import _cli

    parser = argparse.ArgumentParser()
    subparsers = parser.add_subparsers()
    for name in _cli._COMMANDS:
        importlib.import_module(f"agui_pipes._cli.{name}").register(subparsers)
    registered = {action.dest: action.help for action in subparsers._choices_actions}
    assert registered == _cli._COMMANDS


def test_run_on_a_current_stream_defines_no_pre_1_0_event_model(tmp_path: Path) -> None:
    # `run` puts the compat stage in front of every chain; the THINKING_* models it
    # translates are defined only once a legacy shape is read (start-up: issue 33)
    chain = tmp_path / "chain.yaml"
    chain.write_text("version: 1\ntransformers:\n  - type: verify\n    profile: consumer\n")
    stream = tmp_path / "in.ndjson"
    stream.write_text(
        '{"type":"RUN_STARTED","threadId":"t","runId":"r"}\n'
        '{"type":"RUN_FINISHED","threadId":"t","runId":"r"}\n'
    )
    run = f"['run', '-c', {str(chain)!r}, '-q', '-o', {str(tmp_path / 'out')!r}, {str(stream)!r}]"
    modules = _imported_after(f"from agui_pipes._cli import main\nassert main({run}) == 0\n")
    assert "agui_pipes.transformers.compat" in modules
    assert "agui_pipes._protocol.legacy_events" not in modules
    # a synchronous chain over NDJSON is relayed without an event loop: no anyio at all,
    # and no printer of the fast path's generated code
    assert "anyio" not in modules
    assert "agui_pipes._fastpath.show" not in modules
    legacy = tmp_path / "legacy.ndjson"
    legacy.write_text(
        '{"type":"RUN_STARTED","threadId":"t","runId":"r"}\n'
        '{"type":"THINKING_START"}\n{"type":"THINKING_END"}\n'
        '{"type":"RUN_FINISHED","threadId":"t","runId":"r"}\n'
    )
    out = tmp_path / "legacy.out"
    code = (
        "from agui_pipes._cli import main\n"
        f"assert main(['run', '-c', {str(chain)!r}, '-q', '-o', {str(out)!r}, {str(legacy)!r}])"
        " == 0\n"
    )
    assert "agui_pipes._protocol.legacy_events" in _imported_after(code)
    types = [json.loads(line)["type"] for line in out.read_text().splitlines()]
    assert types == ["RUN_STARTED", "REASONING_START", "REASONING_END", "RUN_FINISHED"]


def test_the_pre_1_0_event_models_keep_their_public_home() -> None:
    from agui_pipes._protocol import legacy_events
    from agui_pipes.transformers import compat
    from agui_pipes.transformers.compat import ThinkingStartEvent

    assert compat.ThinkingStartEvent is legacy_events.ThinkingStartEvent is ThinkingStartEvent
    assert compat.LegacyEventType is legacy_events.LegacyEventType
    assert ThinkingStartEvent.__module__ == "agui_pipes.transformers.compat"
    event = ThinkingStartEvent(title="plan")
    assert pickle.loads(pickle.dumps(event)) == event
    with pytest.raises(AttributeError, match="no attribute 'ThinkingNothing'"):
        _ = compat.ThinkingNothing


@pytest.mark.parametrize("command", ["run", "verify", "check"])
def test_a_command_help_still_shows_its_options(
    command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from agui_pipes._cli import main

    with pytest.raises(SystemExit) as info:
        main([command, "--help"])
    assert info.value.code == 0
    assert f"usage: agui-pipes {command}" in capsys.readouterr().out


# -- every public module: __all__, dir(), public __module__ ----------------------


def _import_public(module_name: str) -> ModuleType:
    """The module, or a skip when it needs an optional dependency this environment lacks."""
    try:
        return importlib.import_module(module_name)
    except ImportError as exc:
        pytest.skip(f"{module_name} needs an optional dependency: {exc}")


def _dunder(name: str) -> bool:
    return name.startswith("__") and name.endswith("__")


@pytest.mark.parametrize("module_name", PUBLIC_MODULES)
def test_dir_of_every_public_module_is_its_public_names(module_name: str) -> None:
    module = _import_public(module_name)
    exported = module.__all__
    listed = dir(module)
    assert {n for n in listed if not _dunder(n)} == {n for n in exported if not _dunder(n)}
    assert {n for n in exported if _dunder(n)} <= set(listed)


@pytest.mark.parametrize("module_name", PUBLIC_MODULES)
def test_every_exported_name_resolves_and_is_at_home(module_name: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # reading an exported name warns about nothing
        module = _import_public(module_name)
        exported = module.__all__
        assert len(set(exported)) == len(exported), "duplicates in __all__"
        for name in exported:
            value = getattr(module, name)
            if inspect.isclass(value) or inspect.isfunction(value):
                home = value.__module__
                if not home.startswith("agui_pipes"):
                    continue  # a re-exported ag_ui / third-party name
                assert _is_public(home), f"{module_name}.{name} reports {home}"
                # what pickle and repr rely on: the reported home really has it
                found = importlib.import_module(home)
                for part in value.__qualname__.split("."):
                    found = getattr(found, part)
                assert found is value


def test_classes_report_their_public_module() -> None:
    from agui_pipes import config, driver, server, testing

    assert agui_pipes.TransformerChain.__module__ == "agui_pipes"
    assert repr(agui_pipes.TransformerChain) == "<class 'agui_pipes.TransformerChain'>"
    assert agui_pipes.StreamTransformer.__module__ == "agui_pipes"
    assert agui_pipes.Consumer.__module__ == "agui_pipes"
    assert agui_pipes.consume.__module__ == "agui_pipes"
    # re-exported by the top level: the shortest public path, whichever is read first
    assert driver.RunContext.__module__ == "agui_pipes"
    assert driver.run.__module__ == "agui_pipes"
    # only in the subpackage: the subpackage
    assert config.ConfigError.__module__ == "agui_pipes.config"
    assert driver.Agent.__module__ == "agui_pipes.driver"
    assert config.Registry.__module__ == "agui_pipes.config"
    assert server.RunStats.__module__ == "agui_pipes.server"
    assert server.RunFailure.__module__ == "agui_pipes.server"
    assert testing.run_transformer.__module__ == "agui_pipes.testing"


def test_the_shortest_home_does_not_depend_on_which_package_is_read_first() -> None:
    modules = _imported_after(
        "import agui_pipes.driver as d\n"
        "assert d.RunOutcome.__module__ == 'agui_pipes', d.RunOutcome.__module__\n"
        "import agui_pipes\n"
        "assert agui_pipes.RunOutcome is d.RunOutcome\n"
        "assert agui_pipes.RunOutcome.__module__ == 'agui_pipes'\n"
    )
    assert "agui_pipes.driver._outcome" in modules


@pytest.mark.parametrize("package", LAZY_PACKAGES)
def test_annotations_still_resolve_after_the_move(package: str) -> None:
    # get_type_hints (and pydantic) resolve a class's string annotations in the
    # namespace of its __module__, which is now the public package.
    module = importlib.import_module(package)
    for name in module.__all__:
        value = getattr(module, name)
        if isinstance(value, type) and value.__module__ == package:
            typing.get_type_hints(value)


def test_a_public_dataclass_still_works_as_a_pydantic_type() -> None:
    import pydantic

    adapter = pydantic.TypeAdapter(agui_pipes.RunResult)
    assert adapter.json_schema()["title"] == "RunResult"


def test_public_classes_and_instances_pickle() -> None:
    from agui_pipes.driver import ErrorCode

    for cls in (agui_pipes.TransformerChain, agui_pipes.Limits, agui_pipes.RunOutcome):
        assert pickle.loads(pickle.dumps(cls)) is cls
    limits = agui_pipes.Limits(max_depth=7)
    assert pickle.loads(pickle.dumps(limits)) == limits
    assert pickle.loads(pickle.dumps(ErrorCode.CANCELLED)) is ErrorCode.CANCELLED
    assert pickle.loads(pickle.dumps(agui_pipes.run)) is agui_pipes.run


def test_an_unknown_name_is_a_plain_attribute_error() -> None:
    with pytest.raises(AttributeError, match="module 'agui_pipes' has no attribute 'Nope'"):
        agui_pipes.Nope  # noqa: B018
    with pytest.raises(ImportError, match="cannot import name 'Nope'"):
        exec("from agui_pipes.server import Nope", {})


def test_server_lists_the_gateway_names() -> None:
    from agui_pipes import server

    assert {"Gateway", "UpstreamError", "gateway_route"} <= set(dir(server))


# -- the declarations agree ------------------------------------------------------


def _lazy_map(node: ast.AST) -> dict[str, str] | None:
    """The name -> module dict literal of ``_EXPORTS = {...}`` or ``attach(__name__, {...})``."""
    found: ast.expr | None = None
    if isinstance(node, ast.Assign) and ast.unparse(node.targets[0]) == "_EXPORTS":
        found = node.value
    elif isinstance(node, ast.Call) and ast.unparse(node.func) in ("attach", "_attach"):
        found = node.args[1]
    if not isinstance(found, ast.Dict):
        return None
    return {
        ast.literal_eval(k): ast.literal_eval(v)
        for k, v in zip(found.keys, found.values, strict=True)
        if k is not None
    }


def _declarations(package: str) -> tuple[dict[str, str], dict[str, str]]:
    """(names imported under TYPE_CHECKING -> module, the lazy map) of an ``__init__``."""
    spec = importlib.util.find_spec(package)
    assert spec is not None and spec.origin is not None
    tree = ast.parse(Path(spec.origin).read_text())
    typed: dict[str, str] = {}
    lazy: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
            for statement in node.body:
                if isinstance(statement, ast.ImportFrom) and statement.level == 1:
                    for alias in statement.names:
                        typed[alias.asname or alias.name] = "." + (statement.module or "")
            for statement in node.orelse:
                for inner in ast.walk(statement):
                    lazy = _lazy_map(inner) or lazy
    if not lazy:
        # A lazy map built at import rather than written out (agui_pipes.transformers
        # derives it from its list of built-ins): what ``attach`` recorded.
        module = importlib.import_module(package)
        from agui_pipes import _lazy

        lazy = {
            name: source.removeprefix(package)
            for name, source in _lazy._EXPORTS.get(module.__name__, {}).items()
        }
    return typed, lazy


@pytest.mark.parametrize("package", LAZY_PACKAGES)
def test_type_checking_imports_and_lazy_map_agree(package: str) -> None:
    # Type checkers read the TYPE_CHECKING imports, the interpreter the lazy
    # map: one must not offer a name, or a home, the other lacks.
    typed, lazy = _declarations(package)
    assert lazy, f"no lazy map found in {package}"
    assert typed == lazy, "the TYPE_CHECKING imports and the lazy map disagree"


@pytest.mark.parametrize("package", LAZY_PACKAGES)
def test_all_is_the_lazy_map_and_what_the_package_defines(package: str) -> None:
    _, lazy = _declarations(package)
    module = importlib.import_module(package)
    defined_here = {
        name for name in module.__all__ if name in vars(module) and name not in lazy
    }  # e.g. __version__, agent_route
    assert set(lazy) | defined_here == set(module.__all__)


@pytest.mark.parametrize("package", LAZY_PACKAGES)
def test_no_exported_name_hides_a_submodule(package: str) -> None:
    module = importlib.import_module(package)
    submodules = {info.name for info in pkgutil.iter_modules(module.__path__)}
    hidden = [name for name in module.__all__ if name in submodules]
    assert [f"{package}.{name}" for name in hidden] == []


def test_decode_is_the_function_and_its_names_live_in_codecs() -> None:
    modules = _imported_after(
        "import agui_pipes\n"
        "from agui_pipes.codecs import decode_many\n"
        "assert callable(agui_pipes.decode)\n"
        "assert not isinstance(agui_pipes.decode, type(agui_pipes))\n"
        "from agui_pipes import decode\n"
        "assert decode is agui_pipes.decode is agui_pipes.codecs.decode\n"
        "assert not hasattr(agui_pipes, 'decode_many')  # the codecs' own family\n"
    )
    assert "agui_pipes.codecs" in modules
    submodules = {info.name for info in pkgutil.iter_modules(agui_pipes.__path__)}
    assert "decode" not in submodules
    assert importlib.util.find_spec("agui_pipes._protocol.decode") is not None


def test_consume_is_the_function_and_its_module_private() -> None:
    assert callable(agui_pipes.consume)
    assert not isinstance(agui_pipes.consume, ModuleType)
    submodules = {info.name for info in pkgutil.iter_modules(agui_pipes.__path__)}
    assert "consume" not in submodules
    assert importlib.util.find_spec("agui_pipes._consumer.consume") is not None


# -- names removed in 0.2 ------------------------------------------------------


@pytest.mark.parametrize(
    ("package", "name"),
    [
        ("agui_pipes", "Error"),  # the 0.1 name of RunError
        ("agui_pipes.driver", "Error"),
        ("agui_pipes.testing", "run"),  # the 0.1 name of run_events
        ("agui_pipes", "Transform"),
    ],
)
def test_a_removed_name_is_a_plain_attribute_error(package: str, name: str) -> None:
    module = importlib.import_module(package)
    with pytest.raises(AttributeError, match=f"module {package!r} has no attribute {name!r}"):
        getattr(module, name)


def test_run_error_keeps_its_behaviour() -> None:
    error = agui_pipes.RunError.cancelled()
    assert isinstance(error, agui_pipes.AguiPipesError)
    assert repr(error) == "RunError('CANCELLED', 'the run was cancelled')"


# -- Gateway ---------------------------------------------------------------------


def test_gateway_repr_shows_what_it_does_and_no_secret() -> None:
    pytest.importorskip("httpx")
    from agui_pipes import Limits
    from agui_pipes.config import load_chain
    from agui_pipes.server import Gateway
    from agui_pipes.transformers import ExpandChunks, Verify

    gateway = Gateway(
        "https://user:hunter2@agent.example:8443/run?api_key=sk-123&region=eu",
        chain=load_chain("transformers:\n  - filter_tool_calls: {deny: ['internal_*']}\n"),
        forward_headers=["Authorization", "X-Tenant"],
        limits=Limits(max_nodes=500),
        keepalive=None,
    )
    text = repr(gateway)
    assert text.startswith(
        "Gateway('https://user:***@agent.example:8443/run?api_key=***&region=***'"
    )
    for secret in ("hunter2", "sk-123", "eu'"):
        assert secret not in text
    assert "filter_tool_calls" in text
    assert "forward_headers=['authorization', 'x-tenant']" in text
    assert "max_nodes=500" in text
    assert "verify=True" in text and "keepalive=None" in text

    chained = Gateway(
        "http://127.0.0.1:9/",
        chain=agui_pipes.TransformerChain([ExpandChunks(), Verify()]),
        verify=False,
    )
    assert "chain=ExpandChunks() | Verify()" in repr(chained)
    assert "verify=False" in repr(chained)
    assert "chain=None" in repr(Gateway("http://127.0.0.1:9/"))


def test_a_missing_optional_dependency_says_what_to_install() -> None:
    code = textwrap.dedent(
        """
        import sys
        sys.modules["httpx"] = None  # as if the `http` extra were not installed
        from agui_pipes import server
        assert server.AgentEndpoint  # needs no httpx
        try:
            server.Gateway
        except ImportError as exc:
            print(exc)
        """
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == (
        "agui_pipes.server.Gateway needs httpx: pip install 'agui-pipes[server,http]'"
    )
