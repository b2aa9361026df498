"""Every package the library imports as it is imported itself is one of its declared requirements: one that came only
through another requirement (anyio, through openai) goes when that one stops needing it, and its lowest version was
never chosen or tested (scripts/test-lowest installs the lowest of the declared ones)."""

from __future__ import annotations

import ast
import re
import sys
from importlib.metadata import packages_distributions
from pathlib import Path

try:
    import tomllib
except ImportError:  # Python 3.10: pytest's own TOML reader
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _module_level_imports(path: Path) -> set[str]:
    """The top-level names of what ``path`` imports when it is imported: not in a function, nor under ``if
    TYPE_CHECKING:``, nor in a ``try`` (an optional package's import, its ImportError handled)."""
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Try)):
            return
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            return
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module.split(".")[0])
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(path.read_text(encoding="utf-8")))
    return found


def test_every_package_the_library_imports_when_imported_is_a_declared_requirement() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    declared = {
        _normal(re.split(r"[\s\[<>=!~;]", requirement, maxsplit=1)[0]) for requirement in project["dependencies"]
    }
    distributions = packages_distributions()
    imported: dict[str, set[str]] = {}
    for path in sorted((ROOT / "toolstore").rglob("*.py")):
        for name in _module_level_imports(path) - set(sys.stdlib_module_names) - {"toolstore"}:
            imported.setdefault(name, set()).add(str(path.relative_to(ROOT)))
    assert imported, "no third-party import found: the walk is broken"
    undeclared = {
        name: sorted(paths)
        for name, paths in imported.items()
        if not {_normal(d) for d in distributions.get(name, [name])} & declared
    }
    assert undeclared == {}, f"imported by the library but not in pyproject.toml's dependencies: {undeclared}"
