"""``toolstore sessions``: the catalog's session log (import, list, show, prune, retention) and what it taught."""

from __future__ import annotations

import math
import re
import sys
from datetime import timedelta

import click

from .._errors import InvalidInputError
from .._input import check_session
from .._metrics import load_sessions
from .._retention import MAX_AGE_DAYS, MAX_RETENTION_CALLS, MIN_RETENTION_AGE
from .._session_reads import MAX_LIMIT
from .app import ask, command, emit, note, open_store, plural, reading, summary, wants_json, width
from .params import Readable, ReadFile, checked, not_empty

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw]?)\s*$")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks", "": "days"}
MIN_DAYS = MIN_RETENTION_AGE / timedelta(days=1)  # the shortest retention age, in days
_CALLS = f"calls, from 1 to {MAX_RETENTION_CALLS:,}"
_DAYS = f"days, from 1 second (1/86,400 of a day) to {MAX_AGE_DAYS:,}"


def parse_duration(text: str, what: str = "--older-than", *, positive: bool = False) -> timedelta:
    """``30d``, ``12h``, ``90m``, ``45s``, ``2w`` (a bare number is days; with ``positive``, over 0; at most the
    library's :data:`MAX_AGE_DAYS`); a usage error names the option ``what``."""
    match = _DURATION.match(text)
    try:
        duration = timedelta(**{_UNITS[match.group(2)]: float(match.group(1))}) if match else None
    except OverflowError:
        duration = timedelta.max
    if duration is not None and duration > timedelta(days=MAX_AGE_DAYS):  # else the library's older_than names it
        raise click.BadParameter(f"{text!r} is too long: at most {MAX_AGE_DAYS:,} days", param_hint=what)
    if duration is not None and (duration > timedelta(0) or not positive):
        return duration
    over = " over 0" if positive else ""
    raise click.BadParameter(f"{text!r} is not a duration{over} like 30d, 12h, 90m or 2w", param_hint=what)


def _limit(value: str, what: str, kind: type[int] | type[float]) -> int | float | None:
    """A retention limit in the library's range: a whole number of calls (``int``) or a number of days (``float``),
    or ``none`` for no limit; a usage error names the option ``what``."""
    if value.strip().lower() == "none":
        return None
    low, high, span = (1, MAX_RETENTION_CALLS, _CALLS) if kind is int else (MIN_DAYS, MAX_AGE_DAYS, _DAYS)
    try:
        number = kind(value)
        if math.isfinite(number) and low <= number <= high:
            return number
    except ValueError:
        pass
    wanted = "a whole number" if kind is int else "a number"
    raise click.BadParameter(f"{value!r} is not {wanted} or 'none' ({span})", param_hint=what)


@click.group("sessions")
def sessions_group() -> None:
    """The session log: the tool calls of each conversation, which route(..., session=...) looks back on and from
    which the catalog learns tool-to-tool transitions. Only tool ids and times are stored, never user text."""


@command("import")
@click.argument("file", type=ReadFile("sessions"))
@click.pass_context
def import_(ctx: click.Context, file: Readable) -> None:
    """Log the calls of labelled sessions from FILE (bfcl_sessions format: {"sid", "turns": [{"query", "calls":
    [...]}]}). A session already in the log is replaced, so importing twice logs once; all or nothing. FILE - is
    stdin."""
    sessions = load_sessions(file)
    if not sessions:
        raise InvalidInputError(f"{file}: no sessions found")
    with open_store(ctx, create=False) as store, reading(file):
        report = store.import_sessions((s.sid, s.calls) for s in sessions)
    emit(ctx, report, summary(report))


@command("list")
@click.option(
    "--limit", default=100, show_default=True, type=click.IntRange(1, MAX_LIMIT), help="At most this many sessions."
)
@click.pass_context
def list_(ctx: click.Context, limit: int) -> None:
    """The logged sessions, most recently written first."""
    with open_store(ctx, create=False) as store:
        rows = store.sessions(limit=limit)

    def human() -> None:
        column = width((r["session_id"] for r in rows), 48)
        for r in rows:
            last = r["last_call"].isoformat(timespec="seconds") if r["last_call"] else "-"
            click.echo(f"{r['session_id']:<{column}} {r['calls']:>6} {plural(r['calls'], 'call'):<5}  last {last}")

    emit(ctx, rows, human, key="sessions", empty=f"no sessions logged in catalog {store.catalog!r}")


@command("show")
@click.argument("session", callback=checked(check_session))
@click.pass_context
def show(ctx: click.Context, session: str) -> None:
    """The calls SESSION logged, oldest first. A session whose calls were all pruned (kept for the call ids it has
    seen) shows none, exit 0; a session not in the catalog is an error (exit 1)."""
    with open_store(ctx, create=False) as store:
        calls = store.session_log(session)
        known = bool(calls) or store.has_session(session)
    if not known:
        raise InvalidInputError(
            f"no session {session!r} in catalog {store.catalog!r} (`toolstore sessions list` lists the sessions)"
        )
    rows = [{"seq": c.seq, "tool": c.tool_id, "ok": c.ok, "at": c.at.isoformat(), "call_id": c.call_id} for c in calls]

    def human() -> None:
        for c in calls:
            click.echo(f"{c.seq:>5}  {c.at.isoformat(timespec='seconds')}  {c.tool_id}{'' if c.ok else '  (failed)'}")

    pruned = f"no logged calls of session {session!r} (pruned: kept for the call ids it has seen)"
    emit(ctx, {"session": session, "calls": rows}, human, key="calls", empty=pruned)


