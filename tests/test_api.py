"""The public API: everything in __all__ exists, and nothing private leaks into it."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import toolstore


def test_all_is_complete_and_importable() -> None:
    assert sorted(toolstore.__all__) == sorted(set(toolstore.__all__))
    for name in toolstore.__all__:
        assert getattr(toolstore, name) is not None
        assert not name.startswith("_")
    public = {n for n in dir(toolstore) if not n.startswith("_") and n not in {"annotations"}}
    modules = {n for n in public if type(getattr(toolstore, n)).__name__ == "module"}
    assert public - modules == set(toolstore.__all__)


def test_errors_share_one_base() -> None:
    errors = [getattr(toolstore, n) for n in toolstore.__all__ if n.endswith("Error")]
    assert len(errors) >= 6
    assert all(issubclass(e, toolstore.ToolstoreError) for e in errors)


def test_public_names_say_they_come_from_toolstore() -> None:
    for name in toolstore.__all__:
        obj = getattr(toolstore, name)
        if callable(obj):
            assert obj.__module__ == "toolstore", name


def test_annotations_of_public_classes_resolve() -> None:
    """``__module__`` is rewritten, so ``get_type_hints`` must not need the private module's namespace."""
    import typing

    for name in toolstore.__all__:
        obj = getattr(toolstore, name)
        if isinstance(obj, type) and dataclasses.is_dataclass(obj):
            assert typing.get_type_hints(obj), name
    hints = typing.get_type_hints(toolstore.RouteResult)
    assert hints["tools"] == list[toolstore.RoutedTool]


def test_every_error_lives_in_errors_and_is_exported() -> None:
    package = Path(toolstore.__file__).parent
    defined: dict[str, str] = {}
    for path in package.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef) and any(ast.unparse(b).endswith("Error") for b in node.bases):
                defined[node.name] = path.name
    assert len(defined) >= 9
    for name, where in defined.items():
        assert where == "_errors.py", f"{name} is defined in {where}, not in _errors.py"
        assert issubclass(getattr(toolstore, name), toolstore.ToolstoreError), f"{name} is not exported"


def test_signals_match_the_signal_names() -> None:
    assert tuple(f.name for f in dataclasses.fields(toolstore.Signals)) == toolstore.SIGNALS


def test_py_typed_is_shipped() -> None:
    assert (Path(toolstore.__file__).parent / "py.typed").is_file()


def test_the_routing_hook_takes_a_public_type_whose_fields_are_said() -> None:
    """``route_checked(call)`` is the documented hook for a subclass that wraps routing: the type of ``call`` is
    exported (it was private, in ``_route``), and its docstring says each field."""
    import typing

    for store in (toolstore.ToolStore, toolstore.AsyncToolStore):
        assert typing.get_type_hints(store.route_checked)["call"] is toolstore.RouteCall, store
    doc = toolstore.RouteCall.__doc__ or ""
    for field in dataclasses.fields(toolstore.RouteCall):
        assert f"``{field.name}``" in doc, field.name


def test_the_integrations_export_what_they_say_from_public_modules() -> None:
    """Each adapter module's ``__all__`` names what it has, and those names say they come from a public module, as
    toolstore's own do: ``route_messages`` and ``aroute_messages`` (shared by ``.openai`` and ``.anthropic``) said
    ``toolstore._agents``, a private module, in reprs, tracebacks and ``help()``."""
    import importlib

    for name in ("openai", "anthropic", "langgraph"):
        module = importlib.import_module(f"toolstore.integrations.{name}")
        assert sorted(module.__all__) == sorted(set(module.__all__)), name
        for exported in module.__all__:
            obj = getattr(module, exported)
            if callable(obj):
                private = [part for part in obj.__module__.split(".") if part.startswith("_")]
                assert not private, (name, exported, obj.__module__)


def test_route_takes_check_routes_parameters_written_once() -> None:
    """route()'s parameters are written once, in ``check_route`` (they were spelt out three times: both stores and
    check_route); each store's route says them at run time (help(), inspect.signature) after ``self``, keeps its own
    docstring, and names a misspelt option as Python would, with the option meant."""
    import asyncio
    import inspect

    import pytest

    from toolstore._route import check_route

    options = list(inspect.signature(check_route).parameters.values())
    assert options[0].name == "query" and options[0].default is None
    for store in (toolstore.ToolStore, toolstore.AsyncToolStore):
        signature = inspect.signature(store.route)
        assert list(signature.parameters)[:1] == ["self"]
        assert list(signature.parameters.values())[1:] == options, store
        assert signature.return_annotation == "RouteResult" and store.route.__doc__, store
        misspelt = store.route(object(), "x", token_buget=3) if store is toolstore.AsyncToolStore else None
        with pytest.raises(TypeError, match=r"^route\(\) got an unexpected keyword argument 'token_buget' \(did you"):
            asyncio.run(misspelt) if misspelt is not None else store.route(object(), "x", token_buget=3)
    assert asyncio.iscoroutinefunction(toolstore.AsyncToolStore.route)


def test_type_checkers_read_routes_parameters(tmp_path: Path) -> None:
    """An IDE or type checker sees route()'s parameters (``_route.route_method``'s ParamSpec): mypy names a
    misspelt option and a wrong type on either store, and the result types."""
    import shutil
    import subprocess
    import sys

    import pytest

    if shutil.which("mypy", path=str(Path(sys.executable).parent)) is None:
        pytest.skip("mypy is not installed beside this Python (bash scripts/setup-venv test installs it)")
    snippet = tmp_path / "uses_route.py"
    snippet.write_text(
        "from toolstore import AsyncToolStore, ToolStore\n"
        "def use(store: ToolStore) -> None:\n"
        "    reveal_type(store.route(messages=[], k=3))\n"
        '    store.route("x", token_buget=3)\n'
        "async def ause(store: AsyncToolStore) -> None:\n"
        "    reveal_type(await store.route())\n"
        '    await store.route("x", k="3")\n'
    )
    top = Path(toolstore.__file__).parents[1]  # the checkout: its mypy settings, and the cache scripts/test filled
    found = subprocess.run([sys.executable, "-m", "mypy", str(snippet)], capture_output=True, text=True, cwd=top).stdout
    assert 'uses_route.py:3: note: Revealed type is "toolstore._result.RouteResult"' in found, found
    assert 'uses_route.py:4: error: Unexpected keyword argument "token_buget" for "route" of "ToolStore"' in found
    assert 'uses_route.py:6: note: Revealed type is "toolstore._result.RouteResult"' in found, found
    assert 'uses_route.py:7: error: Argument "k" to "route" of "AsyncToolStore" has incompatible type "str"' in found
