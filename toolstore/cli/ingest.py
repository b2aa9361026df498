"""Ingestion and enrichment: ``sync mcp`` and ``expand``."""

from __future__ import annotations

import click

from .._expand import DEFAULT_MODEL, expand, make_client
from .._mcp_sync import fetch_http, fetch_stdio, sync_listing
from .app import command, emit, open_store, options, progress, summary
from .params import Seconds, http_url, not_empty


def _parse_headers(values: tuple[str, ...]) -> dict[str, str]:
    """The --header values by name; a usage error for one that is no 'Name: value', never quoting it (it may be all
    value: a secret)."""
    headers: dict[str, str] = {}
    for i, value in enumerate(values, 1):
        name, sep, content = value.partition(":")
        if not sep or not name.strip():
            raise click.BadParameter(f"#{i} is not 'Name: value' ({_shapeless(':', sep)})", param_hint="--header")
        if name.strip().lower() in {h.lower() for h in headers}:  # HTTP header names are case-insensitive
            raise click.BadParameter(f"{name.strip()!r} is given twice", param_hint="--header")
        headers[name.strip()] = content.strip()
    return headers


def _shapeless(separator: str, found: str) -> str:
    """What a NAME=VALUE-like option's value lacks, said without quoting the value."""
    return f"nothing before its {separator!r}" if found else f"it has no {separator!r}"


@click.group("sync")
def sync_group() -> None:
    """Sync tools from live sources into the catalog."""


@command("mcp", context_settings={"ignore_unknown_options": True})
@click.option("--url", callback=http_url, help="Streamable-HTTP endpoint of the MCP server (instead of a command).")
@click.option(
    "--header", "headers", multiple=True, help="HTTP header 'Name: value' for --url (repeatable, each name once)."
)
@click.option(
    "--provider",
    callback=not_empty,
    help="Namespace for the server's tools; default: the server's name (serverInfo.name).",
)
@click.option("--prune", is_flag=True, help="Remove this provider's tools that the server no longer offers.")
@click.option(
    "--replace-upstream",
    is_flag=True,
    help="The provider's server moved (another command line or URL, other env or header names): record this one.",
)
@click.option(
    "--adopt",
    is_flag=True,
    help="Take over tools of the same ids imported by hand (refused otherwise); --prune may then remove them.",
)
@click.option("--timeout", default=60.0, show_default=True, type=Seconds(), help="Seconds for the whole listing.")
@click.option(
    "--env",
    "env_pairs",
    multiple=True,
    help="NAME=VALUE for a COMMAND server's environment (repeatable, each NAME once); VALUE may be ${VAR}, expanded "
    "at each start.",
)
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
@click.pass_context
def sync_mcp_cmd(
    ctx: click.Context,
    url: str | None,
    headers: tuple[str, ...],
    provider: str | None,
    prune: bool,
    replace_upstream: bool,
    adopt: bool,
    timeout: float,
    env_pairs: tuple[str, ...],
    command: tuple[str, ...],
) -> None:
    """List an MCP server's tools and upsert them: `sync mcp -- COMMAND ARGS...` or `sync mcp --url URL`.

    Unchanged tools are skipped (nothing embedded); one transaction, so on any error nothing is written. How the
    server is reached is recorded for `toolstore serve mcp --gateway`: header and env values are stored as given,
    so write secrets as ${VAR} references (single-quoted in the shell) to keep them out of the database; a value
    that is literally ... is refused, a placeholder. Arguments are stored as given; a secret flag's value among them
    (--token X, --api-key=X) may be a ${VAR} reference too, no other argument.
    A provider has one server: another command line or URL (or other env or header names) whose server reports a name
    already synced from another one is refused (use --provider for a name of its own, or --replace-upstream when the
    server moved). The same with other env or header values, or another value of a secret flag in its arguments (--token
    X, --api-key=X: a rotated secret, or another account's), is recorded when --provider names the provider, and refused
    when the provider is only the server's name. --prune only removes tools this server synced before: a tool imported
    by hand under the provider stays, and one of the same id as a tool the server lists is refused, naming it, unless
    --adopt.
    """
    if command and command[0].startswith("-"):  # unknown options are kept for the server's command: not a first word
        raise click.NoSuchOption(
            command[0], f"No such option: {command[0]} (the server's command comes after --: -- COMMAND ARGS...)"
        )
    if bool(url) == bool(command):
        raise click.UsageError("give either --url URL or -- COMMAND ARGS... (one of them)")
    if headers and not url:
        raise click.UsageError("--header only applies with --url")
    if env_pairs and url:
        raise click.UsageError("--env only applies to a COMMAND server")
    env: dict[str, str] = {}
    for i, pair in enumerate(env_pairs, 1):
        name, sep, value = pair.partition("=")
        if not sep or not name.strip():  # never quoted: it may be all value, a secret
            raise click.BadParameter(f"#{i} is not NAME=VALUE ({_shapeless('=', sep)})", param_hint="--env")
        if name.strip() in env:
            raise click.BadParameter(f"{name.strip()!r} is given twice", param_hint="--env")
        env[name.strip()] = value
    if url:
        listing = fetch_http(url, headers=_parse_headers(headers), timeout=timeout)
    else:
        listing = fetch_stdio(command[0], command[1:], env=env, timeout=timeout)
    with open_store(ctx) as store, progress(ctx, "embedding tools"):
        report = sync_listing(
            store, listing, provider=provider, prune=prune, replace_upstream=replace_upstream, adopt=adopt
        )
    data = {
        "catalog": store.catalog,
        "server": listing.server_name,
        "provider": provider or listing.server_name,
        **report.as_dict(),
    }
    emit(ctx, data, summary(data))


@command("expand")
@click.option("--offline", is_flag=True, help="No model: phrases from names, parameters, examples and intent examples.")
@click.option(
    "--model", default=None, callback=not_empty, help=f"Chat model for LLM phrases (default: {DEFAULT_MODEL})."
)
@click.option(
    "--base-url",
    callback=http_url,
    help="OpenAI-compatible endpoint (http:// or https://), e.g. a local server; the key is then optional.",
)
@click.option(
    "--max-tools",
    type=click.IntRange(min=0),
    help="At most this many model calls in this run (0: none, and no key needed; the rest get offline phrases and "
    "count as remaining).",
)
@click.option("--force", is_flag=True, help="Regenerate every tool, hand-written expansions included.")
@click.option("--concurrency", default=4, show_default=True, type=click.IntRange(min=1), help="Model calls in flight.")
@click.pass_context
def expand_cmd(
    ctx: click.Context,
    offline: bool,
    model: str | None,
    base_url: str | None,
    max_tools: int | None,
    force: bool,
    concurrency: int,
) -> None:
    """Write each tool's expansion (user-language phrases): offline phrases, plus LLM phrases unless --offline.

    The model is asked once per new or changed tool; finished batches are committed, so a re-run resumes.
    """
    if offline and (model or base_url):
        raise click.UsageError("--offline does not call a model; drop --model/--base-url")
    client = None if offline or max_tools == 0 else make_client(base_url=base_url)
    with open_store(ctx, create=False) as store:
        report = expand(
            store,
            client=client,
            model=model or DEFAULT_MODEL,
            offline=offline,
            max_tools=max_tools,
            force=force,
            concurrency=concurrency,
            progress=False if options(ctx).get("quiet") else None,
        )
    data = {"catalog": store.catalog, **report.as_dict()}
    emit(ctx, data, summary(data))


sync_group.add_command(sync_mcp_cmd)
COMMANDS = (sync_group, expand_cmd)