@command("prune")
@click.option(
    "--older-than",
    help="Delete calls older than this (30d, 12h, 90m, 2w; 0, every call of the catalog, asks first or needs --yes); "
    "default: the retention age.",
)
@click.option(
    "--session",
    callback=checked(check_session),
    help="Forget this session (all its calls), or delete its calls --older-than.",
)
@click.option("--forget-idle", help="Also forget every session not written to for this long (90d); not with --session.")
@click.option(
    "--yes",
    "-y",
    is_flag=True,
    help="Delete every call (--older-than 0) without asking: needed when not on a terminal, or with --json.",
)
@click.pass_context
def prune(ctx: click.Context, older_than: str | None, session: str | None, forget_idle: str | None, yes: bool) -> None:
    """Delete logged calls (and those past the retention's --max-calls in their session); the transition counts
    follow. A session left empty stays when it remembers call ids it has seen (so an agent's message list does not
    log those calls again), else it goes; --session alone forgets the session entirely, and --forget-idle 90d
    forgets (row and calls) every session whose last write (a logged call or an import) is older than 90 days. Run it
    from cron when the catalog has a retention age (`toolstore sessions retention --max-age-days N`) or to forget idle
    sessions; `sessions` counts the sessions that went, forgotten ones included. A --session not in the log prunes
    nothing and says so (on stderr; `session_found` false in JSON), exit 0. --older-than 0 deletes every logged call
    of the catalog (of --session's alone with it), as prune_sessions(older_than=timedelta(0)) does: without --session
    it asks first on a terminal, and elsewhere (piped, --json) needs --yes."""
    if forget_idle is not None and session is not None:
        raise click.UsageError("--forget-idle forgets every idle session of the catalog: give it without --session")
    age = parse_duration(older_than) if older_than is not None else None
    idle = parse_duration(forget_idle, "--forget-idle", positive=True) if forget_idle is not None else None
    every = age == timedelta(0) and session is None and not yes
    asks = every and sys.stdin.isatty() and not wants_json(ctx)
    if every and not asks:
        raise click.UsageError(
            "--older-than 0 deletes every logged call: it needs --yes when not asked on a terminal", ctx
        )
    with open_store(ctx, create=False) as store:
        if asks:
            ask(f"delete every logged call of catalog {store.catalog!r}?")
        found = session is None or store.has_session(session)  # before: a prune may forget it
        report = store.prune_sessions(older_than=age, session=session, forget_idle=idle)
    emit(ctx, report if session is None else {**report, "session_found": found}, summary(report))
    if not found and not wants_json(ctx):  # exit 0 all the same: a script may forget a session twice
        note(ctx, f"no session {session!r} in catalog {store.catalog!r}: nothing of it to prune")


@command("retention")
@click.option("--max-calls", help=f"Calls kept per session (the newest), 1 to {MAX_RETENTION_CALLS:,}, or 'none'.")
@click.option("--max-age-days", help=f"Days a call is kept (over 1 second, at most {MAX_AGE_DAYS:,}), or 'none'.")
@click.pass_context
def retention(ctx: click.Context, max_calls: str | None, max_age_days: str | None) -> None:
    """Show the catalog's retention of its session log, or set it (both limits apply at each write to a session,
    and to every session by `toolstore sessions prune`)."""
    with open_store(ctx, create=False) as store:
        if max_calls is not None or max_age_days is not None:
            current = store.session_retention()
            calls = current["max_calls"] if max_calls is None else _limit(max_calls, "--max-calls", int)
            days = current["max_age_days"] if max_age_days is None else _limit(max_age_days, "--max-age-days", float)
            store.set_session_retention(max_calls=calls, max_age_days=days)  # type: ignore[arg-type]
        report = store.session_retention()
    emit(ctx, report, summary(report))


@command("transitions")
@click.option("--from", "prev", callback=not_empty, help="Only transitions from this tool id.")
@click.option(
    "--limit", default=50, show_default=True, type=click.IntRange(1, MAX_LIMIT), help="At most this many transitions."
)
@click.pass_context
def transitions(ctx: click.Context, prev: str | None, limit: int) -> None:
    """The learned transition counts: how often one tool was called right after another, most frequent first."""
    with open_store(ctx, create=False) as store:
        rows = store.transitions(prev=prev, limit=limit)

    def human() -> None:
        for r in rows:
            click.echo(f"{r['n']:>7}  {r['prev_tool']} -> {r['next_tool']}")

    origin = f" from {prev!r}" if prev is not None else ""
    emit(ctx, rows, human, key="transitions", empty=f"no transitions{origin} learned in catalog {store.catalog!r}")


for _command in (import_, list_, show, prune, retention, transitions):
    sessions_group.add_command(_command)
COMMANDS = (sessions_group,)
