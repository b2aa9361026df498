"""Embeddings cached in Postgres, model changes, and the OpenAI embedder through the store."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
import pytest
from psycopg import Connection
from psycopg.conninfo import make_conninfo

from toolstore import (
    AbstainModel,
    EmbedderError,
    HashingEmbedder,
    IntentExample,
    Judgement,
    LocalEmbedder,
    ModelMismatchError,
    OpenAIEmbedder,
    ToolStore,
    _catalog,
    _reembed,
    _vectors,
)
from toolstore._embedders.local import MODEL_BUILD, MODEL_DIR, MODEL_FILES
from toolstore._text import dense_text
from toolstore._vectors import embed_cached
from toolstore.testing.fake_openai import FakeOpenAI

from catalog_gen import generated_tools


class Counting(HashingEmbedder):
    """The hashing double, counting every text it embeds."""

    def __init__(self, dim: int = 64) -> None:
        super().__init__(dim)
        self.texts: list[str] = []

    def embed_batch(self, texts: Sequence[str]) -> np.ndarray:
        self.texts.extend(texts)
        return super().embed_batch(texts)


SHIPPED_NAME = "local/all-MiniLM-L6-v2"  # the shipped model's name, which a catalog records
SHIPPED = f"local/all-MiniLM-L6-v2#build={MODEL_BUILD}"  # the shipped model's cache key at its default max_tokens


def age_cache(conn: Connection[Any]) -> None:
    """Every cached vector written before a prune's grace (``CACHE_GRACE``) began."""
    conn.execute("update embedding_cache set created_at = created_at - 2 * %s::interval", (_vectors.CACHE_GRACE,))


def test_unchanged_catalog_embeds_nothing_and_cache_is_shared(dsn: str) -> None:
    tools = generated_tools(30, seed=1)
    embedder = Counting()
    with ToolStore(dsn, embedder=embedder, catalog="one") as store:
        assert store.upsert(tools).embedded == 30
        assert len(embedder.texts) == 30
        report = store.upsert(tools)
        assert report.embedded == 0 and report.unchanged == 30 and len(embedder.texts) == 30
        changed = [tools[0].__class__(**{**tools[0].__dict__, "description": "something new entirely"})]
        assert store.upsert(changed).embedded == 1 and len(embedder.texts) == 31
    with ToolStore(dsn, embedder=embedder, catalog="two") as other:
        report = other.upsert(tools)  # same texts, same model: all from the Postgres cache
        assert (report.embedded, report.cached, len(embedder.texts)) == (0, 30, 31)
        other.add_examples([IntentExample(tools[1].id, "an example request")])
        other.add_examples([IntentExample(tools[2].id, "an example request")])
        assert embedder.texts.count("an example request") == 1


