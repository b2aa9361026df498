"""The one database encoding toolstore refuses: SQL_ASCII, which is none."""

from __future__ import annotations

from typing import Any

import psycopg

from ._errors import DatabaseError


def check_encoding(conn: psycopg.Connection[Any] | psycopg.AsyncConnection[Any]) -> None:
    """A DatabaseError when ``conn``'s database, or its client_encoding, is SQL_ASCII: bytes without an encoding,
    where Postgres takes each byte for a character (``to_tsvector`` drops "é" and every CJK word, ``left()`` splits a
    character, jsonb refuses the ``\\u00e9`` escapes JSON writers send, nothing checks what is stored) and psycopg
    returns text as bytes (what SQLAlchemy, reading the server's version, failed on with a TypeError). Any real
    encoding works (UTF8; LATIN1 and the like for the characters they have)."""
    server, client = (conn.info.parameter_status(name) for name in ("server_encoding", "client_encoding"))
    if server == "SQL_ASCII":
        raise DatabaseError(
            f"database {conn.info.dbname!r} has encoding SQL_ASCII (bytes, no characters), where toolstore can "
            "neither search nor store text correctly: use a UTF8 database (createdb -E UTF8 -T template0 NAME, or "
            "create database NAME encoding 'UTF8' template template0)"
        )
    if client == "SQL_ASCII":
        raise DatabaseError(
            "the connection's client_encoding is SQL_ASCII (text would arrive as bytes): set it to UTF8 "
            "(PGCLIENTENCODING, or client_encoding in the DSN)"
        )
