"""The global options (``--dsn``, ``--catalog/-c``, ``--schema``, ``--embedder``, ``--statement-timeout``,
``--transaction-pooling``, ``--json``, ``--quiet``): the group's, with their defaults and environment variables, and
each command's, so that they work before the subcommand and after it; a value given after the subcommand wins. Each
is checked as it is read (``params.checked``) and recorded in the context's shared ``obj``, which ``app.options``
reads."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from .._dsn import check_dsn
from .._embedders.factory import SPECS, check_spec
from .._input import check_catalog_name
from .._migrate import DEFAULT_SCHEMA, check_schema_name
from .._steps import MAX_STATEMENT_TIMEOUT
from .._store import DEFAULT
from .params import Seconds, SourcedOption, checked

F = TypeVar("F", bound=Callable[..., Any])


def _remember(name: str, *, group: bool) -> Callable[[click.Context, click.Parameter, Any], Any]:
    """An option callback that records the value in the shared ``ctx.obj``: every value at the group level (its
    default included), only values the user gave at the subcommand level."""

    def callback(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
        obj = ctx.ensure_object(dict)
        given = ctx.get_parameter_source(param.name or "") not in (click.core.ParameterSource.DEFAULT, None)
        if group or given:
            obj[name] = value
        return value

    return callback


def _given_dsn(remember: Callable[[click.Context, click.Parameter, Any], Any]) -> Callable[..., Any]:
    """The --dsn callback: an empty value (a script's unset variable) is refused, not taken for no DSN (which would
    open the embedded server: another database); $TOOLSTORE_DSN empty is unset, as click reads it."""

    def callback(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
        if value is not None and not value.strip():
            raise click.BadParameter(
                "it is empty: give a Postgres DSN, or leave --dsn out for $TOOLSTORE_DSN or the embedded server",
                ctx,
                param,
            )
        return checked(check_dsn, remember)(ctx, param, value)

    return callback


def _option(*names: str, **settings: Any) -> Callable[[F], F]:
    """``click.option`` of a :class:`SourcedOption`."""
    return click.option(*names, cls=SourcedOption, **settings)


def global_options(*, group: bool = False) -> Callable[[F], F]:
    """The global options, for the group (with defaults and environment variables) or for one subcommand."""

    def defaults(value: Any) -> Any:
        return value if group else None

    options = [
        _option(
            "--dsn",
            envvar="TOOLSTORE_DSN" if group else None,
            help="Postgres DSN; default: $TOOLSTORE_DSN, else the embedded server.",
            callback=_given_dsn(_remember("dsn", group=group)),
            expose_value=False,
        ),
        _option(
            "--catalog",
            "-c",
            envvar="TOOLSTORE_CATALOG" if group else None,
            show_envvar=group,
            default=defaults(DEFAULT),
            show_default=group,
            help="Catalog to work on.",
            callback=checked(check_catalog_name, _remember("catalog", group=group)),
            expose_value=False,
        ),
        _option(
            "--schema",
            envvar="TOOLSTORE_SCHEMA" if group else None,
            show_envvar=group,
            default=defaults(DEFAULT_SCHEMA),
            show_default=group,
            help="Postgres schema holding toolstore's tables.",
            callback=checked(check_schema_name, _remember("schema", group=group)),
            expose_value=False,
        ),
        _option(
            "--embedder",
            envvar="TOOLSTORE_EMBEDDER" if group else None,
            show_envvar=group,
            default=defaults("local"),
            show_default=group,
            help=(
                f"{SPECS}: local is the shipped MiniLM, local:DIR a model exported by "
                "scripts/build_candidate_model.py, static:DIR a static model written by "
                "scripts/build_static_model.py, hashing a test double, none lexical only."
            ),
            callback=checked(check_spec, _remember("embedder", group=group)),
            expose_value=False,
        ),
        _option(
            "--statement-timeout",
            envvar="TOOLSTORE_STATEMENT_TIMEOUT" if group else None,
            show_envvar=group,
            type=Seconds(MAX_STATEMENT_TIMEOUT),
            help="Seconds each statement of a route may run before Postgres cancels it (default: no limit; set one "
            "when others, such as tenants, write the catalogs routed).",
            callback=_remember("statement_timeout", group=group),
            expose_value=False,
        ),
        _option(
            "--transaction-pooling",
            envvar="TOOLSTORE_TRANSACTION_POOLING" if group else None,
            show_envvar=group,
            is_flag=True,
            help="The DSN is a pooler in transaction mode (PgBouncer's pool_mode = transaction): prepare nothing, set "
            "the session in each transaction.",
            callback=_remember("transaction_pooling", group=group),
            expose_value=False,
        ),
        _option(
            "--json",
            "json_",
            is_flag=True,
            help="Always print JSON (the default when stdout is not a terminal).",
            callback=_remember("json", group=group),
            expose_value=False,
        ),
        _option(
            "--quiet",
            "-q",
            is_flag=True,
            help="No progress bars or notes on stderr (errors still print).",
            callback=_remember("quiet", group=group),
            expose_value=False,
        ),
    ]

    def decorate(fn: F) -> F:
        for option in reversed(options):
            fn = option(fn)
        return fn

    return decorate
