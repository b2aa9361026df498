"""Non-ASCII tool names: Latin letters are offered without their diacritics (``café`` as ``cafe``), ``call_key()``
(migration 0029) folds them the same in the database, and a call of either the offered or the own name resolves, in
a route's result, across a catalog, in the session log, in both stores."""

from __future__ import annotations

import asyncio
import random
import re
import unicodedata
import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
import sqlalchemy
from psycopg import sql
from psycopg.conninfo import make_conninfo

from toolstore import AsyncToolStore, DatabaseError, HashingEmbedder, Tool, ToolStore, UnknownToolError, migrate
from toolstore._formats.names import FALLBACK, FOLDED, VALID, fold, model_names, name_forms, plain_name
from toolstore._names import call_keys, resolve_name
from toolstore._steps import Fetch, fetch_rows

LATIN = {  # a name with accents, ligatures or stroked letters -> the name it is offered under
    "café": "cafe",
    "cafe\u0301": "cafe",  # the same, decomposed
    "créer_facture": "creer_facture",
    "Überweisung": "Uberweisung",
    "naïve-search": "naive-search",
    "Straße": "Strasse",
    "Ærøskøbing": "AEroskobing",
    "Œuvre complète": "OEuvre_complete",
    "Łódź": "Lodz",
    "Þingvellir": "THingvellir",
    "Đorđe": "Dorde",
    "İstanbul": "Istanbul",
    "ﬁle ﬂow": "file_flow",
    "Ｆｕｌｌ": "Full",
    "Tiếng Việt": "Tieng_Viet",
    "ǿre": "ore",  # NFKD gives ø and an accent; ø is folded by hand
}

TRICKY = [  # every kind of name whose key the database and Python must agree on
    *LATIN,
    *FOLDED,
    *(c.upper() + c for c in FOLDED),
    "日本",
    "中国",
    "Привет",
    "Привет_world",
    "αβγ-search",
    "café_日本",
    "search_搜索",
    "🚀 launch",
    "👩\u200d💻dev",
    "✅",
    "\u0301",  # a lone combining mark
    "z\u0336a\u0337l\u0338g\u0335o",
    "s\u0323\u0307",
    "ṩ",
    "①②",
    "x²",
    "㎏",
    "Ǆemal",
    "ı",
    "K",  # Kelvin sign: NFKD K
    "send_message",
    "a.b",
    "tool",
]


def _sql_keys(conn: psycopg.Connection[Any], names: list[str]) -> list[str]:
    rows = conn.execute("select call_key(n) from unnest(%s::text[]) with ordinality u(n, i) order by i", [names])
    return [r[0] for r in rows]


def _key(name: str) -> str:
    """``call_key()`` as Python would say it: the ASCII letters and digits of the folded name, lower-cased."""
    return re.sub(r"[^a-zA-Z0-9]", "", fold(name)).lower()


def _assigned(code: int) -> bool:
    return unicodedata.category(chr(code)) not in ("Cn", "Cs", "Co")


#: Every character (assigned in this Python's Unicode: decompositions of assigned characters are stable) whose NFKD
#: holds an ASCII letter or digit: full-width and mathematical letters, ligatures, accented letters, circled digits...
DECOMPOSING = [
    chr(i)
    for i in range(0x80, 0x110000)
    if _assigned(i) and re.search("[a-zA-Z0-9]", unicodedata.normalize("NFKD", chr(i)))
]


def _random_names(count: int, seed: int) -> list[str]:
    """Short strings of ASCII, combining marks, the hand-folded letters, decomposing and other assigned characters."""
    rng = random.Random(seed)
    pools = [[*"aZ9_-. "], [*FOLDED], ["\u0301", "\u0308", "\u0327", "\u20dd"], DECOMPOSING]

    def char() -> str:
        if rng.random() < 0.2:
            return next(chr(c) for c in iter(lambda: rng.randrange(0x80, 0x30000), None) if _assigned(c))
        return rng.choice(rng.choice(pools))

    return ["".join(char() for _ in range(rng.randrange(1, 4))) for _ in range(count)]


def test_latin_letters_are_offered_without_their_diacritics() -> None:
    tools = [Tool(id=f"p.{i}", name=name, provider="p") for i, name in enumerate(LATIN)]
    assert [plain_name(t) for t in tools] == list(LATIN.values())
    valid = ["send_message", "get-weather", "A1", "x" * 64, "tool"]
    assert [plain_name(Tool(id=f"v.{n}", name=n)) for n in valid] == valid  # a valid name stays as it is
    assert all(fold(n) == n for n in valid)


