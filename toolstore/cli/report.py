"""What ``toolstore eval`` and ``toolstore tune`` say of their results: metrics named for routes of ``k`` tools, the
summary lines, the warning of an eval answered lexically, and ``eval.md`` with its chart (``eval.png``)."""

from __future__ import annotations

import io
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .._eval import TABLE_COLUMNS, format_table
from .app import counted, plural
from .files import write_file

CHART_METRICS = ("nDCG@10", "R@10", "multi comp@10")
SESSION_CHART_METRICS = ("nDCG@10", "comp@5", "comp@10")
SESSION_COLUMNS = ("R@1", "R@5", "R@10", "MRR@10", "nDCG@10", "comp@5", "comp@10", "latency_ms_p50", "latency_ms_p95")


def label_at(metric: str, k: int) -> str:
    """A metric's name for routes of ``k`` tools: a cutoff past ``k`` counts ``k`` tools (R@10 of ``-k 3`` is R@3).
    nDCG keeps its cutoff: its ideal ranking counts up to 10 relevant tools, so nDCG@10 of 3 tools is not nDCG@3 for a
    request with more than 3 relevant ones."""
    name, at, cutoff = metric.rpartition("@")
    if not at or name == "nDCG" or not cutoff.isdigit() or int(cutoff) <= k:
        return metric
    return f"{name}@{k}"


def labels_at(metrics: Sequence[str], k: int) -> list[str]:
    """``metrics`` named for ``k`` tools, each name once (R@5 and R@10 of ``-k 3`` are both R@3)."""
    return list(dict.fromkeys(label_at(m, k) for m in metrics))


def relabel(result: dict[str, Any], k: int) -> None:
    """Name ``result``'s metrics for routes of ``k`` tools (the first of those that become one name is kept: they are
    equal, every cutoff past ``k`` counting the same ``k`` tools)."""
    for name, row in result["configs"].items():
        labelled: dict[str, Any] = {}
        for metric, value in row.items():
            labelled.setdefault(label_at(metric, k), value)
        result["configs"][name] = labelled


def summary_line(result: dict[str, Any]) -> str:
    if "n_sessions" in result:
        turns, sessions = counted(result["n_turns"], "turn"), counted(result["n_sessions"], "session")
        return f"{turns} in {sessions}, {counted(result['n_tools'], 'tool')}"
    return f"{counted(result['n_queries'], 'query', 'queries')}, {counted(result['n_tools'], 'tool')}"


def degraded_warning(result: dict[str, Any]) -> str | None:
    """The line that says an eval's routes answered lexically only (its ``degraded``), so that its numbers are not
    read as its configs' own; None when every route was whole."""
    degraded = result.get("degraded")
    if not degraded:
        return None
    routes = f"{degraded['routes']} of {counted(degraded['of'], 'route')}"
    return (
        f"warning: {routes} answered lexically, not with the configs' dense "
        f"and intent signals, so their numbers are lexical ones: {degraded['reason']}"
    )


def tune_summary(report: dict[str, Any]) -> str:
    weights = ", ".join(f"{k}={v:g}" for k, v in report["fusion"]["weights"].items())
    fusion = report["fusion"]
    note = " (fell back to the default: tuning did not beat it under cross-validation)" if report["fell_back"] else ""
    text = (
        f"tuned on {counted(report['n_examples'], 'example')} in {report['seconds']:.1f} s{note}\n"
        f"  CV nDCG@10: default {report['cv_ndcg_uniform']:.4f}, tuned {report['cv_ndcg_tuned']:.4f}\n"
        f"  stored: {weights}, k_rrf={fusion['k_rrf']:g}, overfetch={fusion['overfetch']}"
    )
    abstain = report.get("abstain")
    if abstain:
        cv = abstain["cv"] or abstain["train"]
        text += (
            f"\n  abstention: {abstain['n_served']} served, {abstain['n_unserved']} unserved "
            f"{plural(abstain['n_unserved'], 'request')}; threshold "
            f"{abstain['model']['threshold']:.3f}; {'CV' if abstain['cv'] else 'in-sample'} false abstention "
            f"{cv['false_abstain']:.3f}, false acceptance {cv['false_accept']:.3f}"
        )
    return text


def columns_at(result: dict[str, Any], k: int) -> tuple[list[str], list[str]]:
    """The table's columns and the chart's metrics of an eval ``result`` routed with ``k`` tools."""
    columns, chart = (
        (SESSION_COLUMNS, SESSION_CHART_METRICS) if "n_sessions" in result else (TABLE_COLUMNS, CHART_METRICS)
    )
    return labels_at(columns, k), labels_at(chart, k)


def write_report(directory: Path, result: dict[str, Any], title: str, k: int = 10) -> list[str]:
    """Write ``eval.md`` (and ``eval.png`` when matplotlib is installed) into ``directory``; returns notes."""
    directory.mkdir(parents=True, exist_ok=True)
    columns, chart = columns_at(result, k)
    table = format_table(result, columns, markdown=True)
    warning = degraded_warning(result)
    text = [f"# {title}", "", summary_line(result), *(["", f"**{warning}**"] if warning else []), "", table]
    if "tune" in result:
        text += ["", "```", tune_summary(result["tune"]), "```"]
    write_file(directory / "eval.md", "\n".join(text) + "\n")
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return ["matplotlib is not installed (pip install 'toolstore[plot]'): wrote eval.md without the chart"]
    names = list(result["configs"])
    fig, ax = plt.subplots(figsize=(max(6, 1.1 * len(names)), 4))
    width = 0.8 / len(chart)
    for i, metric in enumerate(chart):
        values = [result["configs"][n].get(metric) or 0.0 for n in names]
        ax.bar([x + i * width for x in range(len(names))], values, width, label=metric)
    ax.set_xticks([x + width for x in range(len(names))], names, rotation=30, ha="right")
    ax.set_ylim(0, 1)
    ax.set_title(title)
    ax.legend()
    fig.tight_layout()
    chart_png = io.BytesIO()
    fig.savefig(chart_png, format="png", dpi=120)
    plt.close(fig)
    write_file(directory / "eval.png", chart_png.getvalue())
    return []
