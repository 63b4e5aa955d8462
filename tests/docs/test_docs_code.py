"""Every ```python block in README.md and docs/ runs here, so the docs cannot drift.

The marker convention (HTML comments, invisible on GitHub) is described for
writers in docs/contributing.md; in short, a block is preceded by zero or more
of these lines, each on its own line, with only blank lines between them and
the block's opening fence:

``<!-- docs-test: continue -->``
    run the previous python block of the same page first, in the same
    namespace (and that block's own ``continue`` chain before it);
``<!-- docs-test: name: NAME -->`` and ``<!-- docs-test: continue: NAME -->``
    the same, building on the block of that name on the same page (which
    may come later on the page: a guide may use in step 1 what step 2
    defines);
``<!-- docs-test: setup``  ...  ``-->``
    a hidden Python prelude run before the block, in the same namespace (for
    a name the reader is meant to supply, such as ``source``);
``<!-- docs-test: fragment: REASON -->``
    the block cannot run alone (a method body, a signature sketch): it is
    only compiled;
``<!-- docs-test: skip: REASON -->``
    the block must not run in the suite (it starts a server, needs the
    network); it is still compiled, and REASON is part of the test id;
``<!-- docs-test: requires: NAME, ... -->``
    the block runs only where every NAME is an importable module or a
    command on PATH (an optional extra, node), and is skipped, naming what
    is missing, elsewhere.

A block runs as the body of a fresh module, in a temporary working
directory; a DeprecationWarning its own code triggers fails it (the docs
teach current names). Top-level ``await`` is allowed: such a block (or chain) runs in
one event loop, on asyncio and on trio. Functions named ``test_*`` that the
block defines are then called, as pytest would (``async`` ones in an event
loop), so a documented test is a test. Line numbers in tracebacks are the
lines of the Markdown file.
"""

from __future__ import annotations

import ast
import importlib.util
import inspect
import logging
import re
import shutil
import sys
import types
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]

_FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})(?P<info>[^`\n]*)$")
_MARKER = re.compile(r"^[ \t]*<!--\s*docs-test:\s*(?P<body>.*?)\s*(?P<close>-->)?\s*$")
_KINDS = ("continue", "name", "setup", "fragment", "skip", "requires")
_NEEDS_REASON = ("fragment", "skip", "requires", "name")


@dataclass
class Block:
    """One python block of a page and what its markers ask for."""

    page: str  # path relative to the repository root
    line: int  # line of the opening fence (1-based)
    source: str  # the code, fence indentation removed
    continues: bool = False
    setup: list[tuple[int, str]] = field(default_factory=list)  # (first line, code)
    mode: str = "run"  # run | fragment | skip
    reason: str = ""
    requires: list[str] = field(default_factory=list)
    previous: Block | None = None  # the block a `continue` builds on
    name: str = ""
    continues_name: str = ""

    @property
    def id(self) -> str:
        where = f"{self.page}:{self.line}"
        return f"{where} [{self.mode}: {self.reason}]" if self.mode != "run" else where

    def chain(self) -> list[Block]:
        """This block and the blocks it continues, earliest first."""
        blocks = [self]
        while blocks[-1].continues and blocks[-1].previous is not None:
            blocks.append(blocks[-1].previous)
        return blocks[::-1]


def _dedent(lines: list[str], indent: str) -> str:
    out = []
    for line in lines:
        out.append(line[len(indent) :] if line.startswith(indent) else line.lstrip(" \t"))
    return "\n".join(out) + "\n"


def parse_page(page: str, text: str) -> tuple[list[Block], list[str]]:
    """The python blocks of one page, and every misuse of the markers found on it."""
    lines = text.splitlines()
    blocks: list[Block] = []
    problems: list[str] = []
    pending: list[tuple[int, str, str]] = []  # (line, kind, argument) waiting for a block
    last_runnable: Block | None = None
    i = 0
    while i < len(lines):
        number = i + 1
        line = lines[i]
        marker = _MARKER.match(line)
        fence = _FENCE.match(line)
        if marker:
            body = marker["body"]
            kind, _, argument = body.partition(":")
            kind = kind.strip()
            if kind == "setup":
                if marker["close"]:
                    problems.append(
                        f"{page}:{number}: a setup marker needs code lines and a "
                        "closing `-->` line after it"
                    )
                    i += 1
                    continue
                end = i + 1
                while end < len(lines) and lines[end].strip() != "-->":
                    end += 1
                if end == len(lines):
                    problems.append(f"{page}:{number}: setup block never closed with `-->`")
                    break
                code = "\n".join(lines[i + 1 : end]) + "\n"
                pending.append((number + 1, "setup", code))
                i = end + 1
                continue
            if not marker["close"]:
                problems.append(
                    f"{page}:{number}: a `docs-test: {kind}` marker must end on "
                    "its own line with `-->`"
                )
            elif kind not in _KINDS:
                problems.append(
                    f"{page}:{number}: unknown marker `docs-test: {kind}` "
                    f"(known: {', '.join(_KINDS)})"
                )
            elif kind in _NEEDS_REASON and not argument.strip():
                problems.append(
                    f"{page}:{number}: `docs-test: {kind}` needs a reason: "
                    f"`<!-- docs-test: {kind}: why -->`"
                )
            else:
                pending.append((number, kind, argument.strip()))
            i += 1
            continue
        if fence:
            indent, ticks, info = fence["indent"], fence["fence"], fence["info"].strip()
            end = i + 1
            while end < len(lines):
                closing = _FENCE.match(lines[end])
                if closing and closing["fence"].startswith(ticks) and not closing["info"].strip():
                    break
                end += 1
            language = info.split()[0] if info else ""
            if language == "python":
                block = Block(page, number, _dedent(lines[i + 1 : end], indent))
                for at, kind, argument in pending:
                    if kind == "setup":
                        block.setup.append((at, argument))
                    elif kind == "continue":
                        block.continues = True
                        block.continues_name = argument
                    elif kind == "name":
                        block.name = argument
                    elif kind == "requires":
                        block.requires += [n.strip() for n in argument.split(",") if n.strip()]
                    elif block.mode != "run":
                        problems.append(
                            f"{page}:{at}: a block is either fragment or skip, not both"
                        )
                    else:
                        block.mode, block.reason = kind, argument
                if block.continues and not block.continues_name:
                    if last_runnable is None:
                        problems.append(
                            f"{page}:{number}: `continue` but no runnable python "
                            "block before it on this page"
                        )
                    block.previous = last_runnable
                    if block.mode == "fragment":
                        problems.append(
                            f"{page}:{number}: a fragment is never run, so it "
                            "cannot `continue` another block"
                        )
                blocks.append(block)
                if block.mode != "fragment":
                    last_runnable = block
            elif pending:
                problems.append(
                    f"{page}:{pending[0][0]}: docs-test marker before a "
                    f"`{language or 'plain'}` block: markers apply to python "
                    "blocks only"
                )
            pending = []
            i = end + 1
            continue
        if line.strip() and pending:
            problems.append(
                f"{page}:{pending[0][0]}: docs-test marker not followed by a "
                "python block (only blank lines may come between)"
            )
            pending = []
        i += 1
    if pending:
        problems.append(f"{page}:{pending[0][0]}: docs-test marker at the end of the page")
    named: dict[str, Block] = {}
    for block in blocks:
        if block.name in named:
            problems.append(f"{page}:{block.line}: a second block named `{block.name}`")
        elif block.name:
            named[block.name] = block
    for block in blocks:
        if block.continues_name:
            target = named.get(block.continues_name)
            if target is None or target.mode == "fragment":
                problems.append(
                    f"{page}:{block.line}: `continue: {block.continues_name}` "
                    "names no runnable block on this page"
                )
                block.continues = False
            else:
                block.previous = target
    for block in blocks:
        seen = {id(block)}
        step = block
        while step.continues and step.previous is not None:
            step = step.previous
            if id(step) in seen:
                problems.append(f"{page}:{block.line}: `continue` markers form a cycle")
                block.continues = False
                break
            seen.add(id(step))
    return blocks, problems


def _collect() -> tuple[list[Block], list[str]]:
    blocks: list[Block] = []
    problems: list[str] = []
    for path in PAGES:
        found, wrong = parse_page(path.relative_to(ROOT).as_posix(), path.read_text("utf-8"))
        blocks += found
        problems += wrong
    return blocks, problems


BLOCKS, PROBLEMS = _collect()


def _compile(code: str, page: str, first_line: int) -> types.CodeType:
    # Padding puts each statement on its line of the Markdown file, so a
    # traceback points at the page, line for line.
    padded = "\n" * (first_line - 1) + code
    return compile(
        padded, str(ROOT / page), "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT, dont_inherit=True
    )


def _pieces(block: Block) -> list[tuple[Block, types.CodeType]]:
    """Every code object to run for ``block``, in order (its chain, with setups)."""
    pieces = []
    for part in block.chain():
        for at, code in part.setup:
            pieces.append((part, _compile(code, part.page, at)))
        pieces.append((part, _compile(part.source, part.page, part.line + 1)))
    return pieces


def _is_async(code: types.CodeType) -> bool:
    return bool(code.co_flags & inspect.CO_COROUTINE)


def _test_functions(block: Block, namespace: dict[str, Any]) -> list[Callable[[], Any]]:
    """The ``test_*`` functions the block itself defines (not those it continues)."""
    tree = ast.parse(block.source)
    names = [
        node.name
        for node in tree.body
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name.startswith("test")
    ]
    return [namespace[name] for name in names]


def _runs_async(block: Block) -> bool:
    if block.mode != "run":
        return False
    try:
        return any(_is_async(code) for _, code in _pieces(block)) or any(
            isinstance(node, ast.AsyncFunctionDef) and node.name.startswith("test")
            for node in ast.parse(block.source).body
        )
    except SyntaxError:
        return False  # the block's own test reports it, with the page and line


def _params() -> list[Any]:
    params = []
    for block in BLOCKS:
        runs_async = _runs_async(block)
        backends = ["asyncio", "trio"] if runs_async else [None]
        for backend in backends:
            name = block.id if backend is None else f"{block.id} [{backend}]"
            params.append(pytest.param(block, backend, id=name))
    return params


def test_markers_are_well_formed() -> None:
    assert not PROBLEMS, "\n".join(PROBLEMS)


def test_every_page_is_scanned() -> None:
    # A guard against a parser that silently finds nothing.
    assert len(BLOCKS) >= 30
    assert {block.page for block in BLOCKS} >= {"README.md", "docs/driver.md"}


@pytest.fixture
def restore_logging() -> Iterator[None]:
    """Blocks may configure logging, as the docs tell readers to; no other test sees it."""
    manager = logging.Logger.manager
    before = {
        name: (logger.level, list(logger.handlers), logger.propagate, logger.disabled)
        for name, logger in [("", logging.getLogger()), *manager.loggerDict.items()]
        if isinstance(logger, logging.Logger)
    }
    yield
    for name, logger in [("", logging.getLogger()), *manager.loggerDict.items()]:
        if not isinstance(logger, logging.Logger):
            continue
        level, handlers, propagate, disabled = before.get(name, (logging.NOTSET, [], True, False))
        logger.setLevel(level)
        logger.handlers[:] = handlers
        logger.propagate, logger.disabled = propagate, disabled


@pytest.mark.usefixtures("restore_logging")
@pytest.mark.parametrize(("block", "backend"), _params())
def test_docs_block(
    block: Block, backend: str | None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pieces = _pieces(block)  # compiles: a syntax error fails even a fragment or a skip
    if block.mode == "fragment":
        return
    if block.mode == "skip":
        pytest.skip(f"{block.id}: {block.reason}")
    missing = [
        name
        for part in block.chain()
        for name in part.requires
        if importlib.util.find_spec(name) is None and shutil.which(name) is None
    ]
    if missing:
        pytest.skip(f"{block.id}: needs {', '.join(missing)} (not installed)")
    monkeypatch.chdir(tmp_path)
    # A real module, so that pydantic, dataclasses and typing.get_type_hints can
    # find the block's classes by their ``__module__``.
    module = types.ModuleType("docs_example")
    module.__file__ = str(ROOT / block.page)
    monkeypatch.setitem(sys.modules, module.__name__, module)
    namespace = module.__dict__

    async def run_async() -> None:
        for _, code in pieces:
            result = eval(code, namespace)
            if inspect.iscoroutine(result):
                await result
        for test in _test_functions(block, namespace):
            result = test()
            if inspect.iscoroutine(result):
                await result

    with warnings.catch_warnings():
        # The docs teach current names: a deprecated one used by the block's own
        # code (the warning is attributed to its module) fails the block.
        warnings.filterwarnings("error", category=DeprecationWarning, module=module.__name__)
        if backend is not None:
            anyio.run(run_async, backend=backend)
            return
        for _, code in pieces:
            exec(code, namespace)
        for test in _test_functions(block, namespace):
            test()


_BAD_PAGE = """\
<!-- docs-test: fragmnet: typo -->
```python
x = 1
```

<!-- docs-test: skip -->
```python
x = 2
```

<!-- docs-test: continue: nowhere -->
```python
x = 3
```

<!-- docs-test: fragment: sketch -->
some prose between the marker and the block

```python
x = 4
```

<!-- docs-test: requires: node -->
```sh
agui-pipes demo
```
"""


def test_marker_mistakes_are_reported_with_their_line() -> None:
    blocks, problems = parse_page("bad.md", _BAD_PAGE)
    assert [block.line for block in blocks] == [2, 7, 12, 19]
    joined = "\n".join(problems)
    assert "bad.md:1: unknown marker `docs-test: fragmnet`" in joined
    assert "bad.md:6: `docs-test: skip` needs a reason" in joined
    assert "bad.md:12: `continue: nowhere` names no runnable block" in joined
    assert "bad.md:16: docs-test marker not followed by a python block" in joined
    assert "bad.md:23: docs-test marker before a `sh` block" in joined
    assert len(problems) == 5


def test_markers_shape_the_blocks() -> None:
    page = """\
<!-- docs-test: name: defs -->
```python
y = x + 1
```

<!-- docs-test: setup
z = 10
-->
<!-- docs-test: continue -->
```python
w = y + z
```

<!-- docs-test: continue: defs -->
<!-- docs-test: requires: node, npm -->
  ```python
  v = y
  ```

<!-- docs-test: skip: starts a server -->
```python
serve()
```
"""
    (defs, later, indented, skipped), problems = parse_page("p.md", page)
    assert problems == []
    assert later.chain() == [defs, later]
    assert later.setup == [(7, "z = 10\n")]
    assert indented.chain() == [defs, indented]
    assert indented.source == "v = y\n"
    assert indented.requires == ["node", "npm"]
    assert (skipped.mode, skipped.reason) == ("skip", "starts a server")
    assert skipped.id == "p.md:21 [skip: starts a server]"


def _fenced_blocks() -> Iterator[tuple[str, int, re.Match[str], list[str]]]:
    """(page, 1-based line of the opening fence, its match, the body lines) of every
    fenced block in the docs pages."""
    for path in PAGES:
        page = path.relative_to(ROOT).as_posix()
        lines = path.read_text("utf-8").splitlines()
        i = 0
        while i < len(lines):
            fence = _FENCE.match(lines[i])
            if fence is None:
                i += 1
                continue
            end = i + 1
            while end < len(lines) and not (
                (closing := _FENCE.match(lines[end])) and not closing["info"].strip()
            ):
                end += 1
            yield page, i + 1, fence, lines[i + 1 : end]
            i = end + 1


def _yaml_chains() -> list[Any]:
    """Every ```yaml block of the docs that declares a chain (has `transformers`)."""
    import yaml

    params = []
    for page, line, fence, body in _fenced_blocks():
        if fence["info"].strip() == "yaml":
            text = _dedent(body, fence["indent"])
            doc = yaml.safe_load(text)
            if isinstance(doc, dict) and "transformers" in doc:
                params.append(pytest.param(text, id=f"{page}:{line}"))
    return params


@pytest.mark.parametrize("text", _yaml_chains())
def test_docs_chain_file_loads(text: str) -> None:
    from agui_pipes.config import load_chain

    load_chain(text)().apply_sync([])


def _documented_log_line() -> str:
    text = (ROOT / "docs" / "serving.md").read_text("utf-8")
    lines = [line.strip() for line in text.splitlines() if line.strip().startswith("agent run ")]
    assert len(lines) == 1, f"expected one example log line in docs/serving.md, found {lines}"
    return lines[0]


_DURATION = re.compile(r" in \d+\.\d{3}s;")


@pytest.mark.anyio
async def test_serving_log_line_is_what_the_endpoint_logs(caplog: pytest.LogCaptureFixture) -> None:
    """docs/serving.md's per-run log line, reproduced: the demo agent, the demo's chain."""
    import httpx

    from agui_pipes.config import load_chain
    from agui_pipes.demo import DEFAULT_CHAIN, DemoAgent, demo_input
    from agui_pipes.server import AgentEndpoint

    documented = _documented_log_line()
    ids = re.match(r"agent run (?P<run>\S+) thread (?P<thread>\S+):", documented)
    assert ids is not None, documented
    body = demo_input("A weekend in Porto?").model_dump(by_alias=True, mode="json")
    body.update(threadId=ids["thread"], runId=ids["run"])
    app = AgentEndpoint(DemoAgent(), chain=load_chain(DEFAULT_CHAIN))
    transport = httpx.ASGITransport(app=app)
    with caplog.at_level(logging.INFO, logger="agui_pipes.server"):
        async with httpx.AsyncClient(transport=transport, base_url="http://docs") as client:
            response = await client.post("/", json=body)
    assert response.status_code == 200
    logged = [r.getMessage() for r in caplog.records if r.name == "agui_pipes.server"]
    assert len(logged) == 1, logged
    assert _DURATION.search(documented) and _DURATION.search(logged[0])
    assert _DURATION.sub(" in Xs;", logged[0]) == _DURATION.sub(" in Xs;", documented)


# --- shell blocks: every `agui-pipes` command shown names real options ---------------
# They are not run (they read files the reader has); each command's options are
# checked against its own `--help`, in a subprocess so that this holds however
# the CLI builds its parser.

_SHELL_LANGUAGES = ("sh", "bash", "shell", "console")
_COMMAND_SEPARATORS = {"|", "||", "&&", ";", "&"}
_REDIRECTS = {">", ">>", "<", "2>", "2>&1"}


def _shell_commands() -> list[tuple[str, list[str]]]:
    """(`page:line`, argv after `agui-pipes`) for every agui-pipes command in a shell block."""
    import shlex

    found = []
    for page, start, fence, body in _fenced_blocks():
        language = (fence["info"].split() or [""])[0]
        if language not in _SHELL_LANGUAGES:
            continue
        prompted = any(line.lstrip().startswith("$ ") for line in body)
        for offset, raw in enumerate(body, start=start + 1):
            line = raw.strip()
            if prompted:
                if not line.startswith("$ "):
                    continue  # output shown after a `$ command`
                line = line[2:]
            lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
            lexer.whitespace_split = True
            lexer.commenters = "#"
            tokens = list(lexer)
            segment: list[str] = []
            for token in [*tokens, ";"]:
                if token in _COMMAND_SEPARATORS:
                    if segment and segment[0].endswith("agui-pipes"):
                        found.append((f"{page}:{offset}", segment[1:]))
                    segment = []
                else:
                    segment.append(token)
    return found


def _strip_redirects(argv: list[str]) -> list[str]:
    out: list[str] = []
    skip = False
    for token in argv:
        if skip:
            skip = False
        elif token in _REDIRECTS:
            skip = True
        else:
            out.append(token)
    return out


_SHELL_COMMANDS = _shell_commands()


def test_shell_blocks_are_found() -> None:
    commands = {argv[0] for _, argv in _SHELL_COMMANDS if argv}
    assert {"demo", "run", "check", "verify", "serve", "list"} <= commands


@pytest.mark.parametrize(
    "command", sorted({argv[0] for _, argv in _SHELL_COMMANDS if argv}), ids=str
)
def test_shell_commands_use_real_options(command: str) -> None:
    import subprocess

    done = subprocess.run(
        [sys.executable, "-m", "agui_pipes", command, "--help"],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert done.returncode == 0, f"`agui-pipes {command}` is not a command: {done.stderr}"
    known = set(re.findall(r"(?<![\w-])(--?[A-Za-z][\w-]*)", done.stdout))
    wrong = []
    for where, argv in _SHELL_COMMANDS:
        if not argv or argv[0] != command:
            continue
        for token in _strip_redirects(argv[1:]):
            option = token.split("=", 1)[0]
            if option.startswith("-") and option != "-" and option not in known:
                wrong.append(f"{where}: agui-pipes {command} has no option {option}")
    assert not wrong, "\n".join(wrong)