def test_tools_of_no_latin_letter_and_folded_twins_never_share_a_name() -> None:
    """A name with nothing left once folded is ``tool``, as before; two such tools, or ``café`` and ``cafe``, are told
    apart by provider and then a hash of the id, and each name resolves back to its own tool."""
    tools = [
        Tool(id="a.ja", name="日本", provider="a"),
        Tool(id="a.zh", name="中国", provider="a"),
        Tool(id="b.ru", name="Привет", provider="b"),
        Tool(id="a.cafe", name="café", provider="a"),
        Tool(id="a.cafe2", name="cafe", provider="a"),
        Tool(id="b.cafe", name="cafe\u0301", provider="b"),
    ]
    names = model_names(tools)
    assert len(set(names)) == len(names) and all(VALID.match(n) for n in names), names
    assert all(FALLBACK in n for n in names[:3]), names
    assert [resolve_name(n, tools, offered=True).id for n in names] == [t.id for t in tools]
    assert model_names(tools[:1]) == [FALLBACK]  # alone: the fallback itself


def test_call_key_folds_as_the_model_names_do(store: ToolStore) -> None:
    """Over tricky and random names: ``call_key()`` in the database is Python's fold's ASCII letters and digits, and
    a tool's plain model-facing name has the key of its own name (``call_candidates`` finds it by that), but for the
    fallback, which ``_names.call_keys`` looks up without."""
    names = TRICKY + [f"a{c}1" for c in DECOMPOSING] + _random_names(3000, seed=46)
    plains = [plain_name(Tool(id=f"t.{i}", name=n)) for i, n in enumerate(names)]
    with store.pool.connection() as conn:
        keys, plain_keys = _sql_keys(conn, names), _sql_keys(conn, plains)
    assert keys[: len(LATIN)] == [re.sub("[_-]", "", offered).lower() for offered in LATIN.values()]
    assert keys == [_key(n) for n in names]
    wrong = [
        (n, p, k, pk) for n, p, k, pk in zip(names, plains, keys, plain_keys) if pk != k and (p, k) != (FALLBACK, "")
    ]
    assert not wrong, wrong[:10]


def test_call_candidates_find_every_tool_a_name_form_means(store: ToolStore) -> None:
    """Every name form of every tool, its own name and id, looked up as ``resolve_steps`` does (block
    ``call_candidates``, by ``_names.call_keys``), finds that tool."""
    tools = [Tool(id=f"p{i % 3}.{i}", name=n, provider=f"p{i % 3}", description=n) for i, n in enumerate(TRICKY)]
    store.upsert(tools)
    info = store.info(counts=False)
    missed = []
    with store.pool.connection() as conn:
        for tool in tools:
            for name in (*name_forms(tool), tool.name, tool.id):
                params = {"catalog": info.id, "names": [name], "keys": call_keys([name])}
                if tool.id not in {r["id"] for r in fetch_rows(conn, Fetch("call_candidates", params))}:
                    missed.append((tool.id, tool.name, name))
    assert not missed, missed


CAFE = [
    Tool(id="menu.cafe", name="café", provider="menu", description="order a coffee at the cafe"),
    Tool(id="bank.transfer", name="Überweisung", provider="bank", description="send a bank transfer"),
    Tool(id="bank.ja", name="日本", provider="bank", description="japanese bank"),
]


def test_a_call_of_the_folded_or_the_own_name_resolves(store: ToolStore) -> None:
    """The name a tool is offered under, and across a catalog its own name too, in ``ToolStore.resolve`` (block
    ``tool_names``), ``resolve_calls`` and the session log (``call_candidates``, by ``call_key()``)."""
    store.upsert(CAFE)
    result = store.route("order a coffee", k=3)
    assert sorted(result.names) == ["Uberweisung", "cafe", "tool"]
    for name, tool_id in (("cafe", "menu.cafe"), ("Uberweisung", "bank.transfer")):
        assert result.resolve(name).id == tool_id  # among the offered tools
        assert store.resolve(name, among=result.ids).id == tool_id
    for name in ("cafe", "café", "Uberweisung", "Überweisung"):
        assert store.resolve(name).id == ("menu.cafe" if "caf" in name else "bank.transfer")  # across the catalog
    assert store.resolve_calls(["cafe", "café", "Uberweisung", "tool", "日本"]) == [
        "menu.cafe",
        "menu.cafe",
        "bank.transfer",
        "bank.ja",
        "bank.ja",
    ]
    assert store.record_calls("s1", ["cafe", "café", "Uberweisung"]) == 3
    assert [c.tool_id for c in store.session_log("s1")] == ["menu.cafe", "menu.cafe", "bank.transfer"]
    with pytest.raises(UnknownToolError, match="no offered tool is named 'caf'"):
        result.resolve("caf")


