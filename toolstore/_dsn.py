"""Where the database is: a DSN checked as libpq reads it (:func:`check_dsn`, a SQLAlchemy URL and a password's
unencoded ``@`` refused by name), or, without one, ``$TOOLSTORE_DSN`` or the embedded server (:func:`resolve_dsn`)."""

from __future__ import annotations

import os
import re

import psycopg
from psycopg.conninfo import conninfo_to_dict

from ._embedded import embedded_dsn
from ._errors import InvalidInputError, first_line
from ._input import given_dsn

#: A SQLAlchemy URL's scheme, ``postgresql+psycopg://``: the dialect and, after the ``+``, the driver.
_SQLALCHEMY_URL = re.compile(r"(postgres(?:ql)?)(\+[A-Za-z0-9_]*)://")


def check_dsn(dsn: str) -> str:
    """``dsn`` if libpq can parse it, else InvalidInputError: libpq's own message quotes the piece it could not read
    (or the whole URI, password included), so only its redacted first line is said. A host with an ``@`` is refused
    too: a URI password with an ``@`` not percent-encoded parses, its tail taken for the host, which a connection
    error would then quote."""
    scheme = _SQLALCHEMY_URL.match(dsn) if isinstance(dsn, str) else None
    if scheme:  # SQLAlchemy's URL (an alembic env's, an app's engine): libpq reads no '+driver', and says only that
        raise InvalidInputError(
            f"malformed DSN: {scheme[0]!r} is SQLAlchemy's URL scheme, not libpq's: write {scheme[1] + '://'!r} "
            f"(drop {scheme[2]!r})"
        )
    try:
        params = conninfo_to_dict(dsn)
    except psycopg.Error as exc:
        raise InvalidInputError(f"malformed DSN: {first_line(exc)}") from None
    if "@" in str(params.get("host") or ""):
        raise InvalidInputError("malformed DSN: its host holds an '@' (percent-encode an '@' in a password as %40)")
    return dsn


def dsn_place(dsn: str) -> str:
    """Where ``dsn`` connects, as warnings say it: the host (or hostaddr), port and dbname it gives (a URL or key=value,
    as libpq parses it; never the password), e.g. ``host=db2 port=5433 dbname=app``; ``libpq defaults`` when it gives
    none (what it leaves out, libpq's defaults then, is not said)."""
    params = conninfo_to_dict(dsn)
    keys = ("host" if params.get("host") else "hostaddr", "port", "dbname")
    return " ".join(f"{key}={params[key]}" for key in keys if params.get(key)) or "libpq defaults"


def resolve_dsn(dsn: str | None) -> str:
    """The DSN argument if given (``_input.given_dsn``), else ``$TOOLSTORE_DSN`` (unset when empty), else the embedded
    server's; a malformed one is an InvalidInputError."""
    if (given := given_dsn(dsn)) is not None:
        return check_dsn(given)
    env = os.environ.get("TOOLSTORE_DSN")
    if env:
        return check_dsn(env)
    return embedded_dsn()
