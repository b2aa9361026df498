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
