"""``toolstore route``: route one request; and how a RouteResult is printed (JSON or a table)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import click

from .. import _formats
from .._errors import InvalidInputError
from .._explore import SEED_BITS
from .._filters import filter_values
from .._fusion import DEFAULT_TURNS, SIGNALS, check_weights
from .._input import MAX_K, MAX_TOKEN_BUDGET, MAX_TURNS, MAX_WEIGHT, check_session, read_json
from .._models import JSON_VERSION
from .._result import RouteResult, routed_json
from .._route import check_route
from .._textfile import read_text_file
from .app import ROUTE_FORMATS, command, counted, open_store, options, wants_json, width
from .params import Argument, Number, Readable, ReadFile, checked

_WEIGHTS = "--weights"


def parse_weights(specs: tuple[str, ...]) -> dict[str, float] | None:
    """``name=1,dense=0.5`` (each ``--weights`` given: their pairs together) as a weights mapping, checked as route()
    checks it (None when not given); a usage error names ``--weights``."""
    if not specs:
        return None
    weights: dict[str, float] = {}
    for part in (part for spec in specs for part in spec.split(",")):
        name, sep, value = part.partition("=")
        name = name.strip()
        if not sep:
            raise click.BadParameter(f"{part!r} is no name=value pair (pairs separated by commas)", param_hint=_WEIGHTS)
        if name not in SIGNALS:
            raise click.BadParameter(f"unknown signal {name!r}; known: {', '.join(SIGNALS)}", param_hint=_WEIGHTS)
        if name in weights:
            raise click.BadParameter(f"{name!r} is given twice", param_hint=_WEIGHTS)
        try:
            weights[name] = float(value)
        except ValueError:
            raise click.BadParameter(f"{value!r} is not a number (for {name!r})", param_hint=_WEIGHTS) from None
    try:
        check_weights(weights)
    except InvalidInputError as exc:
        raise click.BadParameter(str(exc), param_hint=_WEIGHTS) from None
    return weights


#: Each signal's heading in the tables that rank tools by signal (``route --explain`` and ``demo``): one short form
#: each, written once, so the two tables say a signal alike.
SIGNAL_HEADINGS = {
    "name": "name",
    "description": "desc",
    "expansion": "expand",
    "dense": "dense",
    "intent": "intent",
    "recent": "recent",
    "transition": "trans",
    "context": "ctx",
}
_RANK_WIDTH = max(len(heading) for heading in SIGNAL_HEADINGS.values())


def signal_headings() -> str:
    """The signals' columns' headings, in :data:`SIGNALS`' order."""
    return " ".join(f"{SIGNAL_HEADINGS[s]:>{_RANK_WIDTH}}" for s in SIGNALS)


def signal_ranks(signals: object) -> str:
    """A tool's rank by each signal (``-``: not found by it), under :func:`signal_headings`."""
    return " ".join(f"{getattr(signals, s) or '-':>{_RANK_WIDTH}}" for s in SIGNALS)


def result_json(result: RouteResult, *, explain: bool = False) -> dict[str, Any]:
    """A RouteResult as the JSON the CLI prints; with ``explain``, ``result.explain()`` as its ``explain`` key."""
    return {
        "version": JSON_VERSION,
        "query": result.query,
        "tools": [routed_json(r) for r in result.tools],
        "skipped": [routed_json(r) for r in result.skipped],
        "tokens_used": result.tokens_used,
        "token_budget": result.token_budget,
        "dense_used": result.dense_used,
        "degraded_reason": result.degraded_reason,
        "session": result.session,
        "unresolved": result.unresolved,
        "sub_requests": result.sub_requests,
        "exploration": result.exploration,
        **({"explain": result.explain()} if explain else {}),
        "abstained": result.abstained,
        **({"abstention": result.abstention.as_dict()} if result.abstention is not None else {}),
    }


