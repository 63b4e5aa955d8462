"""The registry: built-ins, code registrations, and entry-point plugins (good and broken)."""

from __future__ import annotations

import sys
import textwrap
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest
from ag_ui.core import TextMessageContentEvent

from agui_pipes import StreamTransformer
from agui_pipes._stagekit import builtins as builtins_list
from agui_pipes.config import (
    PLUGIN_GROUP,
    ConfigError,
    PluginWarning,
    Registry,
    TransformerSpec,
    load_chain,
)
from agui_pipes.config.options import NoOptions, VerifyOptions
from agui_pipes.testing import run_events, text

# The registry lists exactly the one list of built-ins, in its order.
BUILTINS = [builtin.name for builtin in builtins_list.BUILTINS]

PLUGIN_MODULE = '''
from pydantic import BaseModel, Field
from ag_ui.core import TextMessageContentEvent
from agui_pipes import StreamTransformer
from agui_pipes._stagekit import builtins as builtins_list
from agui_pipes.config import TransformerSpec


class Shout(StreamTransformer):
    """Upper-case every text delta."""

    class Options(BaseModel):
        model_config = {"extra": "forbid"}
        punctuation: str = Field("", description="Appended to each delta.")

    def __init__(self, punctuation: str = "") -> None:
        self.punctuation = punctuation

    def transform(self, event):
        if isinstance(event, TextMessageContentEvent):
            return (event.model_copy(update={"delta": event.delta.upper() + self.punctuation}),)
        return (event,)


def make_quiet():
    """Lower-case every text delta (a factory function with no options)."""

    class Quiet(StreamTransformer):
        def transform(self, event):
            if isinstance(event, TextMessageContentEvent):
                return (event.model_copy(update={"delta": event.delta.lower()}),)
            return (event,)

    return Quiet()


SPEC = TransformerSpec("ignored_name", Shout, Shout.Options, summary="Shout, via a spec.")
NOT_CALLABLE = 42
'''


def install_fake_distribution(
    root: Path, name: str, entry_points: dict[str, str], module: str | None = None
) -> None:
    """A minimal installed distribution: a module plus a dist-info with entry points."""
    if module is not None:
        (root / f"{name}.py").write_text(module)
    info = root / f"{name}-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
    lines = [f"[{PLUGIN_GROUP}]"] + [f"{k} = {v}" for k, v in entry_points.items()]
    (info / "entry_points.txt").write_text("\n".join(lines) + "\n")


