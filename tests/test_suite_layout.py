"""The suite's own layout: what tests share lives in ``_``-modules and conftest files, never in another test module.

Importing from a test module runs its module-level code and re-registers its fixtures in the importer,
and the helper's home then depends on which test happened to write it first.
"""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parent


def _imported_modules(path: Path) -> set[str]:
    """Every module *path* imports from, at any depth of the file (a function's local import too), relative ones resolved."""
    package = ".".join(path.relative_to(TESTS.parent).parent.parts)
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            base = package.rsplit(".", node.level - 1)[0] if node.level else ""
            found.add(".".join(part for part in (base, node.module or "") if part))
            found.update(f"{base}.{alias.name}" if node.level and not node.module else "" for alias in node.names)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found - {""}


def test_no_test_module_imports_another() -> None:
    """Helpers come from ``tests/**/_*.py`` and fixtures from conftest files; a test module is never imported."""
    offenders = {
        f"{path.relative_to(TESTS.parent)} imports {module}"
        for path in TESTS.rglob("*.py")
        for module in _imported_modules(path)
        if module.startswith("tests.") and module.rsplit(".", 1)[-1].startswith("test_")
    }
    assert not offenders, sorted(offenders)


def test_no_hypothesis_example_is_failed_for_its_time() -> None:
    """The suite's profile has no deadline, so a property without settings of its own cannot fail on a loaded machine."""
    import hypothesis

    assert hypothesis.settings().deadline is None


#: Words that name when or how a defect was found rather than what a module tests.
_WHEN_FOUND = {"found", "regression", "regressions", "bug", "bugs", "issue", "issues", "fix", "fixes", "misc", "more", "new", "extra"}


def test_each_test_module_is_named_after_what_it_tests() -> None:
    """No test module is named by when a defect was found (``test_found2.py``): a word of that sort, or a number at its end."""
    offenders = sorted(
        str(path.relative_to(TESTS.parent))
        for path in TESTS.rglob("test_*.py")
        if _WHEN_FOUND & set(path.stem.split("_")[1:]) or path.stem[-1].isdigit()
    )
    assert not offenders, offenders