def test_the_async_store_resolves_folded_names(dsn: str) -> None:
    async def main() -> tuple[list[str], list[str | None], list[str]]:
        async with AsyncToolStore(dsn, embedder=HashingEmbedder(64), catalog="async") as store:
            await store.upsert(CAFE)
            resolved = [(await store.resolve(n)).id for n in ("cafe", "café")]
            calls = await store.resolve_calls(["cafe", "café", "Uberweisung"])
            await store.record_calls("s1", ["cafe", "Überweisung"])
            return resolved, calls, [c.tool_id for c in await store.session_log("s1")]

    assert asyncio.run(main()) == (
        ["menu.cafe", "menu.cafe"],
        ["menu.cafe", "menu.cafe", "bank.transfer"],
        ["menu.cafe", "bank.transfer"],
    )


def test_0029_builds_the_call_key_indexes_again_both_ways(dsn: str) -> None:
    """A catalog written before 0029 (down to 0028 and up again): its tools are found by the index under the new key
    (an expression index is not rebuilt when its function is replaced), and under the old one after a downgrade."""
    with ToolStore(dsn, embedder=None, catalog="c") as store:  # enough tools for the planner to take the index
        store.upsert([*CAFE, *(Tool(id=f"f.{i}", name=f"filler_{i}", description="x") for i in range(500))])

    def by_index(name: str) -> list[str]:
        with psycopg.connect(dsn) as conn:
            conn.execute("set search_path to toolstore; analyze tools")
            lookup = (
                "select id from tools where catalog_id = (select id from catalogs where name = 'c')"
                " and call_key(name) = call_key(%s) order by id"
            )
            plan = "\n".join(r[0] for r in conn.execute(f"explain {lookup}", [name]))
            assert "tools_call_name_idx" in plan, plan
            return [r[0] for r in conn.execute(lookup, [name])]

    assert by_index("cafe") == ["menu.cafe"] and by_index("uberweisung") == ["bank.transfer"]
    migrate(dsn, revision="0028", downgrade=True)
    assert by_index("caf") == ["menu.cafe"] and by_index("cafe") == []
    migrate(dsn)
    assert by_index("cafe") == ["menu.cafe"] and by_index("caf") == []


@pytest.fixture
def latin1_dsn(server_dsn: str) -> Iterator[str]:
    """A database whose encoding is LATIN1 (``normalize`` works only in UTF8 ones)."""
    name = f"toolstore_latin1_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(server_dsn, autocommit=True) as conn:
        conn.execute(
            sql.SQL("create database {} encoding 'LATIN1' template template0 locale 'C'").format(sql.Identifier(name))
        )
    yield make_conninfo(server_dsn, dbname=name)
    with psycopg.connect(server_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("drop database {} with (force)").format(sql.Identifier(name)))


def test_a_database_not_in_utf8_keeps_the_ascii_key_and_resolves_across_the_catalog(latin1_dsn: str) -> None:
    """0029 leaves 0020's ``call_key()`` where ``normalize`` cannot run: a folded name finds no tool by index there,
    and is resolved across the whole catalog (``_steps.resolve_steps``)."""
    with ToolStore(latin1_dsn, embedder=None, catalog="c") as store:
        store.upsert([Tool(id="menu.cafe", name="café", provider="menu", description="coffee")])
        assert store.resolve_calls(["cafe", "café", "menu__cafe"]) == ["menu.cafe"] * 3
        assert store.resolve("cafe").id == "menu.cafe"
        with store.pool.connection() as conn:
            assert _sql_keys(conn, ["café", "cafe"]) == ["caf", "cafe"]


