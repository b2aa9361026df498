"""``toolstore eval`` and ``toolstore tune``: benchmark routing quality (labelled queries, or labelled sessions replayed
turn by turn) and learn fusion weights."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click

from .._errors import InvalidInputError, UnknownCatalogError
from .._eval import SESSION_CONFIGS, evaluate, evaluate_sessions, format_table, select_configs
from .._examples import load_examples, session_examples
from .._formats import load_tools_file
from .._input import MAX_K
from .._metrics import Judgement, LabelledSession, load_judgements, load_sessions
from .._store import ToolStore
from .._tune import tune
from .app import command, emit, note, open_store, options, reading
from .params import Readable, ReadFile, Written
from .report import columns_at, degraded_warning, relabel, summary_line, tune_summary, write_report


def _judgements(path: Readable) -> list[tuple[str, Judgement]]:
    """(query, Judgement) pairs of a queries/train JSONL file; InvalidInputError when malformed or empty."""
    pairs = load_judgements(path)  # InvalidInputError naming the file and line: _input.json_lines
    if not pairs:
        raise InvalidInputError(f"{path}: no queries found")
    return pairs


def _sessions(path: Readable) -> list[LabelledSession]:
    sessions = load_sessions(path)
    if not sessions:
        raise InvalidInputError(f"{path}: no sessions found")
    return sessions


def _check_tool_ids(tools_file: Readable, tools: Sequence[Any], labelled: dict[Readable, Sequence[Any]]) -> None:
    """Every tool id the labelled files name is one of ``tools_file``'s, before anything is written (the store's own
    check named the scratch catalog, ``eval-...``, which the user never gave): InvalidInputError naming the file, the
    first unknown ids and the query or session of each."""
    ids = {t.id for t in tools}
    for path, items in labelled.items():
        unknown: dict[str, str] = {}
        for item in items:
            if isinstance(item, LabelledSession):
                named = [(t, item.sid) for turn in item.turns for t in (*turn.relevant, *turn.calls)]
            else:
                named = [(t, item[1].qid) for t in item[1].acceptable]
            for tool_id, where in named:
                if tool_id not in ids:
                    unknown.setdefault(tool_id, where)
        if unknown:
            shown = ", ".join(f"{t!r} (in {w!r})" for t, w in list(unknown.items())[:5])
            raise InvalidInputError(f"{path} names {len(unknown)} tool id(s) not in {tools_file}: {shown}")


def _drop_scratch(store: ToolStore) -> None:
    """Drop the scratch catalog; none is there when its first write failed (one transaction: nothing written)."""
    try:
        store.drop_catalog()
    except UnknownCatalogError:
        pass


@command("eval")
@click.option(
    "--tools",
    "tools_file",
    required=True,
    type=ReadFile("tools"),
    help="The tools routed among (a file `import` reads). Each file option takes - for stdin (one of them).",
)
@click.option(
    "--queries", "queries_file", type=ReadFile("labelled requests"), help="Labelled requests (queries.jsonl format)."
)
@click.option(
    "--sessions",
    "sessions_file",
    type=ReadFile("labelled sessions"),
    help="Labelled sessions (bfcl_sessions format), replayed turn by turn.",
)
@click.option(
    "--train",
    "train_file",
    type=ReadFile("labelled requests"),
    help="Labelled requests (train.jsonl format): stored as intent examples, and tuned on with --tune.",
)
@click.option(
    "--train-sessions",
    "train_sessions_file",
    type=ReadFile("labelled sessions"),
    help="Labelled sessions: logged (transitions), their turns stored as intent examples, tuned on with --tune.",
)
@click.option("--no-examples", is_flag=True, help="Do not store --train-sessions' turns as intent examples.")
@click.option("--config", "config_names", multiple=True, help="Config to evaluate (repeatable); default: all.")
@click.option(
    "--tune",
    "do_tune",
    is_flag=True,
    help="Fit fusion weights on --train / --train-sessions (never on what is evaluated) and add config 'tuned'.",
)
@click.option(
    "-k",
    "--k",
    "k",
    default=10,
    show_default=True,
    type=click.IntRange(1, MAX_K),
    help="Tools per query; under 10, metrics are named at k (R@3, not R@10: they count the k tools routed, "
    "always-on tools left out), but nDCG@10 (its ideal counts up to 10 relevant tools).",
)
@click.option("--seed", default=0, show_default=True, type=click.IntRange(min=0), help="Seed of the tuning folds.")
@click.option(
    "--report",
    "report_dir",
    type=Written(file_okay=False),
    help="Write eval.md here (and eval.png, its chart, with the [plot] extra: matplotlib).",
)
@click.option(
    "--keep",
    is_flag=True,
    help="Keep the scratch catalog (its name is printed; `toolstore drop-catalog NAME` drops it later) instead of "
    "dropping it.",
)
@click.pass_context
def eval_(
    ctx: click.Context,
    tools_file: Readable,
    queries_file: Readable | None,
    sessions_file: Readable | None,
    train_file: Readable | None,
    train_sessions_file: Readable | None,
    no_examples: bool,
    config_names: tuple[str, ...],
    do_tune: bool,
    k: int,
    seed: int,
    report_dir: Path | None,
    keep: bool,
) -> None:
    """Evaluate routing in a scratch catalog: labelled queries under several fusion configs, or labelled sessions
    replayed turn by turn (configs turn, session, tuned)."""
    if (queries_file is None) == (sessions_file is None):
        raise click.UsageError("give --queries or --sessions (one of them)")
    if do_tune and train_file is None and train_sessions_file is None:
        raise click.UsageError(
            "--tune needs --train or --train-sessions: weights are never fitted on what is evaluated"
        )
    if sessions_file is not None:
        names = list(dict.fromkeys(config_names)) or [c for c in SESSION_CONFIGS if do_tune or c != "tuned"]
        unknown = [n for n in names if n not in SESSION_CONFIGS]
        if unknown:
            raise click.BadParameter(
                f"unknown config(s) {', '.join(map(repr, unknown))} for sessions; known: {', '.join(SESSION_CONFIGS)}",
                param_hint="'--config'",
            )
        configs: Any = names
    else:
        try:
            configs = select_configs(config_names or None, tuned=do_tune)
        except InvalidInputError as exc:
            raise click.BadParameter(str(exc), param_hint="'--config'") from None
    if "tuned" in configs and not do_tune:
        raise click.UsageError("config 'tuned' needs --tune (and --train or --train-sessions)")
    tools = load_tools_file(tools_file)
    queries = _judgements(queries_file) if queries_file else None
    sessions = _sessions(sessions_file) if sessions_file else None
    train = _judgements(train_file) if train_file else []
    train_sessions = _sessions(train_sessions_file) if train_sessions_file else []
    examples = load_examples(train_file) if train_file else []
    if train_sessions and not no_examples:
        examples += session_examples(train_sessions)
    files = {queries_file: queries, sessions_file: sessions, train_file: train, train_sessions_file: train_sessions}
    _check_tool_ids(tools_file, tools, {path: items for path, items in files.items() if path and items})
    if report_dir is not None:  # a directory that cannot be made fails now, not after the whole evaluation
        report_dir.mkdir(parents=True, exist_ok=True)
    catalog = f"eval-{uuid.uuid4().hex[:12]}"
    bars = not options(ctx).get("quiet")  # tqdm bars on a terminal, as the other commands' progress()
    with open_store(ctx, catalog=catalog) as store:
        if examples and store.embedder is None:
            raise InvalidInputError("training data is stored as intent examples, which need an embedder")
        written = False  # the scratch catalog holds all its tools, examples and sessions
        try:
            store.upsert(tools)
            if examples:
                store.add_examples(examples)
            if train_sessions:
                store.import_sessions((s.sid, s.calls) for s in train_sessions)
            written = True
            store.analyze()
            tuned = tune(store, train, sessions=train_sessions, seed=seed) if do_tune else None
            if sessions is not None:
                result = evaluate_sessions(store, sessions, configs=configs, k=k, progress=bars)
            else:
                assert queries is not None
                result = evaluate(store, queries, configs=configs, k=k, progress=bars)
            if tuned is not None:
                result["tune"] = tuned.as_dict()
            if keep:
                result["catalog"] = catalog
        except BaseException:
            if keep and written:  # kept as the failed run left it: its name is said, as a whole run's is
                click.echo(f"catalog kept: {catalog} (--keep; the run failed after writing it)", err=True)
            raise
        finally:
            if not (keep and written):  # a catalog half written is never kept
                _drop_scratch(store)
    relabel(result, k)
    result["k"] = k
    warning = degraded_warning(result)
    if warning:  # loud: not a note that --quiet drops
        click.echo(warning, err=True)
    title = f"{Path(tools_file).parent.name or 'eval'}: {Path(queries_file or sessions_file).name}"  # type: ignore[arg-type]
    for remark in write_report(report_dir, result, title, k) if report_dir else []:
        note(ctx, f"note: {remark}")

    def human() -> None:
        kept = f", catalog kept: {catalog}" if keep else ""
        click.echo(summary_line(result) + kept)
        click.echo(format_table(result, columns_at(result, k)[0]))
        if tuned is not None:
            click.echo(tune_summary(result["tune"]))

    emit(ctx, result, human)


@command("tune")
@click.option(
    "--examples",
    "examples_file",
    type=ReadFile("labelled requests"),
    help="Labelled requests, train.jsonl format ({qid, query, relevant, acceptable}). Each file option takes - for "
    "stdin (one of them).",
)
@click.option(
    "--sessions",
    "sessions_file",
    type=ReadFile("labelled sessions"),
    help="Labelled sessions, train_sessions.jsonl format: turns tuned on with the conversation so far.",
)
@click.option(
    "--negatives",
    "negatives_file",
    type=ReadFile("negative requests"),
    help="Requests no tool of the catalog fits (JSON Lines with 'query', or one request per line): calibrates "
    "abstention against --examples and stores it beside the fusion.",
)
@click.option(
    "--seed", default=0, show_default=True, type=click.IntRange(min=0), help="Seed of the cross-validation folds."
)
@click.option("--folds", default=5, show_default=True, type=click.IntRange(min=2), help="Cross-validation folds.")
@click.option("--dry-run", is_flag=True, help="Report what would be stored without storing it.")
@click.pass_context
def tune_(
    ctx: click.Context,
    examples_file: Readable | None,
    sessions_file: Readable | None,
    negatives_file: Readable | None,
    seed: int,
    folds: int,
    dry_run: bool,
) -> None:
    """Learn the catalog's fusion weights from labelled requests and/or sessions (-c/--catalog) and store them.
    Sessions tune the conversation signals too; their transitions come from the file, not the catalog's log."""
    if negatives_file is not None and examples_file is None:
        raise click.UsageError("--negatives needs --examples: abstention is calibrated on both")
    if examples_file is None and sessions_file is None:
        raise click.UsageError("give --examples or --sessions (or both)")
    examples = _judgements(examples_file) if examples_file else []
    sessions = _sessions(sessions_file) if sessions_file else []
    labelled = [f for f in (examples_file, sessions_file, negatives_file) if f is not None]
    with open_store(ctx, create=False) as store, reading(labelled[0] if len(labelled) == 1 else None):
        report = tune(
            store, examples, sessions=sessions, seed=seed, folds=folds, save=not dry_run, negatives=negatives_file
        ).as_dict()
    report["catalog"] = options(ctx)["catalog"]
    report["stored"] = not dry_run
    note = "\n  (dry run: nothing stored)" if dry_run else ""
    emit(ctx, report, lambda: click.echo(tune_summary(report) + note))


COMMANDS = (eval_, tune_)