def print_table(result: RouteResult, *, explain: bool) -> None:
    """A RouteResult as a table: rank, tool, score, and with ``explain`` each signal's rank."""
    if result.degraded_reason:
        click.echo(f"note: {result.degraded_reason}")
    if result.unresolved:
        click.echo(f"note: tool calls that match no tool: {', '.join(result.unresolved)}")
    if explain and result.sub_requests:
        click.echo("sub-requests: " + " | ".join(f"{i}. {t}" for i, t in enumerate(result.sub_requests, 1)))
    if result.abstention is not None:
        a = result.abstention
        verdict = "abstained: no tool fits the request" if a.abstained else "a tool fits the request"
        click.echo(f"{verdict} (P(served) {a.probability:.2f}, threshold {a.threshold:.2f}, {a.model} model)")
        if explain:
            click.echo("  evidence: " + ", ".join(f"{k} {v:.3f}" for k, v in a.features.items()))
    column = width((r.tool.id for r in result.tools), 40)
    head = f"{'#':>2}  {'tool':<{column}} {'score':>7}"
    if explain:
        head += "  " + signal_headings()
    click.echo(head if result.tools else "no tools")  # a table without rows is no table
    routed = 0
    for r in result.tools:
        routed += 0 if r.always_on else 1
        line = f"{'*' if r.always_on else routed:>2}  {r.tool.id:<{column}} {r.score:7.4f}"
        if explain:
            line += "  " + signal_ranks(r.signals)
            line += f"  part {r.part}" if r.part is not None else ""
        click.echo(line + ("  (explored)" if r.explored else ""))
    if result.skipped:  # every candidate the budget left out: one line, each of them with --explain
        n = len(result.skipped)
        more = "" if explain else " (--explain lists them)"
        click.echo(f"{counted(n, 'tool')} skipped: over the token budget{more}")
    for r in result.skipped if explain else ():
        click.echo(f"    skipped (does not fit the budget): {r.tool.id} ({counted(r.tokens, 'token')})")
    budget = f" of {result.token_budget}" if result.token_budget is not None else ""
    click.echo(f"tokens: {result.tokens_used}{budget}")
    if explain and result.timings:
        click.echo("ms: " + " ".join(f"{stage}={ms:.1f}" for stage, ms in result.timings.items()))


def read_messages_file(path: Readable, request: str | None = None, turns: int | None = None) -> Any:
    """A message list from a JSON file (a list of messages, or an object with ``messages`` or ``input``), read as
    route() reads it with ``request`` and ``turns``: what is wrong with it (a bad message, no user request) is said
    naming the file."""
    data = read_json(read_text_file(path, "messages file"), str(path))
    if isinstance(data, dict):
        data = data.get("messages", data.get("input"))
    if not isinstance(data, list):
        raise InvalidInputError(f"{path}: expected a JSON list of messages (or an object with 'messages')")
    if request is not None:
        check_route(request)  # the request's own errors are not the file's
    try:
        check_route(request, messages=data, turns=turns)
    except InvalidInputError as exc:
        raise InvalidInputError(f"{path}: {exc}") from None
    return data