def test_a_routes_result_resolves_a_tools_own_name_that_none_was_offered_under(store: ToolStore) -> None:
    """A model given ``cafe`` that calls ``café``: among the offered tools (``RouteResult.resolve``,
    ``ToolStore.resolve(among=...)``) a name none was offered under is matched with their own names; an offered name
    comes first, and an own name two of them have is ambiguous, never guessed."""
    twins = [
        Tool(id="a.do", name="do it", provider="a", description="do the thing"),
        Tool(id="b.do", name="do_it", provider="b", description="do the thing"),
        Tool(id="c.cafe", name="café", provider="c", description="order a coffee"),
        Tool(id="d.cafe", name="café", provider="d", description="order a coffee"),
    ]
    store.upsert([*CAFE, *twins])
    result = store.route("order a coffee", k=10)
    assert set(result.ids) == {t.id for t in [*CAFE, *twins]}
    offered = dict(zip(result.ids, result.names))
    assert offered["a.do"] == "a__do_it" and offered["b.do"] == "b__do_it" and offered["menu.cafe"] == "menu__cafe"
    for name, tool_id in (("Überweisung", "bank.transfer"), ("do it", "a.do"), ("do_it", "b.do"), ("日本", "bank.ja")):
        assert result.resolve(name).id == tool_id
        assert store.resolve(name, among=result.ids).id == tool_id
    with pytest.raises(UnknownToolError, match="'café' may mean any of"):
        result.resolve("café")  # menu.cafe, c.cafe and d.cafe
    assert result.resolve("c__cafe").id == "c.cafe"


@pytest.fixture
def sql_ascii_dsn(server_dsn: str) -> Iterator[str]:
    """A database whose encoding is SQL_ASCII (none: psycopg returns its text as bytes)."""
    name = f"toolstore_sql_ascii_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(server_dsn, autocommit=True) as conn:
        conn.execute(
            sql.SQL("create database {} encoding 'SQL_ASCII' template template0 locale 'C'").format(
                sql.Identifier(name)
            )
        )
    yield make_conninfo(server_dsn, dbname=name)
    with psycopg.connect(server_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("drop database {} with (force)").format(sql.Identifier(name)))


def test_a_sql_ascii_database_is_refused_saying_to_use_utf8(sql_ascii_dsn: str) -> None:
    """SQL_ASCII takes bytes for characters (full-text search drops "é"): migrate() and a store refuse it up front
    (before: SQLAlchemy's TypeError reading the server's version as bytes), nothing created there."""
    utf8 = "encoding SQL_ASCII.*use a UTF8 database"
    with pytest.raises(DatabaseError, match=utf8):
        migrate(sql_ascii_dsn)
    utf8_client = make_conninfo(sql_ascii_dsn, client_encoding="UTF8")  # text as str: SQLAlchemy connects
    engine = sqlalchemy.create_engine("postgresql+psycopg://", creator=lambda: psycopg.connect(utf8_client))
    with engine.connect() as conn, pytest.raises(DatabaseError, match=utf8):
        migrate(connection=conn)
    engine.dispose()
    for migrating in (True, False):  # the pool's set-up refuses it too
        with pytest.raises(DatabaseError, match=utf8):
            ToolStore(sql_ascii_dsn, embedder=None, catalog="c", migrate=migrating)

    async def open_async() -> None:
        await AsyncToolStore(sql_ascii_dsn, embedder=None, catalog="c", migrate=False).open()

    with pytest.raises(DatabaseError, match=utf8):
        asyncio.run(open_async())
    with psycopg.connect(sql_ascii_dsn) as conn:
        assert conn.execute("select count(*) from pg_namespace where nspname = 'toolstore'").fetchone() == (0,)


def test_a_client_encoding_of_sql_ascii_is_refused_saying_to_set_utf8(dsn: str) -> None:
    """A UTF8 database read with client_encoding SQL_ASCII (``PGCLIENTENCODING``) would hand toolstore bytes."""
    ascii_client = make_conninfo(dsn, client_encoding="SQL_ASCII")
    with pytest.raises(DatabaseError, match="client_encoding is SQL_ASCII.*set it to UTF8"):
        migrate(ascii_client)
    with pytest.raises(DatabaseError, match="client_encoding is SQL_ASCII.*set it to UTF8"):
        ToolStore(ascii_client, embedder=None, catalog="c", migrate=False)
