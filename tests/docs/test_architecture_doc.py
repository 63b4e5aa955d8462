"""docs/architecture.md stays a complete map of the package.

Every module file and every package under ``agui_pipes/`` must have an entry in
the page's module map, and every path the page names must exist: a module added
without a paragraph, or a paragraph left behind by a rename, fails here.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "architecture.md"
PACKAGE = ROOT / "agui_pipes"

_ENTRY = re.compile(r"^#### `(agui_pipes/(?:[\w/]*(?:\.py|/))?)`", re.MULTILINE)
_MENTION = re.compile(r"`(agui_pipes/[\w/]+(?:\.py|/))`")


def _modules() -> set[str]:
    found: set[str] = set()
    for path in PACKAGE.rglob("*.py"):
        if "__pycache__" in path.parts:
            continue
        relative = path.relative_to(ROOT).as_posix()
        if path.name == "__init__.py":
            found.add(relative[: -len("__init__.py")])
        else:
            found.add(relative)
    return found


def _entries() -> list[str]:
    return _ENTRY.findall(PAGE.read_text(encoding="utf-8"))


def test_every_module_has_an_entry() -> None:
    missing = sorted(_modules() - set(_entries()))
    assert not missing, (
        "docs/architecture.md has no entry for these modules; add a '#### `path`' heading "
        "with a paragraph on the module's one job under 'Module map': " + ", ".join(missing)
    )


def test_no_module_has_two_entries() -> None:
    entries = _entries()
    repeated = sorted({entry for entry in entries if entries.count(entry) > 1})
    assert not repeated, f"docs/architecture.md describes these modules twice: {repeated}"


def test_every_named_path_exists() -> None:
    text = PAGE.read_text(encoding="utf-8")
    stale = sorted({path for path in _MENTION.findall(text) if not (ROOT / path).exists()})
    assert not stale, (
        "docs/architecture.md names paths that do not exist (renamed or removed?): "
        + ", ".join(stale)
    )


def test_entries_have_a_paragraph() -> None:
    text = PAGE.read_text(encoding="utf-8")
    sections = re.split(r"^#### ", text, flags=re.MULTILINE)[1:]
    thin = [
        section.splitlines()[0]
        for section in sections
        if len(" ".join(section.splitlines()[1:]).split()) < 8
    ]
    assert not thin, f"these entries of docs/architecture.md lack a paragraph: {thin}"
