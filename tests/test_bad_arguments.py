"""Every public method and function given a wrong value for one argument at a time (None, numbers, bytes, empty and
blank strings, wrong containers): what it raises is toolstore's own error, never a bare TypeError, AttributeError or
driver error, and a wrong type is never said as an unknown tool or catalog (``resolve(None)`` said "UnknownToolError:
tool name must be a non-empty string")."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable
from typing import Any

import pytest

import toolstore
from toolstore import (
    AsyncToolStore,
    HashingEmbedder,
    InvalidInputError,
    InvalidTypeError,
    Tool,
    ToolStore,
    ToolstoreError,
    UnknownCatalogError,
    UnknownToolError,
)

BAD: list[Any] = [None, 0, -1, 1.5, True, 2**80, b"x", "", "   ", [], {}, ("x",), ["a", None], {"a": 1}, object()]
#: Methods not swept: they close or drop what the sweep uses, or take minutes (tune, reembed), or are not input checks.
SKIP = {"close", "connection", "route_checked", "note_tools_written", "drop_catalog", "tune", "reembed"}
TOOL = Tool(id="a.send", name="send", description="Send a message", provider="a")
#: The valid arguments each method is called with, but for the one replaced by a bad value.
VALID: dict[str, dict[str, Any]] = {
    "get": {"tool_id": "a.send"},
    "resolve": {"name": "send"},
    "grant": {"role": "no_such_role_x"},
    "revoke": {"role": "no_such_role_x"},
    "has_session": {"session": "s"},
    "new_calls": {"session": "s", "call_ids": ["c"]},
    "record_calls": {"session": "s", "calls": ["a.send"]},
    "record_new_calls": {"session": "s", "call_ids": ["c"], "calls": ["a.send"]},
    "session_log": {"session": "s"},
    "remove": {"tool_id": "zz"},
    "remove_anchors": {"ids": [1]},
    "add_anchors": {"anchors": []},
    "replace_anchors": {"anchors": []},
    "add_examples": {"examples": []},
    "upsert": {"tools": []},
    "import_sessions": {"sessions": {}},
    "set_fusion": {"weights": {"name": 1.0}},
    "set_abstain": {"model": None},
    "resolve_calls": {"names": ["send"]},
    "route": {"query": "send a message"},
    "export_catalog": {"tools": [TOOL], "fmt": "openai"},
    "render": {"tools": [TOOL], "fmt": "openai"},
    "to_anthropic": {"tool": TOOL},
    "to_mcp": {"tool": TOOL},
    "to_openai": {"tool": TOOL},
    "parse_tools": {"data": [{"type": "function", "function": {"name": "x", "parameters": {"type": "object"}}}]},
    "read_messages": {"messages": [{"role": "user", "content": "hi"}]},
    "load_examples": {"path": "/dev/null"},
    "load_judgements": {"path": "/dev/null"},
    "load_sessions": {"path": "/dev/null"},
    "load_tools_file": {"path": "/dev/null"},
}


def calls(owner: Any, names: list[str]) -> list[tuple[str, str, Any]]:
    """(method, parameter, bad value) for every parameter of ``owner``'s ``names`` and every value of BAD."""
    out = []
    for name in names:
        for param in inspect.signature(getattr(owner, name)).parameters:
            out += [(name, param, bad) for bad in BAD if param != "self"]
    return out


def methods(cls: type) -> list[str]:
    return [n for n in sorted(dir(cls)) if not n.startswith("_") and n not in SKIP and callable(getattr(cls, n))]


def problem(name: str, param: str, bad: Any, call: Callable[[], Any]) -> str | None:
    """What is wrong with ``call``'s answer to ``bad``, or None: an error not toolstore's, or one that says a value
    of the wrong type names an unknown tool or catalog."""
    try:
        call()
    except (UnknownToolError, UnknownCatalogError) as exc:
        if not isinstance(bad, (str, tuple, list, dict)):  # ("x",): a tool id "x", unknown
            return f"{name}({param}={bad!r:.30}): {type(exc).__name__}: {exc}"
    except ToolstoreError:
        pass
    except Exception as exc:  # the leak looked for
        return f"{name}({param}={bad!r:.30}): {type(exc).__name__}: {exc}"
    return None


