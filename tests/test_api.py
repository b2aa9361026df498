"""The public API: everything in __all__ exists, and nothing private leaks into it."""

from __future__ import annotations

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
