"""BM25 statistics as stored and as recomputed from the tools' tsvectors: a test compares the two."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import psycopg

FIELDS = {1: "name_tsv", 2: "description_tsv", 3: "expansion_tsv"}


def field_docs(conn: psycopg.Connection[Any], catalog: int, field: int) -> dict[str, dict[str, int]]:
    """{tool id: {lexeme: tf}} read straight from the stored tsvectors."""
    column = FIELDS[field]
    docs: dict[str, dict[str, int]] = {}
    rows = conn.execute(f"select id, {column} from tools where catalog_id = %s", [catalog]).fetchall()  # noqa: S608 - test-only constant column
    for tool_id, _ in rows:
        docs[tool_id] = {}
    lexemes = conn.execute(
        f"select t.id, u.lexeme, coalesce(array_length(u.positions, 1), 1) "  # noqa: S608
        f"from tools t cross join lateral unnest(t.{column}) u where t.catalog_id = %s",
        [catalog],
    ).fetchall()
    for tool_id, lexeme, tf in lexemes:
        docs[tool_id][lexeme] = tf
    return docs


def stats_snapshot(conn: psycopg.Connection[Any], catalog: int) -> dict[str, Any]:
    return {
        "postings": sorted(
            conn.execute(
                "select field, lexeme, t.id, tf, dl from postings p join tools t on t.pk = p.tool_pk "
                "where p.catalog_id = %s",
                [catalog],
            ).fetchall()
        ),
        "df": sorted(
            conn.execute("select field, lexeme, df from lexeme_stats where catalog_id = %s", [catalog]).fetchall()
        ),
        "fields": sorted(
            conn.execute("select field, n, total_len from field_stats where catalog_id = %s", [catalog]).fetchall()
        ),
    }


def recomputed_stats(conn: psycopg.Connection[Any], catalog: int) -> dict[str, Any]:
    postings, df, fields = [], defaultdict(int), {}
    for field in FIELDS:
        docs = field_docs(conn, catalog, field)
        for tool_id, tf in docs.items():
            dl = sum(tf.values())
            for lexeme, count in tf.items():
                postings.append((field, lexeme, tool_id, count, dl))
                df[(field, lexeme)] += 1
        fields[field] = (field, len(docs), sum(sum(tf.values()) for tf in docs.values()))
    return {
        "postings": sorted(postings),
        "df": sorted((f, lex, n) for (f, lex), n in df.items()),
        "fields": sorted(v for v in fields.values() if v[1] > 0),
    }


def statistics_exact(conn: psycopg.Connection[Any], catalog: int) -> bool:
    return stats_snapshot(conn, catalog) == recomputed_stats(conn, catalog)


def transitions_exact(conn: psycopg.Connection[Any], catalog: int) -> bool:
    """Whether the stored transition counts equal the pairs of consecutive calls in the catalog's session log."""
    stored = conn.execute(
        "select prev_tool, next_tool, n from tool_transitions where catalog_id = %s order by 1, 2", [catalog]
    ).fetchall()
    recomputed = conn.execute(
        "select a.tool_id, b.tool_id, count(*) from session_calls a join session_calls b on b.catalog_id = "
        "a.catalog_id and b.session_id = a.session_id and b.seq = a.seq + 1 where a.catalog_id = %s "
        "group by 1, 2 order by 1, 2",
        [catalog],
    ).fetchall()
    return stored == recomputed
