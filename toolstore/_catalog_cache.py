"""The catalog row route() works with, kept between calls, and when a try must read it again (no I/O)."""

from __future__ import annotations

from collections.abc import Iterator

from ._errors import DatabaseError, ModelMismatchError
from ._models import CatalogInfo

#: SQLSTATE that ``route_catalog()`` (migration 0007) raises when the catalog changed since its row was read.
STALE_CATALOG = "TS001"
#: Tries of one route() whose cached catalog row keeps going stale (each retry re-reads the row first).
ROUTE_ATTEMPTS = 3


def catalog_changed(exc: BaseException) -> bool:
    """True when the route statement refused to run because the catalog changed (or went away) since its row was
    read: re-read the row and route again."""
    return getattr(exc, "sqlstate", None) == STALE_CATALOG


class CatalogCache:
    """The catalog row a store routes with, kept between route() calls; no I/O. A driver runs the tries
    :meth:`attempts` yields (each says whether to read the row first, then :meth:`keep` it); when a try fails it goes
    on only if :meth:`retry` says so, and raises :meth:`exhausted` when no try is left. The route statement checks
    the row's version first, so a stale row never routes: the next try reads the row again."""

    def __init__(self) -> None:
        self.info: CatalogInfo | None = None

    def attempts(self) -> Iterator[bool]:
        """Per try, whether the catalog's row must be read first: the first try only when none is cached."""
        yield self.info is None
        yield from (True,) * (ROUTE_ATTEMPTS - 1)

    @property
    def cached(self) -> CatalogInfo:
        """The cached row (only when :meth:`attempts` said no read was needed)."""
        assert self.info is not None
        return self.info

    def keep(self, info: CatalogInfo) -> CatalogInfo:
        self.info = info
        return info

    @staticmethod
    def retry(exc: BaseException, *, read: bool) -> bool:
        """Whether a try that raised ``exc`` is worth another with the row read again: the statement found the
        catalog changed, or the cached (not just read) row names another model than the embedder's."""
        return catalog_changed(exc) or (isinstance(exc, ModelMismatchError) and not read)

    def exhausted(self, catalog: str) -> DatabaseError:
        return DatabaseError(f"catalog {catalog!r} changed during each of {ROUTE_ATTEMPTS} tries to route; try again")
