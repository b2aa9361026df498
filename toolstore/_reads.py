"""The catalog reads of ``ToolStore`` and ``AsyncToolStore`` (mixins, side by side so the two stay alike): info(),
catalogs(), tools(), get() and resolve(). Each is one read through the store's ``_read``: on its read replicas in turn,
then the primary. A read by tool id asks a replica for all of them (``_rows.all_found``: UnknownToolError, which hands
the read on) and the primary for what it has."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

import psycopg
from psycopg.rows import dict_row

from . import _catalog, _sql
from ._models import CatalogInfo, Tool
from ._names import resolve_among, resolve_name
from ._rows import all_found, check_ids, info_from_row, name_row, tool_from_row, unknown_catalog

T = TypeVar("T")
Work = Callable[[psycopg.Connection[Any]], T]
AsyncWork = Callable[[psycopg.AsyncConnection[Any]], Awaitable[T]]


class ReadMethods:
    """The reads of ``ToolStore`` (a mixin: the store supplies ``catalog`` and ``_read(work, primary)``)."""

    catalog: str
    _read: Callable[..., Any]

    def info(self, *, counts: bool = True) -> CatalogInfo:
        """This catalog's id, model, dimension, settings and (unless ``counts=False``) tool and example counts."""
        info: CatalogInfo = self._read(lambda conn: self._info(conn, counts=counts))
        return info

    def _info(self, conn: psycopg.Connection[Any], *, counts: bool = False) -> CatalogInfo:
        info = _catalog.catalog_info(conn, self.catalog, counts=counts)
        if info is None:
            raise unknown_catalog(self.catalog)
        return info

    def catalogs(self) -> list[dict[str, Any]]:
        """Every catalog in the database with its model and counts."""

        def work(conn: psycopg.Connection[Any]) -> list[dict[str, Any]]:
            with conn.cursor(row_factory=dict_row) as cur:
                return cur.execute(_sql.query("list_catalogs")).fetchall()

        found: list[dict[str, Any]] = self._read(work)
        return found

    def tools(self, ids: Sequence[str] | None = None) -> list[Tool]:
        """All tools of the catalog (or those with the given ids), ordered by id."""
        found: list[Tool] = self._read(self._listing(ids, complete=True), self._listing(ids, complete=False))
        return found

    def get(self, tool_id: str) -> Tool:
        """One tool by id; UnknownToolError when the catalog has no such tool."""
        found: list[Tool] = self._read(self._listing([tool_id], complete=True))
        return found[0]

    def _listing(self, ids: Sequence[str] | None, *, complete: bool) -> Work[list[Tool]]:
        """The tools with ``ids``; ``complete``: UnknownToolError for any the catalog lacks (a replica hands on)."""

        def work(conn: psycopg.Connection[Any]) -> list[Tool]:
            found = _catalog.list_tools(conn, self._info(conn), ids)
            return all_found(found, ids, self.catalog) if complete and ids is not None else found

        return work

    def resolve(self, name: str, *, among: Sequence[str] | None = None) -> Tool:
        """The tool a model called by ``name`` in any turn: a name ``RouteResult.definitions`` gave (``provider__name``
        when namespaced), the tool's id or its own name. ``among``: the ids of the tools the model was offered, in
        the order offered (``result.ids``), which makes any offered name exact. UnknownToolError when no tool (or
        more than one) matches."""

        def work(conn: psycopg.Connection[Any]) -> Tool:
            info = self._info(conn)
            if among is not None:
                ids = check_ids(among)
                return resolve_among(name, _catalog.list_tools(conn, info, ids), ids)
            with conn.cursor(row_factory=dict_row) as cur:
                rows = cur.execute(_sql.query("tool_names"), {"catalog": info.id}).fetchall()
            found = resolve_name(name, [name_row(r) for r in rows], offered=False)
            return _catalog.list_tools(conn, info, [found.id])[0]

        tool: Tool = self._read(work)
        return tool


class AsyncReadMethods:
    """The reads of ``AsyncToolStore`` (a mixin: the store supplies ``catalog`` and an async ``_read``); each as
    :class:`ReadMethods`' on the async pool."""

    catalog: str
    _read: Callable[..., Awaitable[Any]]

    async def info(self, *, counts: bool = True) -> CatalogInfo:
        info: CatalogInfo = await self._read(lambda conn: self._info(conn, counts=counts))
        return info

    async def _info(self, conn: psycopg.AsyncConnection[Any], *, counts: bool = False) -> CatalogInfo:
        async with conn.cursor(row_factory=dict_row) as cur:
            await cur.execute(_sql.query("get_catalog" if counts else "get_catalog_light"), {"name": self.catalog})
            row = await cur.fetchone()
        if row is None:
            raise unknown_catalog(self.catalog)
        return info_from_row(row)

    async def catalogs(self) -> list[dict[str, Any]]:
        async def work(conn: psycopg.AsyncConnection[Any]) -> list[dict[str, Any]]:
            async with conn.cursor(row_factory=dict_row) as cur:
                await cur.execute(_sql.query("list_catalogs"))
                return await cur.fetchall()

        found: list[dict[str, Any]] = await self._read(work)
        return found

    async def tools(self, ids: Sequence[str] | None = None) -> list[Tool]:
        found: list[Tool] = await self._read(self._listing(ids, complete=True), self._listing(ids, complete=False))
        return found

    async def get(self, tool_id: str) -> Tool:
        found: list[Tool] = await self._read(self._listing([tool_id], complete=True))
        return found[0]

    def _listing(self, ids: Sequence[str] | None, *, complete: bool) -> AsyncWork[list[Tool]]:
        """See :meth:`ReadMethods._listing`."""

        async def work(conn: psycopg.AsyncConnection[Any]) -> list[Tool]:
            found = await self._tools(conn, await self._info(conn), ids)
            return all_found(found, ids, self.catalog) if complete and ids is not None else found

        return work

    async def _tools(
        self, conn: psycopg.AsyncConnection[Any], info: CatalogInfo, ids: Sequence[str] | None
    ) -> list[Tool]:
        """:func:`_catalog.list_tools` on an async connection."""
        async with conn.cursor(row_factory=dict_row) as cur:
            if ids is None:
                await cur.execute(_sql.query("list_tools"), {"catalog": info.id})
            else:
                await cur.execute(_sql.query("get_tools"), {"catalog": info.id, "ids": check_ids(ids)})
            return [tool_from_row(r) for r in await cur.fetchall()]

    async def resolve(self, name: str, *, among: Sequence[str] | None = None) -> Tool:
        """See :meth:`ToolStore.resolve`."""

        async def work(conn: psycopg.AsyncConnection[Any]) -> Tool:
            info = await self._info(conn)
            if among is not None:
                ids = check_ids(among)
                return resolve_among(name, await self._tools(conn, info, ids), ids)
            async with conn.cursor(row_factory=dict_row) as cur:
                await cur.execute(_sql.query("tool_names"), {"catalog": info.id})
                found = resolve_name(name, [name_row(r) for r in await cur.fetchall()], offered=False)
            return (await self._tools(conn, info, [found.id]))[0]

        tool: Tool = await self._read(work)
        return tool
