"""The shape ARCHITECTURE.md describes: layers whose imports only point down, no import cycle (imports inside
functions included; only ``if TYPE_CHECKING:`` imports are exempt), small modules, library code free of the CLI,
and no SQL block shipped that the library does not run."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from toolstore._sql import queries

PACKAGE = Path(__file__).resolve().parents[1] / "toolstore"
MAX_LINES = 400

#: Bottom to top. A module may import modules of its own layer or of lower layers.
LAYERS: list[set[str]] = [
    {"_errors", "_input", "_textfile", "_interrupts", "_models", "_progress"},
    {
        "_text",
        "_fusion",
        "_abstain",
        "_formats",
        "_packing",
        "_tokens",
        "_sql",
        "_metrics",
        "_examples",
        "_embedders",
        "_breaker",
        "_result",
        "_rows",
        "_names",
        "_observe",
        "_messages",
        "_split",
        "_uncut",
        "_catalog_cache",
        "_explain",
        "_explore",
        "_rerank",
        "_filters",
        "_request",
        "_closing",
        "_remedies",
        "_drive",
        "_retention",
        "_phrases",
        "_caller",
        "_outages",
        "_schemas",
    },
    {
        "_embedded",
        "_dsn",
        "_backends",
        "_deadline",
        "_lending",
        "_commits",
        "_encoding",
        "_setup",
        "_connect",
        "_replicas",
        "_revisions",
        "_migrate",
    },
    {
        "_indexes",
        "_vectors",
        "_stored_tools",
        "_bulk_load",
        "_catalog",
        "_housekeeping",
        "_catalog_row",
        "_route",
        "_routed",
        "_steps",
        "_reembed",
        "_access",
        "_sessions",
        "_session_reads",
        "_session_methods",
        "_catalog_methods",
        "_reads",
        "_anchors",
    },
    {"_store", "_async_store"},
    {
        "_lists",
        "_candidates",
        "_calibrate",
        "_tune",
        "_eval",
        "_expand",
        "_mcp_upstream",
        "_mcp_stderr",
        "_mcp_client",
        "_mcp_sync",
        "_agents",
        "_mcp_server",
        "_mcp_forward",
        "_mcp_args",
        "_mcp_sessions",
        "_mcp_stdin",
        "integrations",
    },
    {"__init__", "testing"},
    {"cli", "__main__"},
]
#: The one upward import: ``ToolStore.tune`` delegates to the tuner, which takes a store (annotations only).
DELEGATIONS = {("toolstore._store", "toolstore._tune")}


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _resolve(module: str, path: Path, node: ast.ImportFrom) -> list[str]:
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    if node.level:
        base = package.split(".")
        base = base[: len(base) - (node.level - 1)]
        target = ".".join([*base, node.module] if node.module else base)
    else:
        target = node.module or ""
    names = [f"{target}.{alias.name}" for alias in node.names]
    return [n for n in names if n in MODULES] or [target]


def imports(module: str) -> set[str]:
    """toolstore modules that ``module`` imports at run time, wherever the import statement is."""
    path = MODULES[module]
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _type_checking(node):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            found.update(_resolve(module, path, node))
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(path.read_text(encoding="utf-8")))
    return {_known(name) for name in found if name == "toolstore" or name.startswith("toolstore.")} - {module}


def _known(name: str) -> str:
    while name not in MODULES:
        name = name.rpartition(".")[0]
    return name


GRAPH = {m: imports(m) for m in MODULES}


def layer(module: str) -> int:
    top = "__init__" if module == "toolstore" else module.split(".")[1]
    for index, members in enumerate(LAYERS):
        if top in members:
            return index
    raise AssertionError(f"{module} is in no layer of tests/test_architecture.py: add it (and to ARCHITECTURE.md)")


def test_architecture_md_lists_the_layers_as_enforced_here() -> None:
    """ARCHITECTURE.md's table of layers names the same modules in each layer as :data:`LAYERS`, bottom to top, so
    a module added here (or moved) is documented in its place too."""
    text = (PACKAGE.parent / "ARCHITECTURE.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| (\d) [^|]+\| ([^|]+) \|", text, re.M)
    documented = [{name.rstrip("/") for name in re.findall(r"`([^`]+)`", modules)} for _, modules in rows]
    assert [int(n) for n, _ in rows] == list(range(len(LAYERS))), rows
    assert documented == LAYERS


def test_the_import_graph_sees_lazy_imports() -> None:
    """The scanner itself: a function-level import counts, a TYPE_CHECKING one does not."""
    assert "toolstore._store" not in GRAPH["toolstore._tune"]  # annotations only
    assert "toolstore._tune" in GRAPH["toolstore._store"]
    assert "toolstore._embedders.local" in GRAPH["toolstore._embedders.factory"]


def test_no_import_cycles() -> None:
    state: dict[str, int] = {}

    def visit(module: str, path: list[str]) -> None:
        state[module] = 1
        for target in sorted(GRAPH[module]):
            if state.get(target) == 1:
                cycle = path[path.index(target) :] + [target] if target in path else [module, target]
                raise AssertionError("import cycle: " + " -> ".join(cycle))
            if target not in state:
                visit(target, [*path, target])
        state[module] = 2

    for module in sorted(GRAPH):
        if module not in state:
            visit(module, [module])


@pytest.mark.parametrize("module", sorted(MODULES))
def test_imports_point_down(module: str) -> None:
    upward = [t for t in GRAPH[module] if layer(t) > layer(module) and (module, t) not in DELEGATIONS]
    assert not upward, f"{module} (layer {layer(module)}) imports higher layers: {upward}"


def test_library_never_imports_click_or_the_cli() -> None:
    for module, path in MODULES.items():
        if module.startswith("toolstore.cli") or module == "toolstore.__main__":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        names = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        names |= {n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
        assert "click" not in names, module
        assert "toolstore.cli" not in GRAPH[module], module


def test_the_toolstore_logger_is_named_in_one_place() -> None:
    """``_observe`` is the one home of the ``toolstore`` logger: every module that logs imports it (the CLI prints a
    record's logger name), none gets a named logger itself (by a string or by ``__name__``; the CLI configures the root
    logger, ``getLogger()``)."""
    named = []
    for module, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", "")) == "getLogger":
                if (node.args or node.keywords) and module != "toolstore._observe":
                    named.append(f"{module}:{node.lineno}: {ast.unparse(node)}")
    assert not named, named


def test_no_module_reads_a_stores_private_attributes() -> None:
    """What a feature module or AsyncToolStore needs of a ToolStore is a method of it (``note_tools_written``), not
    its private state (``store._written``, ``self._writer._written``)."""
    reads = []
    for module, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__"):
                owner = ast.unparse(node.value)
                if owner in {"store", "astore"} or owner.endswith("._writer"):
                    reads.append(f"{module}: {ast.unparse(node)}")
    assert not reads, reads


@pytest.mark.parametrize("module", sorted(MODULES))
def test_modules_are_small(module: str) -> None:
    lines = MODULES[module].read_text(encoding="utf-8").count("\n")
    assert lines <= MAX_LINES, f"{module} has {lines} lines (at most {MAX_LINES})"


def test_every_shipped_sql_block_is_run_by_the_library() -> None:
    """Blocks that only tests or benchmarks use live in tests/retrievers.sql, not in the package's sql/."""
    source = "\n".join(p.read_text(encoding="utf-8") for p in MODULES.values())
    unused = [name for name in queries() if f'"{name}"' not in source]
    assert not unused, f"sql/ blocks no toolstore module runs: {unused}"