def test_an_import_builds_each_tools_dense_text_once(dsn: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The first look and the locked write of an import share the dense texts (10k tools' take about 0.2 s); a tool
    changed between the two looks still gets its own text (a re-import of one changed tool)."""
    built: list[str] = []

    def counted(tool: Any) -> str:
        built.append(tool.id)
        return dense_text(tool)

    monkeypatch.setattr(_catalog, "dense_text", counted)
    tools = generated_tools(30, seed=3)
    embedder = Counting()
    with ToolStore(dsn, embedder=embedder, catalog="c") as store:
        assert store.upsert(tools).embedded == 30
        assert sorted(built) == sorted(t.id for t in tools)
        built.clear()
        changed = dataclasses.replace(tools[0], description="something new entirely")
        assert store.upsert([changed, *tools[1:]]).embedded == 1
        assert built == [changed.id] and embedder.texts[-1] == dense_text(changed)


def test_repeated_queries_are_embedded_once_and_routes_write_nothing(dsn: str) -> None:
    embedder = Counting()
    with ToolStore(dsn, embedder=embedder, catalog="q") as store:
        store.upsert(generated_tools(10))
        before = len(embedder.texts)
        with store.connection() as conn:
            cached = conn.execute("select count(*) from embedding_cache").fetchone()
            store.route("send the weekly report")
            store.route("send the weekly report")
            assert conn.execute("select count(*) from embedding_cache").fetchone() == cached
        assert len(embedder.texts) == before + 1


def test_route_runs_on_a_read_only_connection(dsn: str) -> None:
    """No write on the route path at all (a hot standby refuses writes): FakeOpenAI's remote embedder included."""
    with FakeOpenAI() as server:
        embedder = OpenAIEmbedder(dimensions=64, api_key=server.api_key, base_url=server.base_url)
        with ToolStore(dsn, embedder=embedder, catalog="ro") as store:
            store.upsert(generated_tools(20))
        read_only = make_conninfo(dsn, options="-c default_transaction_read_only=on")
        with ToolStore(read_only, embedder=embedder, catalog="ro", migrate=False) as reader:
            for q in ("send the weekly report", "archive old tickets", "send the weekly report"):
                result = reader.route(q, token_budget=2000)
                assert result.dense_used and len(result) > 0


def test_reembed_switches_model_and_dimension_without_dropping(dsn: str) -> None:
    tools = generated_tools(40, seed=2)
    with ToolStore(dsn, embedder=HashingEmbedder(64), catalog="switch") as store:
        store.upsert(tools)
        store.add_examples([IntentExample(t.id, f"please {t.name}") for t in tools[:10]])
        before = store.route("create invoice customer").ids
        calibrated = AbstainModel(coef=(1.0, 1.0, 1.0, 5.0, 5.0), intercept=-3.0, threshold=0.5)
        store.set_abstain(calibrated)  # fitted on hashing-64's similarities
        assert store.reembed(HashingEmbedder(64))["abstain_reset"] is False  # the same model: kept
        assert store.info().settings["abstain"] == calibrated.as_dict()
        report = store.reembed(HashingEmbedder(128))
        assert report["from_model"] == "hashing-64" and report["to_model"] == "hashing-128"
        assert report["abstain_reset"] is True and store.info().settings.get("abstain") is None
        info = store.info()
        assert (info.embed_model, info.embed_dim, info.n_tools, info.n_examples) == ("hashing-128", 128, 40, 10)
        after = store.route("create invoice customer")
        assert after.dense_used and len(after.ids) == len(before)
        assert any(r.signals.dense is not None for r in after)
    with ToolStore(dsn, embedder=HashingEmbedder(64), catalog="switch", create=False) as stale:
        with pytest.raises(ModelMismatchError, match="reembed"):
            stale.route("create invoice")
        with pytest.raises(ModelMismatchError):
            stale.upsert(generated_tools(3, seed=77))


def test_a_reembed_tried_again_reports_what_its_committed_try_did(dsn: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A reembed's write is tried again after a deadlock; the report says what the try that committed did, not what
    a rolled-back one counted: here the first try resets the calibrated abstention model, is a deadlock victim, and
    another writer clears that model before the second try, which so has none to reset."""
    tools = generated_tools(12, seed=5)
    with (
        ToolStore(dsn, embedder=HashingEmbedder(64), catalog="retried") as store,
        ToolStore(dsn, embedder=HashingEmbedder(64), catalog="retried") as other,
    ):
        store.upsert(tools)
        store.set_abstain(AbstainModel(coef=(1.0, 1.0, 1.0, 5.0, 5.0), intercept=-3.0, threshold=0.5))
        writes, locks = [], []
        write_vectors, lock = _reembed.write_tool_vectors, _reembed.lock_catalog

        def deadlocked_once(*args: Any) -> None:
            writes.append(args)
            if len(writes) == 1:
                raise psycopg.errors.DeadlockDetected("deadlock detected")
            write_vectors(*args)

        def locked(conn: Connection[Any], catalog: str) -> Any:
            locks.append(catalog)
            if len(locks) == 2:  # between the tries: the first one rolled back, its lock released
                other.set_abstain(None)
            return lock(conn, catalog)

        monkeypatch.setattr(_reembed, "write_tool_vectors", deadlocked_once)
        monkeypatch.setattr(_reembed, "lock_catalog", locked)
        report = store.reembed(HashingEmbedder(128))
        assert len(writes) == 2 and len(locks) == 2
        assert report["abstain_reset"] is False
        assert (report["tools"], report["examples"]) == (12, 0)
        assert store.info().embed_model == "hashing-128"


def test_openai_embedder_through_the_store_and_no_partial_catalog(dsn: str) -> None:
    with FakeOpenAI() as server:
        embedder = OpenAIEmbedder(
            model="text-embedding-3-small",
            dimensions=256,
            api_key=server.api_key,
            base_url=server.base_url,
            batch_size=10,
            sleep=lambda _: None,
            max_retries=0,
        )
        with ToolStore(dsn, embedder=embedder, catalog="oa") as store:
            tools = generated_tools(35, seed=4)
            server.pass_next(times=2)
            server.fail_next(status=500)  # the third of four batches fails
            with pytest.raises(EmbedderError):
                store.upsert(tools)
            assert "oa" not in [c["name"] for c in store.catalogs()]  # a failed first write creates nothing
            store.upsert(tools)
            assert store.info().embed_model == "openai/text-embedding-3-small@256"
            result = store.route(tools[3].description)
            assert result.dense_used and tools[3].id in result.ids


def test_routing_with_the_local_model_writes_nothing(dsn: str) -> None:
    """The local model embeds a query faster than the Postgres cache answers: route() keeps it in process only."""
    with ToolStore(dsn, embedder=LocalEmbedder(), catalog="local") as store:
        store.upsert(generated_tools(10))
        with store.pool.connection() as conn:
            before = conn.execute("select count(*) from embedding_cache").fetchone()
            requests = [f"send the weekly report number {i}" for i in range(5)]
            assert all(store.route(q).dense_used for q in requests)
            assert conn.execute("select count(*) from embedding_cache").fetchone() == before


def test_the_cache_tells_apart_two_token_limits_under_one_model_name(dsn: str, tmp_path: Path) -> None:
    """A model directory may name its model as another does with another token limit (embedder.json's max_tokens):
    a text between the two limits is whole for one and cut by the other, so neither may be handed the other's
    vector from the shared cache; texts within both limits, and the shipped model's entries, keep their keys. Named as
    the shipped model, the directory's key says it is a model directory's (``#model_dir``): the shipped model's key at
    64 tokens before its key named its build was ``local/all-MiniLM-L6-v2#max_tokens=64``."""
    for name in MODEL_FILES:
        (tmp_path / name).symlink_to(MODEL_DIR / name)
    config = {"model": "local/all-MiniLM-L6-v2", "dim": 384, "max_tokens": 64}
    (tmp_path / "embedder.json").write_text(json.dumps(config))
    full, short = LocalEmbedder(), LocalEmbedder(model_dir=tmp_path)
    assert full.model == short.model
    texts = ["forecast the weather for a city " * 20, "send an email"]  # about 140 tokens, and 4
    with ToolStore(dsn, embedder=full, catalog="full") as store, store.connection() as conn:
        np.testing.assert_allclose(embed_cached(conn, full, texts), full.embed_many(texts), atol=1e-6)
        np.testing.assert_allclose(embed_cached(conn, short, texts), short.embed_many(texts), atol=1e-6)
        np.testing.assert_allclose(embed_cached(conn, full, texts), full.embed_many(texts), atol=1e-6)
        rows = conn.execute("select model, count(*) from embedding_cache group by model order by model").fetchall()
    assert rows == [(SHIPPED, 2), ("local/all-MiniLM-L6-v2#model_dir#max_tokens=64", 2)]
    assert not np.allclose(short.embed_many(texts[:1]), full.embed_many(texts[:1]), atol=1e-3)
    assert (full.cache_key, short.cache_key) == (SHIPPED, "local/all-MiniLM-L6-v2#model_dir#max_tokens=64")


def test_the_shipped_models_max_tokens_is_in_its_cache_key_but_at_its_default(dsn: str) -> None:
    """The shipped model given another ``max_tokens`` (the attribute, set before or after its first use) cuts a long
    text elsewhere: it is not handed the vectors cached at the default limit, whose key is the model and its build."""
    texts = ["forecast the weather for a city " * 20, "send an email"]  # about 140 tokens, and 4
    default, short = LocalEmbedder(), LocalEmbedder()
    short.embed_many(texts)  # its tokenizer made at the default limit
    short.max_tokens = 16
    fresh = LocalEmbedder()
    fresh.max_tokens = 16
    with ToolStore(dsn, embedder=default, catalog="shipped") as store, store.connection() as conn:
        cached = embed_cached(conn, default, texts)
        np.testing.assert_allclose(embed_cached(conn, short, texts), fresh.embed_many(texts), atol=1e-6)
        np.testing.assert_allclose(embed_cached(conn, default, texts), cached, atol=1e-6)
        rows = conn.execute("select model, count(*) from embedding_cache group by model order by model").fetchall()
    assert rows == [(SHIPPED, 2), (f"{SHIPPED}#max_tokens=16", 2)]
    assert not np.allclose(cached[0], fresh.embed_many(texts[:1])[0], atol=1e-3)
    assert (default.cache_key, short.cache_key) == (SHIPPED, f"{SHIPPED}#max_tokens=16")


def test_the_shipped_model_is_not_handed_the_vectors_an_earlier_build_cached(dsn: str) -> None:
    """A rebuild of the shipped model's files (6e0b0fd: its MatMuls quantized, every vector moved) kept its cache
    key, the model alone, so an import was handed the earlier build's cached vectors while route() embedded its
    requests with the new one: one catalog of two models' vectors. Its key names its build now: what another build
    cached, under the model alone or another build, is not read; each tool's stored vector is this model's."""
    tools = generated_tools(3, seed=11)
    embedder = LocalEmbedder()
    expected = embedder.embed_many([dense_text(t) for t in tools])
    planted = "insert into embedding_cache (model, text_sha256, embedding) values (%s, %s, %s::vector)"
    with ToolStore(dsn, embedder=embedder, catalog="rebuilt") as store:
        with store.connection() as conn:
            for key in ("local/all-MiniLM-L6-v2", "local/all-MiniLM-L6-v2#build=000000000000"):
                for tool, vector in zip(tools, expected):
                    wrong = str(np.roll(vector, 1).tolist())  # a unit vector of the width, far from the model's
                    conn.execute(planted, (key, _vectors.text_hash(dense_text(tool)), wrong))
        assert store.upsert(tools).embedded == len(tools)
        with store.connection() as conn:
            rows = conn.execute(
                "select t.id, v.embedding from tool_vectors v join tools t on t.pk = v.tool_pk "
                "where v.catalog_id = %s order by t.id",
                (store.info().id,),
            ).fetchall()
    stored = {tool_id: _vectors.as_array(vector) for tool_id, vector in rows}
    assert sorted(stored) == sorted(t.id for t in tools)
    for tool, vector in zip(tools, expected):
        np.testing.assert_allclose(stored[tool.id], vector, atol=1e-5)


def test_the_shipped_models_build_is_its_files_digest() -> None:
    """MODEL_BUILD, which the shipped model's cache key names, is its files' sha256: a rebuild that forgets to change
    it fails here, before any cache hands its vectors to the other build."""
    digest = hashlib.sha256(b"".join((MODEL_DIR / name).read_bytes() for name in MODEL_FILES)).hexdigest()
    assert MODEL_FILES == ("model.onnx", "tokenizer.json")
    assert MODEL_BUILD == digest[: len(MODEL_BUILD)] and len(MODEL_BUILD) == 12
    assert LocalEmbedder().cache_key == f"{LocalEmbedder.model}#build={digest[:12]}"


def test_compatible_servers_serving_one_model_name_do_not_share_cached_vectors(dsn: str) -> None:
    """OpenAI-compatible servers may serve one model name with another context (a long text one takes whole, the
    other refuses and the embedder cuts) or another native dimension: none is handed another's vectors from the
    shared cache, though all record the same model."""
    texts = ["forecast the weather for a city " * 100, "send an email"]  # about 800 tokens, and 3
    servers = FakeOpenAI(models={"bge": 384}), FakeOpenAI(models={"bge": 384}, max_input_tokens=511)
    servers += (FakeOpenAI(models={"bge": 768}),)
    with servers[0], servers[1], servers[2]:
        embedders = [OpenAIEmbedder(model="bge", api_key=s.api_key, base_url=s.base_url) for s in servers]
        assert {e.model for e in embedders} == {"openai/bge"}
        whole, cut, wider = (e.embed_many(texts) for e in embedders)
        assert not np.allclose(whole[0], cut[0], atol=1e-3) and wider.shape == (2, 768)
        with ToolStore(dsn, embedder=embedders[0], catalog="bge") as store, store.connection() as conn:
            for embedder, expected in zip(embedders, (whole, cut, wider)):
                np.testing.assert_allclose(embed_cached(conn, embedder, texts), expected, atol=1e-6)
            keys = [r[0] for r in conn.execute("select distinct model from embedding_cache order by 1")]
    assert keys == sorted(e.cache_key for e in embedders)


def test_pruning_the_cache_drops_only_entries_no_catalog_reads(dsn: str, tmp_path: Path) -> None:
    """The cache outlives what wrote it: a dropped catalog's model, and a model directory's plain entries an earlier
    release wrote before the key named its max_tokens (orphaned: never read again, not provably its vectors), stay
    until a prune; every key an embedder of a catalog's model reads stays, and is read as before. The shipped model's
    entries at another max_tokens from before its key named its build (``MODEL#max_tokens=N``) were kept while a
    catalog recorded the model, though no embedder reads them: a directory naming its model as the shipped one keys
    its own ``MODEL#model_dir#max_tokens=N``, kept."""
    for directory, model in ((tmp_path / "mini", "local/mini"), (tmp_path / "alike", "local/all-MiniLM-L6-v2")):
        directory.mkdir()
        for name in MODEL_FILES:
            (directory / name).symlink_to(MODEL_DIR / name)
        (directory / "embedder.json").write_text(json.dumps({"model": model, "dim": 384, "max_tokens": 64}))
    tools = generated_tools(4, seed=5)
    with FakeOpenAI() as server:
        remote = OpenAIEmbedder(dimensions=64, api_key=server.api_key, base_url=server.base_url)
        embedders = {"mini": LocalEmbedder(model_dir=tmp_path / "mini"), "hash": Counting(), "remote": remote}
        embedders["alike"] = LocalEmbedder(model_dir=tmp_path / "alike")
        embedders |= {"shipped": LocalEmbedder(), "gone": HashingEmbedder(32)}
        for catalog, embedder in embedders.items():
            with ToolStore(dsn, embedder=embedder, catalog=catalog) as store:
                store.upsert(tools)
        legacy = "insert into embedding_cache select %s, text_sha256, embedding from embedding_cache where model = %s"
        with ToolStore(dsn, embedder=None, catalog="gone", create=False) as store:
            with store.connection() as conn:  # as an earlier release cached them, under the model alone
                for model in ("local/mini", "static/potion", "local/all-MiniLM-L6-v2", f"{SHIPPED_NAME}#max_tokens=32"):
                    conn.execute(legacy, (model, embedders["mini"].cache_key))
                other_build = "local/all-MiniLM-L6-v2#build=000000000000"  # a rebuild's: never read by this one
                for model in (other_build, f"{other_build}#max_tokens=64"):
                    conn.execute(legacy, (model, embedders["mini"].cache_key))
            store.drop_catalog()
            with store.connection() as conn:
                age_cache(conn)
            assert store.prune_cache() == 7 * len(tools)
            assert store.prune_cache() == 0
            with store.connection() as conn:
                keys = {r[0] for r in conn.execute("select distinct model from embedding_cache")}
        assert keys == {e.cache_key for name, e in embedders.items() if name != "gone"}
        remote_key = f"openai/text-embedding-3-small@64#server={server.base_url}"
        assert keys >= {SHIPPED, "local/mini#max_tokens=64", f"{SHIPPED_NAME}#model_dir#max_tokens=64", remote_key}
        embedded = len(embedders["hash"].texts)
        with ToolStore(dsn, embedder=embedders["hash"], catalog="again") as store:
            store.upsert(tools)
        assert len(embedders["hash"].texts) == embedded  # from the cache


def test_a_server_restarted_with_another_dimension_is_not_handed_its_old_vectors(dsn: str) -> None:
    """A compatible server at one address keeps its cache key when restarted serving the model name at another width:
    the vectors it cached before are not handed back (alone or beside new ones) but embedded again, and replace the
    old ones in the cache."""
    texts = ["forecast the weather for a city", "send an email", "book a flight"]
    with FakeOpenAI(models={"bge": 384}) as server:
        before = OpenAIEmbedder(model="bge", api_key=server.api_key, base_url=server.base_url)
        with ToolStore(dsn, embedder=before, catalog="bge") as store, store.connection() as conn:
            assert embed_cached(conn, before, texts[:2]).shape == (2, 384)
            server.models["bge"] = 768  # restarted, same address and model name
            after = OpenAIEmbedder(model="bge", api_key=server.api_key, base_url=server.base_url)
            assert after.cache_key == before.cache_key
            np.testing.assert_allclose(embed_cached(conn, after, texts[:1]), after.embed_many(texts[:1]), atol=1e-6)
            np.testing.assert_allclose(embed_cached(conn, after, texts), after.embed_many(texts), atol=1e-6)
            widths = conn.execute("select vector_dims(embedding), count(*) from embedding_cache group by 1").fetchall()
    assert widths == [(768, 3)]


def test_a_catalog_is_not_written_vectors_of_another_width_than_it_records(dsn: str) -> None:
    """A catalog embedded at one width is not written a vector of another by the same model name (its server
    restarted serving it at another dimension): the write is refused, nothing of it kept, route() answers lexically
    saying why and tuning refuses, until a reembed."""
    tools = generated_tools(6, seed=8)
    with FakeOpenAI(models={"bge": 384}) as server:
        before = OpenAIEmbedder(model="bge", api_key=server.api_key, base_url=server.base_url)
        with ToolStore(dsn, embedder=before, catalog="bge") as store:
            store.upsert(tools[:4])
            store.add_examples([IntentExample(tools[0].id, "what is the weather")])
        server.models["bge"] = 768
        after = OpenAIEmbedder(model="bge", api_key=server.api_key, base_url=server.base_url)
        with ToolStore(dsn, embedder=after, catalog="bge", create=False) as store:
            with pytest.raises(ModelMismatchError, match=r"384 dimensions.*768.*reembed"):
                store.upsert(tools)
            with pytest.raises(ModelMismatchError, match=r"384 dimensions.*768.*reembed"):
                store.add_examples([IntentExample(tools[1].id, "send it by email")])
            info = store.info()
            assert (info.embed_dim, info.n_tools, info.n_examples) == (384, 4, 1)
            routed = store.route(tools[0].description)  # lexical, saying why, as when the embedder fails
            assert not routed.dense_used and tools[0].id in routed.ids
            assert "384 dimensions" in str(routed.degraded_reason) and "reembed" in str(routed.degraded_reason)
            labelled = [(t.description, Judgement(t.id, [t.id])) for t in tools[:4]]
            with pytest.raises(ModelMismatchError, match=r"384 dimensions.*768.*reembed"):  # as route(), not lexically
                store.tune(labelled, save=False)
            assert store.reembed(after)["dim"] == 768
            assert len(store.upsert(tools).inserted) == 2 and store.info().embed_dim == 768
            with store.connection() as conn:
                widths = conn.execute(
                    "select distinct vector_dims(embedding) from tool_vectors where catalog_id = %s", (info.id,)
                ).fetchall()
            assert widths == [(768,)]


def test_a_prune_keeps_what_a_first_import_just_cached_before_recording_its_model(dsn: str) -> None:
    """A catalog's first import caches its vectors before its write records the model: a prune in between keeps them
    (entries younger than CACHE_GRACE), so nothing is embedded again; older entries of that key go."""
    tools = generated_tools(5, seed=9)
    embedder = Counting(48)
    with ToolStore(dsn, embedder=embedder, catalog="first") as store:
        with store.connection() as conn:
            embed_cached(conn, embedder, [dense_text(t) for t in tools])  # the import's first step
        assert store.prune_cache() == 0
        store.upsert(tools)
        assert store.info().embed_model == "hashing-48" and len(embedder.texts) == len(tools)
        store.drop_catalog()
        assert store.prune_cache() == 0
        with store.connection() as conn:
            age_cache(conn)
        assert store.prune_cache() == len(tools)


def test_a_store_switched_to_another_embedder_does_not_route_with_the_old_ones_query_vectors(dsn: str) -> None:
    """route()'s in-process cache of query vectors held them by model name: a store reembedded with another embedder
    of that name (its server restarted at another width, or another server) was handed the old embedder's vectors."""
    tools = generated_tools(8, seed=10)
    request = tools[2].description
    with FakeOpenAI(models={"bge": 384}) as server:
        before = OpenAIEmbedder(model="bge", api_key=server.api_key, base_url=server.base_url)
        with ToolStore(dsn, embedder=before, catalog="bge") as store:
            store.upsert(tools)
            assert store.route(request).dense_used
            server.models["bge"] = 768
            store.reembed(OpenAIEmbedder(model="bge", api_key=server.api_key, base_url=server.base_url))
            asked = len(server.embedding_batches())
            routed = store.route(request)
            assert routed.dense_used, routed.degraded_reason
            assert server.embedding_batches()[asked:] == [[request]]
