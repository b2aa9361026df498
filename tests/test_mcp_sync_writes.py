"""``sync mcp``'s write goes through the store's write path (``Connector.run``), as an import's does: a COMMIT lost
with its connection is settled, not reported as a failure of a write that took effect, and a write whose COMMIT never
took effect is made once more on a fresh connection; either way the tools, their upstream and its record are written
once, together."""

from __future__ import annotations

import pytest
from test_lost_commit import lose_the_next_commit

from toolstore import ToolStore
from toolstore._mcp_sync import McpListing, Upstream, sync_listing
from toolstore._sql import query

LISTED = [
    {"name": "send message", "description": "Send a message to a channel", "inputSchema": {"type": "object"}},
    {"name": "list_channels", "description": "List the channels", "inputSchema": {"type": "object"}},
]
UPSTREAM = Upstream("stdio", command="chat-mcp", args=("--verbose",))


def _written(store: ToolStore) -> tuple[list[tuple[str, str | None]], list[str]]:
    """The catalog's tools with the upstream that synced each, and the providers whose upstream is recorded."""
    with store.connection() as conn:
        info = store.info(counts=False)
        tools = conn.execute("select id, upstream from tools where catalog_id = %s order by id", [info.id]).fetchall()
        providers = [p for p, *_ in conn.execute(query("upstreams"), {"catalog": info.id}).fetchall()]
    return [(i, u) for i, u in tools], providers


@pytest.mark.parametrize("took_effect", [True, False], ids=["took effect", "never took effect"])
def test_a_sync_whose_commit_is_lost_is_written_once(
    dsn: str, monkeypatch: pytest.MonkeyPatch, took_effect: bool
) -> None:
    """The sync wrote through ``store.connection()``, which settles nothing: a COMMIT lost with its connection was a
    DatabaseError ('server closed the connection unexpectedly') even when the sync had taken effect, and one that had
    not was not tried again."""
    with ToolStore(dsn, embedder=None, catalog="chat") as store:
        hit = lose_the_next_commit(monkeypatch, commit=took_effect)
        report = sync_listing(store, McpListing("chat", LISTED, UPSTREAM))
        assert hit
        assert sorted(report.inserted) == ["chat.list_channels", "chat.send message"]
        assert _written(store) == ([("chat.list_channels", "chat"), ("chat.send message", "chat")], ["chat"])
