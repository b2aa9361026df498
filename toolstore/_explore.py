"""The exploration slot (no I/O): one of the ``k`` routed slots goes to a tool drawn from the fused ranks
``k+1..2k``, so an agent sometimes sees (and its logs can credit) a tool the ranking keeps just out of reach.

The draw is uniform over the candidates of ranks ``k+1..2k`` (in the final order: after reranking, when a
reranker is given) that are not already packed and fit what is left of the token budget; the generator is seeded
from the seed and the request's text, so the same seed and request always draw the same tool. Without a seed one
is drawn at random and reported (``RouteResult.exploration["seed"]``), so any draw can be replayed. The explored
tool takes the last of the ``k`` slots; when no candidate is eligible the slot is filled as usual.
"""

from __future__ import annotations

import hashlib
import random
import secrets
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from ._errors import InvalidInputError
from ._formats import Format
from ._input import flag
from ._packing import Prompt, pack
from ._result import RoutedTool

SEED_BITS = 63


def check_explore(explore: object, seed: object) -> int | None:
    """The seed an exploring route draws with (a random one when ``seed`` is None), None without exploration;
    InvalidInputError for a non-bool ``explore``, a seed that is not an integer, or a seed without exploration."""
    flag(explore, "explore")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**SEED_BITS):
        raise InvalidInputError(f"seed must be an integer from 0 to 2**{SEED_BITS} - 1, got {seed!r}")
    if not explore:
        if seed is not None:
            raise InvalidInputError("seed is only used with explore=True")
        return None
    return secrets.randbits(SEED_BITS) if seed is None else seed


def explore_pack(
    candidates: Sequence[RoutedTool],
    *,
    k: int,
    token_budget: int | None,
    seed: int | None,
    query: str,
    fmt: Format = "openai",
) -> tuple[list[RoutedTool], list[RoutedTool], int, dict[str, Any] | None]:
    """:func:`pack` (in ``fmt``) with the last of the ``k`` slots drawn from ranks ``k+1..2k``: (packed, skipped,
    tokens used, what ``RouteResult.exploration`` says). Without a seed, plain :func:`pack` (and None)."""
    if seed is None:
        return (*pack(candidates, k=k, token_budget=token_budget, fmt=fmt), None)
    routed = [c for c in candidates if not c.always_on]
    window = routed[k : 2 * k]
    packed, skipped, _ = pack(candidates, k=k - 1, token_budget=token_budget, fmt=fmt)
    taken = {c.tool.id for c in packed}
    prompt = Prompt(fmt, packed)
    eligible = [c for c in window if c.tool.id not in taken and prompt.fits(c, token_budget)]
    report: dict[str, Any] = {"seed": seed, "ranks": [k + 1, 2 * k], "eligible": len(eligible), "explored": None}
    if not eligible:
        packed, skipped, used = pack(candidates, k=k, token_budget=token_budget, fmt=fmt)
        return packed, skipped, used, report
    chosen = _generator(seed, query).choice(eligible)
    report |= {"explored": chosen.tool.id, "explored_rank": routed.index(chosen) + 1}
    prompt.add(chosen)
    return [*packed, replace(chosen, explored=True)], skipped, prompt.used, report


def _generator(seed: int, query: str) -> random.Random:
    """A generator seeded from ``seed`` and the request (stable across processes and Python versions)."""
    digest = hashlib.blake2b(f"{seed}\x00{query}".encode(), digest_size=8).digest()
    return random.Random(int.from_bytes(digest, "big"))