def test_the_store_methods_raise_toolstores_errors(store: ToolStore) -> None:
    store.upsert([TOOL])
    found = [
        problem(n, p, bad, lambda n=n, p=p, bad=bad: getattr(store, n)(**{**VALID.get(n, {}), p: bad}))
        for n, p, bad in calls(ToolStore, methods(ToolStore))
    ]
    assert [f for f in found if f] == []


def test_the_async_store_methods_raise_toolstores_errors(dsn: str) -> None:
    async def answer(store: AsyncToolStore, name: str, kwargs: dict[str, Any]) -> None:
        result = getattr(store, name)(**kwargs)
        if inspect.isawaitable(result):
            await result

    async def sweep() -> list[str]:
        async with AsyncToolStore(dsn, embedder=HashingEmbedder(64), catalog="test") as store:
            await store.upsert([TOOL])
            found = []
            for n, p, bad in calls(AsyncToolStore, methods(AsyncToolStore)):
                try:
                    await answer(store, n, {**VALID.get(n, {}), p: bad})
                except (UnknownToolError, UnknownCatalogError) as exc:
                    if not isinstance(bad, (str, tuple, list, dict)):
                        found.append(f"{n}({p}={bad!r:.30}): {type(exc).__name__}: {exc}")
                except ToolstoreError:
                    pass
                except Exception as exc:  # the leak looked for
                    found.append(f"{n}({p}={bad!r:.30}): {type(exc).__name__}: {exc}")
            return found

    assert asyncio.run(sweep()) == []


def test_the_exported_functions_raise_toolstores_errors() -> None:
    names = [n for n in toolstore.__all__ if inspect.isfunction(getattr(toolstore, n)) and n != "migrate"]
    found = [
        problem(n, p, bad, lambda n=n, p=p, bad=bad: getattr(toolstore, n)(**{**VALID.get(n, {}), p: bad}))
        for n, p, bad in calls(toolstore, names)
    ]
    assert [f for f in found if f] == []


@pytest.mark.parametrize(
    "call, error, said",
    [
        (lambda s: s.resolve(None), InvalidTypeError, "tool name must be a string, got NoneType"),
        (lambda s: s.resolve(5), InvalidTypeError, "tool name must be a string, got int"),
        (lambda s: s.resolve("  "), InvalidInputError, "tool name is empty"),
        (lambda s: s.get(None), InvalidTypeError, "tool id must be a string, got NoneType"),
        (lambda s: s.remove(b"a.send"), InvalidTypeError, "tool id must be a string, got bytes"),
        (lambda s: s.info(counts="no"), InvalidTypeError, "counts must be True or False"),
        (lambda s: s.set_fusion(weights={"name": 1.0}, k_rrf="5"), InvalidInputError, "k_rrf must be a finite"),
        (lambda s: s.set_fusion(weights={"name": 1.0}, k_rrf=None), InvalidInputError, "k_rrf must be a finite"),
        (lambda s: s.resolve_calls(["send"], namespaces=None), InvalidTypeError, "expected a list of call namespaces"),
    ],
)
def test_a_wrong_type_is_a_type_error_naming_it(
    store: ToolStore, call: Callable[[ToolStore], Any], error: type[Exception], said: str
) -> None:
    with pytest.raises(error, match=said):
        call(store)


@pytest.mark.parametrize(
    "call, said",
    [
        (lambda: toolstore.to_openai(None), "tool must be a Tool, got NoneType"),  # type: ignore[arg-type]
        (lambda: toolstore.to_anthropic({"name": "x"}), "tool must be a Tool, got dict"),  # type: ignore[arg-type]
        (lambda: toolstore.to_mcp("a.send"), "tool must be a Tool, got str"),  # type: ignore[arg-type]
        (lambda: toolstore.render(None, "openai"), "tools must be a list of Tools, got None"),  # type: ignore[arg-type]
        (lambda: toolstore.render([TOOL, "x"], "mcp"), r"tools\[1\] must be a Tool, got str"),  # type: ignore[list-item]
        (lambda: toolstore.render([TOOL], "mcp", names=3), "names must be a list"),  # type: ignore[arg-type]
        (lambda: toolstore.export_catalog(TOOL, "openai"), "not a single Tool"),  # type: ignore[arg-type]
        (lambda: toolstore.to_openai(TOOL, with_metadata="no"), "with_metadata must be True or False"),  # type: ignore[arg-type]
    ],
)
def test_rendering_a_non_tool_is_a_type_error(call: Callable[[], Any], said: str) -> None:
    with pytest.raises(InvalidTypeError, match=said):
        call()
