"""Properties over generated input: whatever route() or an import is given, the outcome is a result or a toolstore
error, never another exception (a driver error, a RecursionError, a UnicodeEncodeError...). Example counts are
bounded so the suite stays fast; hypothesis keeps the failing examples it finds in .hypothesis/."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from toolstore import HashingEmbedder, Tool, ToolStore, ToolstoreError, parse_tools
from toolstore._errors import _URI_RUN, _uri_passwords, redact

from catalog_gen import generated_tools

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])

text = st.text(alphabet=st.characters(codec=None), max_size=60)  # NUL and lone surrogates included
numbers = st.one_of(
    st.integers(min_value=-(10**12), max_value=10**12),
    st.floats(allow_nan=True, allow_infinity=True),
    st.just(10**400),
)
json_values = st.recursive(
    st.one_of(st.none(), st.booleans(), numbers, text),
    lambda children: st.one_of(st.lists(children, max_size=4), st.dictionaries(text, children, max_size=4)),
    max_leaves=20,
)


@pytest.fixture(scope="module")
def routed(server_dsn: str, template_dsn: str) -> Iterator[ToolStore]:
    import uuid

    from conftest import TEMPLATE, create_database, drop_database

    name = f"toolstore_test_props_{uuid.uuid4().hex[:8]}"
    dsn = create_database(server_dsn, name, template=TEMPLATE)
    with ToolStore(dsn, embedder=HashingEmbedder(32), catalog="props") as store:
        store.upsert(generated_tools(60, seed=17))
        yield store
    drop_database(server_dsn, name)


def outcome(call: Any) -> str:
    try:
        call()
    except ToolstoreError:
        return "refused"
    return "ok"


@SETTINGS
@given(
    query=st.one_of(text, st.just("send the weekly report"), st.none(), st.integers()),
    k=st.one_of(st.integers(min_value=-5, max_value=10**10), st.none(), st.booleans()),
    budget=st.one_of(st.none(), st.integers(min_value=-5, max_value=10**12)),
    weights=st.one_of(st.none(), st.dictionaries(st.sampled_from(["name", "dense", "intent", "bogus"]), numbers)),
    k_rrf=st.one_of(st.none(), numbers),
    overfetch=st.one_of(st.none(), st.integers(min_value=-5, max_value=10**10)),
    allow=st.one_of(st.none(), st.lists(text, max_size=3), text),
)
def test_route_returns_or_refuses(
    routed: ToolStore,
    query: Any,
    k: Any,
    budget: Any,
    weights: Any,
    k_rrf: Any,
    overfetch: Any,
    allow: Any,
) -> None:
    kwargs: dict[str, Any] = {"token_budget": budget, "weights": weights, "k_rrf": k_rrf, "overfetch": overfetch}
    if k is not None:
        kwargs["k"] = k
    if allow is not None:
        kwargs["allow"] = allow
    result = outcome(lambda: routed.route(query, **kwargs))
    valid_k = k is None or (isinstance(k, int) and not isinstance(k, bool) and 1 <= k <= 1000)
    if not valid_k or not isinstance(query, str) or (isinstance(k_rrf, float) and not math.isfinite(k_rrf)):
        assert result == "refused"


@SETTINGS
@given(document=json_values)
def test_parsing_any_json_document_returns_tools_or_refuses(document: Any) -> None:
    outcome(lambda: parse_tools(document))
    outcome(lambda: parse_tools({"tools": [document]}))
    outcome(lambda: parse_tools({"name": "x", "parameters": document}))


tools = st.builds(
    Tool,
    id=st.one_of(text, st.just("ok.id")),
    name=st.one_of(text, st.just("ok_name")),
    description=text,
    title=st.one_of(st.none(), text),
    parameters=st.one_of(st.none(), st.dictionaries(text, json_values, max_size=3)),
    keywords=st.lists(text, max_size=3).map(tuple),
    spec=st.one_of(st.none(), st.dictionaries(text, json_values, max_size=3)),
)


@pytest.fixture(scope="module")
def importing(server_dsn: str, template_dsn: str) -> Iterator[ToolStore]:
    import uuid

    from conftest import TEMPLATE, create_database, drop_database

    name = f"toolstore_test_props_{uuid.uuid4().hex[:8]}"
    dsn = create_database(server_dsn, name, template=TEMPLATE)
    with ToolStore(dsn, embedder=HashingEmbedder(32), catalog="imports") as store:
        yield store
    drop_database(server_dsn, name)


@SETTINGS
@given(batch=st.lists(tools, min_size=1, max_size=3))
def test_upserting_any_tools_writes_them_or_refuses(importing: ToolStore, batch: list[Tool]) -> None:
    if outcome(lambda: importing.upsert(batch)) == "ok":
        stored = {t.id: t for t in importing.tools([t.id for t in batch])}
        for tool in batch:
            assert json.dumps(stored[tool.id].parameters, sort_keys=True) == json.dumps(tool.parameters, sort_keys=True)


# The URI password rule as it was before redact read it run by run (scheme of any length, the whole text at once).
_URI_PASSWORD_BEFORE = re.compile(r"(?i)(\b[a-z][a-z0-9+.\-]*://[^\s:/@\"']*:)[^\s\"']*@")


@settings(max_examples=300, deadline=None)
@given(
    pieces=st.lists(
        st.sampled_from(["postgres", "git+ssh", "a", "-", "://", ":", "@", "/", " ", '"', "'", "u", "pw", "x.y", "1"]),
        max_size=24,
    )
)
def test_a_uris_password_is_redacted_as_the_whole_text_rule_does(pieces: list[str]) -> None:
    """redact() reads a URI's password run by run (of characters without space or quote), up to each run's last '@':
    the whole-text rule took seconds on 40,000 characters of 'a-a-...' or 'a://a://...' (read again from each start).
    It hides what the whole-text rule did, on any text of such pieces (schemes up to 64 characters)."""
    text = "".join(pieces)
    assert _URI_RUN.sub(_uri_passwords, text) == _URI_PASSWORD_BEFORE.sub(r"\1[redacted]@", text)
    assert redact(f"{text} postgres://u:hunter2@h").endswith(" postgres://u:[redacted]@h")  # as redact() applies it
