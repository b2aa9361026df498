"""The methods of ``ToolStore`` and ``AsyncToolStore`` that manage a catalog as a whole (mixins, side by side so the
two stay alike): drop it, its stored settings (fusion, abstention), its model (reembed), its grants, its planner
statistics and the shared embedding cache. The async ones run ToolStore's in its writer thread. ``ToolStore.tune``
stays in ``_store``: it is the one method that delegates up, to ``_tune``."""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

import psycopg

from . import _access, _housekeeping, _indexes
from ._abstain import SETTINGS_KEY, AbstainModel, check_model
from ._embedders.base import Embedder
from ._errors import InvalidInputError
from ._fusion import DEFAULT_AVOID, DEFAULT_K_RRF, DEFAULT_SPLIT, Fusion, check_fusion, check_weights
from ._input import flag
from ._metrics import Judgement, LabelledSession
from ._models import CatalogInfo
from ._reembed import reembed
from ._vectors import prune_cache

if TYPE_CHECKING:
    from ._tune import TuneReport


class CatalogMethods:
    """The catalog-wide methods of ``ToolStore`` (a mixin: the store supplies ``catalog``, ``schema``, ``embedder``
    and ``_run``)."""

    catalog: str
    schema: str
    embedder: Embedder | None
    _run: Callable[[Callable[[psycopg.Connection[Any]], Any]], Any]

    def drop_catalog(self) -> CatalogInfo:
        """Delete this catalog with its tools, vectors, examples and statistics; returns its row as dropped, with the
        counts of the tools and intent examples dropped (``n_tools``, ``n_examples``: read under the drop's lock)."""
        dropped: CatalogInfo = self._run(lambda conn: _housekeeping.drop_catalog(conn, self.catalog))
        return dropped

    def prune_cache(self) -> int:
        """Delete the shared embedding cache's entries no catalog's model reads (the owner only); returns how many."""
        pruned: int = self._run(prune_cache)
        return pruned

    def set_fusion(
        self,
        *,
        weights: Mapping[str, float],
        k_rrf: float = DEFAULT_K_RRF,
        overfetch: int | None = None,
        split: float = DEFAULT_SPLIT,
        avoid: float = DEFAULT_AVOID,
    ) -> None:
        """Store fusion settings in the catalog (``avoid``: the avoid-when penalty's weight, 0 to 1); route() uses
        them when not given weights explicitly."""
        fusion = check_fusion(Fusion(check_weights(weights), k_rrf, overfetch, split=split, avoid=avoid))
        self._run(lambda conn: _housekeeping.set_settings(conn, self.catalog, {"fusion": fusion.as_dict()}))

    def set_abstain(self, model: AbstainModel | None, *, fusion: Fusion | None = None) -> None:
        """Store the catalog's abstention model (None: back to the shipped default), and with ``fusion`` that fusion
        too, in one write; route(abstain=True) decides with it. ``tune(negatives=...)`` fits and stores one."""
        updates: dict[str, Any] = {SETTINGS_KEY: None if model is None else check_model(model).as_dict()}
        if fusion is not None:
            updates["fusion"] = check_fusion(fusion).as_dict()
        self._run(lambda conn: _housekeeping.set_settings(conn, self.catalog, updates))

    def reembed(self, embedder: Embedder) -> dict[str, Any]:
        """Switch the catalog to ``embedder``'s model: every tool and example re-embedded, nothing dropped.

        The store routes with ``embedder`` afterwards.
        """
        if not isinstance(embedder, Embedder):  # a spec such as 'hashing' is the CLI's (toolstore reembed --model)
            raise InvalidInputError(f"reembed needs an Embedder, such as LocalEmbedder(), got {embedder!r:.80}")
        report: dict[str, Any] = self._run(lambda conn: reembed(conn, self.catalog, embedder))
        self.embedder = embedder
        return report

    def grant(self, role: str, *, write: bool = False, tenant: bool = False) -> None:
        """Let database role ``role`` see this catalog (``write``: and change it), enforced by row-level security.

        ``tenant``: instead make ``role`` a tenant role, which sees whichever catalog its connection names
        (``ToolStore`` names its own catalog on every connection); for applications with one login role.
        Run as the role that owns toolstore's tables. Only that role builds HNSW indexes: a granted writer's writes
        leave them to the owner's next write (with a warning; dense retrieval searches exactly meanwhile).
        """
        write, tenant = flag(write, "write"), flag(tenant, "tenant")
        self._run(lambda conn: _access.grant(conn, self.schema, None if tenant else self.catalog, role, write=write))

    def revoke(self, role: str, *, tenant: bool = False) -> bool:
        """Take this catalog (``tenant``: the tenant role) away from ``role``; False when it had no such grant."""
        tenant = flag(tenant, "tenant")
        revoked: bool = self._run(
            lambda conn: _access.revoke(conn, self.schema, None if tenant else self.catalog, role)
        )
        return revoked

    def grants(self) -> list[dict[str, Any]]:
        """Every grant in the database: ``{"catalog": name (None for a tenant role), "role", "write"}``."""
        found: list[dict[str, Any]] = self._run(_access.grants)
        return found

    def analyze(self) -> None:
        """Refresh the planner's statistics of toolstore's shared tables and of the catalog's partitions (writes of
        more than a few hundred rows do it)."""
        self._run(lambda conn: _indexes.analyze(conn, self.catalog))


