"""``toolstore eval`` and ``toolstore tune``: benchmark routing quality and learn fusion weights."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import click

from .._errors import InvalidInputError
from .._eval import evaluate, format_table, select_configs
from .._examples import load_examples
from .._formats import load_tools_file
from .._metrics import Judgement, load_judgements
from .._tune import tune
from .app import command, emit, open_store, options

CHART_METRICS = ("nDCG@10", "R@10", "multi comp@10")
FILE = click.Path(exists=True, dir_okay=False, path_type=Path)


def _judgements(path: Path) -> list[tuple[str, Judgement]]:
    """(query, Judgement) pairs of a queries/train JSONL file; InvalidInputError when malformed or empty."""
    try:
        pairs = load_judgements(path)
    except (ValueError, TypeError) as exc:
        raise InvalidInputError(str(exc)) from None
    if not pairs:
        raise InvalidInputError(f"{path}: no queries found")
    return pairs


def _tune_summary(report: dict[str, Any]) -> str:
    weights = ", ".join(f"{k}={v:g}" for k, v in report["fusion"]["weights"].items())
    fusion = report["fusion"]
    note = " (fell back to uniform: tuning did not beat it under cross-validation)" if report["fell_back"] else ""
    return (
        f"tuned on {report['n_examples']} examples in {report['seconds']:.1f} s{note}\n"
        f"  CV nDCG@10: uniform {report['cv_ndcg_uniform']:.4f}, tuned {report['cv_ndcg_tuned']:.4f}\n"
        f"  stored: {weights}, k_rrf={fusion['k_rrf']:g}, overfetch={fusion['overfetch']}"
    )


def write_report(directory: Path, result: dict[str, Any], title: str) -> list[str]:
    """Write ``eval.md`` (and ``eval.png`` when matplotlib is installed) into ``directory``; returns notes."""
    directory.mkdir(parents=True, exist_ok=True)
    text = [
        f"# {title}",
        "",
        f"{result['n_queries']} queries, {result['n_tools']} tools",
        "",
        format_table(result, markdown=True),
    ]
    if "tune" in result:
        text += ["", "```", _tune_summary(result["tune"]), "```"]
    (directory / "eval.md").write_text("\n".join(text) + "\n", encoding="utf-8")
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return ["matplotlib is not installed (pip install 'toolstore[plot]'): wrote eval.md without the chart"]
    names = list(result["configs"])
    fig, ax = plt.subplots(figsize=(max(6, 1.1 * len(names)), 4))
    width = 0.8 / len(CHART_METRICS)
    for i, metric in enumerate(CHART_METRICS):
        values = [result["configs"][n].get(metric) or 0.0 for n in names]
        ax.bar([x + i * width for x in range(len(names))], values, width, label=metric)
    ax.set_xticks([x + width for x in range(len(names))], names, rotation=30, ha="right")
    ax.set_ylim(0, 1)
    ax.set_title(title)
    ax.legend()
    fig.tight_layout()
    fig.savefig(directory / "eval.png", dpi=120)
    plt.close(fig)
    return []


@command("eval")
@click.option("--tools", "tools_file", required=True, type=FILE)
@click.option("--queries", "queries_file", required=True, type=FILE)
@click.option(
    "--train",
    "train_file",
    type=FILE,
    help="Labelled requests (train.jsonl format): stored as intent examples, and tuned on with --tune.",
)
@click.option("--config", "config_names", multiple=True, help="Config to evaluate (repeatable); default: all.")
@click.option(
    "--tune", "do_tune", is_flag=True, help="Fit fusion weights on --train (never on --queries) and add config 'tuned'."
)
@click.option("-k", "--k", "k", default=10, show_default=True, type=click.IntRange(min=1), help="Tools per query.")
@click.option("--seed", default=0, show_default=True, type=int, help="Seed of the tuning folds.")
@click.option("--report", "report_dir", type=click.Path(file_okay=False, path_type=Path), help="Write eval.md here.")
@click.option("--keep", is_flag=True, help="Keep the scratch catalog (its name is printed) instead of dropping it.")
@click.pass_context
def eval_(
    ctx: click.Context,
    tools_file: Path,
    queries_file: Path,
    train_file: Path | None,
    config_names: tuple[str, ...],
    do_tune: bool,
    k: int,
    seed: int,
    report_dir: Path | None,
    keep: bool,
) -> None:
    """Evaluate routing on labelled queries in a scratch catalog, under several fusion configs."""
    if do_tune and train_file is None:
        raise InvalidInputError("--tune needs --train: weights are fitted on training queries, never on --queries")
    configs = select_configs(config_names or None, tuned=do_tune)
    if "tuned" in configs and not do_tune:
        raise InvalidInputError("config 'tuned' needs --tune (and --train)")
    tools = load_tools_file(tools_file)
    queries = _judgements(queries_file)
    train = _judgements(train_file) if train_file else None
    examples = load_examples(train_file) if train_file else None
    catalog = f"eval-{uuid.uuid4().hex[:12]}"
    with open_store(ctx, catalog=catalog) as store:
        try:
            store.upsert(tools)
            if examples:
                if store.embedder is None:
                    raise InvalidInputError("--train stores intent examples, which need an embedder (not 'none')")
                store.add_examples(examples)
            store.analyze()
            tuned = tune(store, train, seed=seed) if do_tune and train else None
            result = evaluate(store, queries, configs=configs, k=k, progress=True)
            if tuned is not None:
                result["tune"] = tuned.as_dict()
            if keep:
                result["catalog"] = catalog
        finally:
            if not keep:
                store.drop_catalog()
    title = f"{tools_file.parent.name or 'eval'}: {queries_file.name}"
    for note in write_report(report_dir, result, title) if report_dir else []:
        click.echo(f"note: {note}", err=True)

    def human() -> None:
        kept = f", catalog kept: {catalog}" if keep else ""
        click.echo(f"{result['n_queries']} queries, {result['n_tools']} tools{kept}")
        click.echo(format_table(result))
        if tuned is not None:
            click.echo(_tune_summary(result["tune"]))

    emit(ctx, result, human)


@command("tune")
@click.option(
    "--examples",
    "examples_file",
    required=True,
    type=FILE,
    help="Labelled requests, train.jsonl format ({qid, query, relevant, acceptable}).",
)
@click.option("--seed", default=0, show_default=True, type=int, help="Seed of the cross-validation folds.")
@click.option("--folds", default=5, show_default=True, type=click.IntRange(min=2))
@click.option("--dry-run", is_flag=True, help="Report what would be stored without storing it.")
@click.pass_context
def tune_(ctx: click.Context, examples_file: Path, seed: int, folds: int, dry_run: bool) -> None:
    """Learn the catalog's fusion weights from labelled requests (-c/--catalog) and store them."""
    examples = _judgements(examples_file)
    with open_store(ctx, create=False) as store:
        report = tune(store, examples, seed=seed, folds=folds, save=not dry_run).as_dict()
    report["catalog"] = options(ctx)["catalog"]
    report["stored"] = not dry_run
    note = "\n  (dry run: nothing stored)" if dry_run else ""
    emit(ctx, report, lambda: click.echo(_tune_summary(report) + note))


COMMANDS = (eval_, tune_)
