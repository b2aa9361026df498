"""The catalog reads of ``ToolStore`` and ``AsyncToolStore``, written once: info(), catalogs(), tools(), get(),
resolve() and anchors() are step generators (``_steps``: each yields the rows of named SQL blocks, :class:`Fetch`, and
does no I/O) that ToolStore drives on its connection (``drive``, ``fetch_rows``) and AsyncToolStore on its async one
(``adrive``, ``afetch_rows``), as they drive route(). Each is one read through the store's ``_read``: on its read
replicas in turn, then the primary. A read by tool id asks a replica for all of them (``_rows.all_found``:
UnknownToolError, which hands the read on) and the primary for what it has. :class:`ReadMethods` and
:class:`AsyncReadMethods` are the two stores' methods (mixins, side by side)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from functools import partial
from typing import Any, TypeVar

import psycopg

from ._anchors import anchor_from_row
from ._catalog_row import catalog_row_steps
from ._drive import adrive, drive
from ._errors import InvalidInputError, InvalidTypeError
from ._input import check_tool_id, flag
from ._models import Anchor, CatalogInfo, Tool
from ._names import resolve_among, resolve_name
from ._rows import LIST_THEM, all_found, check_ids, name_row, tool_from_row, unknown_catalog
from ._steps import Fetch, Steps, afetch_rows, fetch_rows

T = TypeVar("T")


def catalog_steps(catalog: str, *, counts: bool = False, hint: str = LIST_THEM) -> Steps[CatalogInfo]:
    """The catalog's row (with tool and example counts when ``counts``); UnknownCatalogError when there is none,
    with ``hint``."""
    info = yield from catalog_row_steps(catalog, counts=counts)
    if info is None:
        raise unknown_catalog(catalog, hint)
    return info


def catalogs_steps() -> Steps[list[dict[str, Any]]]:
    """Every catalog in the database with its model and counts."""
    rows: list[dict[str, Any]] = yield Fetch("list_catalogs", {})
    return rows


def tools_steps(catalog: str, ids: Sequence[str] | None, *, complete: bool) -> Steps[list[Tool]]:
    """The catalog's tools (those with ``ids`` when given), ordered by id; ``complete``: UnknownToolError for any id
    the catalog lacks (a replica hands the read on)."""
    info = yield from catalog_steps(catalog)
    found = yield from _tools(info, ids)
    return all_found(found, ids, catalog) if complete and ids is not None else found


def _tools(info: CatalogInfo, ids: Sequence[str] | None) -> Steps[list[Tool]]:
    if ids is None:
        rows = yield Fetch("list_tools", {"catalog": info.id})
    else:
        rows = yield Fetch("get_tools", {"catalog": info.id, "ids": check_ids(ids)})
    return [tool_from_row(r) for r in rows]


def called_name(name: object) -> str:
    """``resolve()``'s name: a string (InvalidTypeError for None, a number, bytes...), not blank (InvalidInputError);
    one that names no tool is the read's UnknownToolError."""
    if not isinstance(name, str):
        raise InvalidTypeError(f"tool name must be a string, got {type(name).__name__}")
    if not name.strip():
        raise InvalidInputError("tool name is empty")
    return name


def name_steps(catalog: str, name: str, among: Sequence[str] | None) -> Steps[Tool]:
    """The tool a model called by ``name`` (:meth:`ReadMethods.resolve`; ``name`` checked by :func:`called_name`)."""
    info = yield from catalog_steps(catalog)
    if among is not None:
        ids = check_ids(among)
        return resolve_among(name, (yield from _tools(info, ids)), ids)
    rows = yield Fetch("tool_names", {"catalog": info.id})
    found = resolve_name(name, [name_row(r) for r in rows], offered=False)
    return (yield from _tools(info, [found.id]))[0]


def anchors_steps(catalog: str) -> Steps[list[Anchor]]:
    """The catalog's anchors, oldest first."""
    info = yield from catalog_steps(catalog)
    rows = yield Fetch("list_anchors", {"catalog": info.id, "ids": None})
    return [anchor_from_row(r) for r in rows]