def _filter_option(flag: str, name: str, help_text: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """A repeatable filter option, ``name`` being route()'s argument it goes to: its values are checked by route()'s
    own check as the option is read, a refusal (an empty value, one too long) a usage error naming the option."""
    check = checked(lambda values: filter_values(name, list(values) or None))
    return click.option(flag, name, multiple=True, callback=check, help=help_text)


@command("route")
@click.argument("request", cls=Argument, required=False, callback=checked(check_route))
@click.option(
    "-k",
    "--k",
    "k",
    default=8,
    show_default=True,
    type=click.IntRange(1, MAX_K),
    help="Routed tools (always-on ones on top).",
)
@click.option(
    "--budget",
    type=click.IntRange(0, MAX_TOKEN_BUDGET),
    help="Token budget for the packed tool definitions, counted as --format gives them (OpenAI's for json and table).",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(ROUTE_FORMATS),
    help="Output: json (default off a terminal), table, or tool definitions.",
)
@click.option(
    "--explain",
    is_flag=True,
    help="Why each tool: each signal's rank in the table (with stage timings and every tool the budget skipped); an "
    "`explain` object in JSON, beside the definitions of --format openai, anthropic or mcp too.",
)
@click.option("--explore", is_flag=True, help="Give the last of the k slots to a tool drawn from ranks k+1..2k.")
@click.option(
    "--seed",
    type=click.IntRange(0, 2**SEED_BITS - 1),
    help="With --explore: the draw's seed (same seed and request, same tool).",
)
@click.option(
    "--weights",
    multiple=True,
    help="Per-signal weights, e.g. name=1,description=1,expansion=1,dense=1,intent=1 (repeatable: the pairs add up; "
    "a signal once).",
)
@click.option(
    "--split",
    type=Number(0, MAX_WEIGHT),
    help=f"Weight of a compound request's sub-requests (each clause retrieved on its own), 0 to {MAX_WEIGHT:g}; 0: "
    "never split. Default: the catalog's tuned value.",
)
@_filter_option("--category", "categories", "Only tools in this category (repeatable).")
@_filter_option("--allow", "allow", "Only these tool ids; * and ? are wildcards: 'slack.*' (repeatable).")
@_filter_option("--block", "block", "Never these tool ids; * and ? are wildcards (repeatable).")
@click.option(
    "--session",
    callback=checked(check_session),
    help="Look back on this session's logged calls (see `toolstore sessions`).",
)
@click.option(
    "--messages",
    "messages_file",
    type=ReadFile("messages"),
    help="A JSON message list (OpenAI or Anthropic; - for stdin): without REQUEST its latest user turn is routed, "
    "with its conversation as context.",
)
@click.option(
    "--turns",
    type=click.IntRange(1, MAX_TURNS),
    help=f"User turns of --messages read (default {DEFAULT_TURNS}; only with --messages).",
)
@click.option(
    "--abstain", is_flag=True, help="Return no routed tool (always-on ones only) when no tool fits the request."
)
@_filter_option("--provider", "providers", "Only tools of this provider (repeatable).")
@_filter_option("--tag", "tags", "Only tools with this tag (repeatable).")
@click.pass_context
def route(
    ctx: click.Context,
    request: str | None,
    k: int,
    budget: int | None,
    fmt: str | None,
    explain: bool,
    explore: bool,
    seed: int | None,
    weights: tuple[str, ...],
    split: float | None,
    categories: tuple[str, ...],
    allow: tuple[str, ...],
    block: tuple[str, ...],
    session: str | None,
    messages_file: Readable | None,
    turns: int | None,
    abstain: bool,
    providers: tuple[str, ...],
    tags: tuple[str, ...],
) -> None:
    """Route REQUEST (or the latest request of --messages): the tools that matter, best first."""
    if request is None and messages_file is None:
        raise click.UsageError("give a REQUEST or --messages FILE")
    if turns is not None and messages_file is None:
        raise click.UsageError("--turns is how many turns of --messages are read: it needs --messages")
    if seed is not None and not explore:
        raise click.UsageError("--seed is the draw's seed: it needs --explore")
    if fmt == "table" and options(ctx)["json"]:
        raise click.UsageError("--format table prints a table and --json JSON: give one of them")
    messages = read_messages_file(messages_file, request, turns) if messages_file else None
    with open_store(ctx, create=False) as store:
        result = store.route(
            request,
            messages=messages,
            session=session,
            turns=turns,
            k=k,
            token_budget=budget,
            weights=parse_weights(weights),
            split=split,
            categories=list(categories) or None,
            allow=list(allow) or None,
            block=list(block) or None,
            explore=explore,
            seed=seed,
            abstain=abstain,
            providers=list(providers) or None,
            tags=list(tags) or None,
            fmt=fmt if fmt in _formats.FORMATS else "openai",  # type: ignore[arg-type]
        )
    if fmt in _formats.FORMATS:
        definitions = {"tools": result.definitions(), **({"explain": result.explain()} if explain else {})}
        click.echo(json.dumps(definitions, indent=2, ensure_ascii=False))
    elif fmt == "table" or (fmt is None and not wants_json(ctx)):
        print_table(result, explain=explain)
    else:
        click.echo(json.dumps(result_json(result, explain=explain), indent=2, ensure_ascii=False))


COMMANDS = (route,)