class AsyncCatalogMethods:
    """The catalog-wide methods of ``AsyncToolStore`` (a mixin: the store supplies ``_write(method, *args,
    **kwargs)``, which runs ToolStore's method of that name in its writer thread); each as :class:`CatalogMethods`'
    (their docstrings are ToolStore's, ``_async_store._share_docs``), and ``tune``."""

    _write: Callable[..., Awaitable[Any]]

    async def drop_catalog(self) -> CatalogInfo:
        return cast("CatalogInfo", await self._write("drop_catalog"))

    async def prune_cache(self) -> int:
        return cast("int", await self._write("prune_cache"))

    async def set_fusion(
        self,
        *,
        weights: Mapping[str, float],
        k_rrf: float = DEFAULT_K_RRF,
        overfetch: int | None = None,
        split: float = DEFAULT_SPLIT,
        avoid: float = DEFAULT_AVOID,
    ) -> None:
        await self._write("set_fusion", weights=weights, k_rrf=k_rrf, overfetch=overfetch, split=split, avoid=avoid)

    async def set_abstain(self, model: AbstainModel | None, *, fusion: Fusion | None = None) -> None:
        await self._write("set_abstain", model, fusion=fusion)

    async def reembed(self, embedder: Embedder) -> dict[str, Any]:
        return cast("dict[str, Any]", await self._write("reembed", embedder))

    async def tune(
        self,
        examples: str | os.PathLike[str] | Sequence[tuple[str, Judgement]] = (),
        *,
        sessions: str | os.PathLike[str] | Sequence[LabelledSession] = (),
        seed: int = 0,
        folds: int = 5,
        save: bool = True,
        negatives: str | os.PathLike[str] | Sequence[str] | None = None,
    ) -> TuneReport:
        options = dict(sessions=sessions, seed=seed, folds=folds, save=save, negatives=negatives)
        return cast("TuneReport", await self._write("tune", examples, **options))

    async def analyze(self) -> None:
        await self._write("analyze")

    async def grant(self, role: str, *, write: bool = False, tenant: bool = False) -> None:
        await self._write("grant", role, write=write, tenant=tenant)

    async def revoke(self, role: str, *, tenant: bool = False) -> bool:
        return cast("bool", await self._write("revoke", role, tenant=tenant))

    async def grants(self) -> list[dict[str, Any]]:
        return cast("list[dict[str, Any]]", await self._write("grants"))