class ReadMethods:
    """The reads of ``ToolStore`` (a mixin: the store supplies ``catalog`` and ``_read(work, primary)``)."""

    catalog: str
    _read: Callable[..., Any]

    def _info(self, conn: psycopg.Connection[Any], *, counts: bool = False, hint: str = LIST_THEM) -> CatalogInfo:
        return drive(catalog_steps(self.catalog, counts=counts, hint=hint), partial(fetch_rows, conn))

    def _reading(self, steps: Callable[[], Steps[T]]) -> Callable[[psycopg.Connection[Any]], T]:
        """A read's work on a connection: ``steps()`` driven there (made afresh for each connection asked)."""
        return lambda conn: drive(steps(), partial(fetch_rows, conn))

    def info(self, *, counts: bool = True) -> CatalogInfo:
        """This catalog's id, model, dimension, settings and (unless ``counts=False``) tool and example counts."""
        info: CatalogInfo = self._read(
            self._reading(partial(catalog_steps, self.catalog, counts=flag(counts, "counts")))
        )
        return info

    def catalogs(self) -> list[dict[str, Any]]:
        """Every catalog in the database with its model and counts, ``created_at`` and ``updated_at``: the last change
        of its row, its model or settings (reembed, tune, fusion, retention), not of its tools."""
        found: list[dict[str, Any]] = self._read(self._reading(catalogs_steps))
        return found

    def tools(self, ids: Sequence[str] | None = None) -> list[Tool]:
        """All tools of the catalog (or those with the given ids), ordered by id."""
        listing = partial(tools_steps, self.catalog, ids)
        found: list[Tool] = self._read(
            self._reading(partial(listing, complete=True)), self._reading(partial(listing, complete=False))
        )
        return found

    def get(self, tool_id: str) -> Tool:
        """One tool by id; UnknownToolError when the catalog has no such tool."""
        found: list[Tool] = self._read(
            self._reading(partial(tools_steps, self.catalog, [check_tool_id(tool_id)], complete=True))
        )
        return found[0]

    def resolve(self, name: str, *, among: Sequence[str] | None = None) -> Tool:
        """The tool a model called by ``name`` in any turn: a name ``RouteResult.definitions`` gave (``provider__name``
        when namespaced), the tool's id or its own name. ``among``: the ids of the tools the model was offered, in
        the order offered (``result.ids``), which makes any offered name exact. UnknownToolError when no tool (or
        more than one) matches."""
        tool: Tool = self._read(self._reading(partial(name_steps, self.catalog, called_name(name), among)))
        return tool

    def anchors(self) -> list[Anchor]:
        """The catalog's anchors, oldest first."""
        found: list[Anchor] = self._read(self._reading(partial(anchors_steps, self.catalog)))
        return found


class AsyncReadMethods:
    """The reads of ``AsyncToolStore`` (a mixin: the store supplies ``catalog`` and an async ``_read``); each as
    :class:`ReadMethods`' on the async pool."""

    catalog: str
    _read: Callable[..., Awaitable[Any]]

    async def _info(
        self, conn: psycopg.AsyncConnection[Any], *, counts: bool = False, hint: str = LIST_THEM
    ) -> CatalogInfo:
        return await adrive(catalog_steps(self.catalog, counts=counts, hint=hint), partial(afetch_rows, conn))

    def _reading(self, steps: Callable[[], Steps[T]]) -> Callable[[psycopg.AsyncConnection[Any]], Awaitable[T]]:
        """See :meth:`ReadMethods._reading`."""
        return lambda conn: adrive(steps(), partial(afetch_rows, conn))

    async def info(self, *, counts: bool = True) -> CatalogInfo:
        info: CatalogInfo = await self._read(
            self._reading(partial(catalog_steps, self.catalog, counts=flag(counts, "counts")))
        )
        return info

    async def catalogs(self) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = await self._read(self._reading(catalogs_steps))
        return found

    async def tools(self, ids: Sequence[str] | None = None) -> list[Tool]:
        listing = partial(tools_steps, self.catalog, ids)
        found: list[Tool] = await self._read(
            self._reading(partial(listing, complete=True)), self._reading(partial(listing, complete=False))
        )
        return found

    async def get(self, tool_id: str) -> Tool:
        found = await self._read(
            self._reading(partial(tools_steps, self.catalog, [check_tool_id(tool_id)], complete=True))
        )
        tool: Tool = found[0]
        return tool

    async def resolve(self, name: str, *, among: Sequence[str] | None = None) -> Tool:
        """See :meth:`ToolStore.resolve`."""
        tool: Tool = await self._read(self._reading(partial(name_steps, self.catalog, called_name(name), among)))
        return tool

    async def anchors(self) -> list[Anchor]:
        """See :meth:`ToolStore.anchors` (read on the replicas in turn, as ToolStore's)."""
        found: list[Anchor] = await self._read(self._reading(partial(anchors_steps, self.catalog)))
        return found
