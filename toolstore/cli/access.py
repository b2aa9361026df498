"""``toolstore grant``, ``revoke`` and ``grants``: which database roles see which catalogs (row-level security)."""

from __future__ import annotations

import click

from .._access import check_role
from .app import command, emit, open_store, options
from .params import checked


@command()
@click.argument("role", callback=checked(check_role))
@click.option("--write", is_flag=True, help="Also let ROLE change the catalog (tools, examples, settings).")
@click.option("--tenant", is_flag=True, help="Make ROLE a tenant role: it sees the catalog its connection names.")
@click.pass_context
def grant(ctx: click.Context, role: str, write: bool, tenant: bool) -> None:
    """Let database role ROLE see the catalog (-c/--catalog); run as the owner of toolstore's tables."""
    with open_store(ctx, create=False) as store:
        store.grant(role, write=write, tenant=tenant)
    catalog = None if tenant else options(ctx)["catalog"]
    data = {"role": role, "catalog": catalog, "write": write}
    emit(
        ctx,
        data,
        lambda: click.echo(f"{role}: {'tenant role' if tenant else catalog}, {'read-write' if write else 'read-only'}"),
    )


@command()
@click.argument("role", callback=checked(check_role))
@click.option("--tenant", is_flag=True, help="Take away the tenant role instead of the catalog.")
@click.pass_context
def revoke(ctx: click.Context, role: str, tenant: bool) -> None:
    """Take the catalog (-c/--catalog) away from database role ROLE."""
    with open_store(ctx, create=False) as store:
        found = store.revoke(role, tenant=tenant)
    data = {"role": role, "catalog": None if tenant else options(ctx)["catalog"], "revoked": found}
    emit(ctx, data, lambda: click.echo(f"{role}: {'revoked' if found else 'had no such grant'}"))


@command()
@click.pass_context
def grants(ctx: click.Context) -> None:
    """List every grant: role, catalog (or tenant role), read-only or read-write."""
    with open_store(ctx, create=False) as store:
        rows = store.grants()

    def human() -> None:
        for r in rows:
            where = r["catalog"] if r["catalog"] is not None else "(tenant role)"
            click.echo(f"{r['role']:<24} {where:<24} {'read-write' if r['write'] else 'read-only'}")

    emit(ctx, {"grants": rows}, human, key="grants", empty="no grants")


COMMANDS = (grant, revoke, grants)
