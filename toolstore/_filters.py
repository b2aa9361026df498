"""route()'s filters on the client side: their values checked, and the error the statement raises for values that
match no tool.

The filters themselves live in the database (migration 0008): ``route_keeps()`` is their one home (allow and block
ids with ``*`` and ``?`` globs, categories, providers, tags), ``route_kept()`` checks them against the catalog inside
the route statement and raises SQLSTATE :data:`UNMATCHED_FILTER` naming every value that matches no tool, which
:func:`unmatched_filter` turns into an InvalidInputError (:class:`UnmatchedFilterError`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ._errors import InvalidInputError, UnmatchedFilterError
from ._input import MAX_FILTER_VALUES, MAX_ID_CHARS, check_text

#: SQLSTATE that ``route_kept()`` (migration 0008) raises, naming the filter values that match no tool.
UNMATCHED_FILTER = "TS002"


def filter_values(name: str, values: Sequence[str] | None) -> list[str] | None:
    """A filter's values (``allow``, ``providers``, ...) as a list of storable strings; InvalidInputError naming
    ``name`` otherwise."""
    if values is None:
        return None
    if isinstance(values, (str, bytes)) or not isinstance(values, (list, tuple, set, frozenset)):
        raise InvalidInputError(f"{name} must be a list of strings")
    if len(values) > MAX_FILTER_VALUES:
        raise InvalidInputError(f"{name} holds {len(values):,} values; the limit is {MAX_FILTER_VALUES:,}")
    return [check_text(v, f"{name} value", max_chars=MAX_ID_CHARS) for v in values]


def filter_params(request: Any) -> dict[str, Any]:
    """The route statement's filter parameters from a request's ``allow``, ``block``, ``categories``, ``providers``
    and ``tags`` (each a list or None), and ``filtered``: whether any is given."""
    filters = {name: getattr(request, name) for name in ("allow", "block", "categories", "providers", "tags")}
    return {**filters, "filtered": any(v is not None for v in filters.values())}


def unmatched_filter(exc: BaseException) -> UnmatchedFilterError | None:
    """The InvalidInputError a route statement's TS002 error means (a filter value matched no tool), else None."""
    if getattr(exc, "sqlstate", None) != UNMATCHED_FILTER:
        return None
    diag = getattr(exc, "diag", None)
    return UnmatchedFilterError(getattr(diag, "message_primary", None) or str(exc))