@pytest.fixture
def plugins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    install_fake_distribution(
        tmp_path,
        "shoutplug",
        {
            "shout": "shoutplug:Shout",
            "quiet": "shoutplug:make_quiet",
            "shout_spec": "shoutplug:SPEC",
            "not_callable": "shoutplug:NOT_CALLABLE",
        },
        PLUGIN_MODULE,
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path
    sys.modules.pop("shoutplug", None)


def deltas(factory: object) -> list[str]:
    chain = factory()  # type: ignore[operator]
    out = chain.apply_sync(run_events(text("m1", "Hello", " World")))
    return [e.delta for e in out if isinstance(e, TextMessageContentEvent)]


def test_builtins_are_registered_in_documentation_order() -> None:
    registry = Registry(plugins=False)
    assert registry.names() == BUILTINS
    spec = registry.get("verify")
    assert spec is not None
    assert spec.options is VerifyOptions
    assert spec.summary.startswith("Check the stream against the AG-UI ordering rules")
    assert spec.origin == "built-in"
    assert registry.get("nope") is None


def test_every_builtin_has_a_summary_and_documented_options() -> None:
    for spec in Registry(plugins=False).specs():
        assert spec.summary, spec.name
        for name, field in spec.options.model_fields.items():
            assert field.description, f"{spec.name}.{name} has no description"


def test_plugin_is_used_from_yaml(plugins: Path) -> None:
    registry = Registry()
    with warnings.catch_warnings():
        warnings.simplefilter("error", PluginWarning)
        factory = load_chain(
            textwrap.dedent(
                """
                transformers:
                  - type: shout
                    punctuation: "!"
                  - quiet
                  - shout_spec: {}
                """
            ),
            registry=registry,
        )
    assert deltas(factory) == ["HELLO!", " WORLD!"]
    shout = registry.get("shout")
    assert shout is not None
    assert shout.origin == "shoutplug"
    assert shout.summary == "Upper-case every text delta."
    quiet = registry.get("quiet")
    assert quiet is not None
    assert quiet.options is NoOptions
    assert quiet.summary.startswith("Lower-case every text delta")
    spec = registry.get("shout_spec")
    assert spec is not None
    assert spec.name == "shout_spec"
    assert spec.summary == "Shout, via a spec."


def test_plugin_options_are_validated_like_builtins(plugins: Path) -> None:
    with pytest.raises(ConfigError) as info:
        load_chain("transformers:\n  - shout: {punctuaton: '!'}\n", registry=Registry())
    assert info.value.suggestion == "punctuation"
    assert (info.value.line, info.value.column) == (2, 13)


def test_plugins_load_lazily(plugins: Path) -> None:
    registry = Registry()
    assert "shout" in registry.names()  # discovered from metadata...
    assert "shoutplug" not in sys.modules  # ...but not imported until used
    assert registry.get("shout") is not None
    assert "shoutplug" in sys.modules


def test_broken_plugin_is_a_warning_naming_it_never_a_crash(plugins: Path) -> None:
    install_fake_distribution(plugins, "brokenplug", {"broken_thing": "brokenplug_missing:Thing"})
    install_fake_distribution(plugins, "shadowplug", {"verify": "shoutplug:Shout"})
    registry = Registry()
    with pytest.warns(PluginWarning) as record:
        specs = registry.specs()
    messages = [str(w.message) for w in record]
    assert any(
        "`broken_thing`" in m and "brokenplug" in m and "failed to load" in m for m in messages
    )
    assert any("`not_callable`" in m for m in messages)
    assert any("`verify`" in m and "already a built-in" in m for m in messages)
    names = [s.name for s in specs]
    assert "shout" in names
    assert "broken_thing" not in names
    assert registry.get("verify") is not None
    assert registry.get("verify").origin == "built-in"
    with pytest.raises(ConfigError, match="plugin that failed to load: ModuleNotFoundError"):
        load_chain("transformers: [broken_thing]", registry=registry)


def test_register_in_code() -> None:
    registry = Registry(builtins=False, plugins=False)
    registry.register(TransformerSpec("pass_through", StreamTransformer, summary="Nothing."))
    assert registry.names() == ["pass_through"]
    with pytest.raises(ValueError, match="already registered"):
        registry.register(TransformerSpec("pass_through", StreamTransformer))
    registry.register(TransformerSpec("pass_through", StreamTransformer), replace=True)
    with pytest.raises(ValueError, match="snake_case"):
        registry.register(TransformerSpec("Bad-Name", StreamTransformer))
    with pytest.raises(TypeError, match="pydantic BaseModel"):
        TransformerSpec("x", StreamTransformer, options=dict)  # type: ignore[arg-type]


def test_cli_reports_a_broken_plugin_and_keeps_working(plugins: Path) -> None:
    import os
    import subprocess

    install_fake_distribution(plugins, "brokenplug", {"broken_thing": "brokenplug_missing:Thing"})
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(plugins), *sys.path])}
    done = subprocess.run(
        [sys.executable, "-m", "agui_pipes", "list"],
        capture_output=True,
        text=True,
        env=env,
        check=False,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "agui-pipes: warning: transformer plugin `broken_thing`" in done.stderr
    assert "brokenplug_missing" in done.stderr
    assert "Traceback" not in done.stderr
    assert "\nshout  [shoutplug]\n" in done.stdout
    assert "\nverify\n" in done.stdout


def test_built_in_options_models_are_defined_on_first_lookup_only() -> None:
    # Start-up: a chain that names no built-in (or `agui-pipes list` of plugins
    # only) must not pay for defining every built-in's options model.
    import subprocess
    import sys

    script = (
        "import sys\n"
        "from agui_pipes.config import load_chain\n"
        "load_chain({'transformers': []})\n"
        "print('agui_pipes.config.options' in sys.modules)\n"
        "load_chain({'transformers': ['expand_chunks']})\n"
        "print('agui_pipes.config.options' in sys.modules)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    ).stdout.split()
    assert out == ["False", "True"]
