"""The route benchmark's report: one table of a run's sizes, and the issue's targets against it."""

from __future__ import annotations

from typing import Any

from _harness import CLIENTS

#: The issue's targets: (label, size or None for imports, key, bound, True when the value must be at most the bound).
TARGETS = [
    ("route() p50 ms at 10k (embedding included)", 10_000, ("route", "p50"), 10.0, True),
    ("route() p50 ms at 100k", 100_000, ("route", "p50"), 30.0, True),
    ("statement / in-process p50 at 10k", 10_000, ("ratio_statement_inprocess",), 1.5, True),
    ("statement / in-process p50 at 100k", 100_000, ("ratio_statement_inprocess",), 1.0, True),
    ("route() per s, 8 clients, at 10k", 10_000, ("routes_per_s",), 250.0, False),
    ("round trips per route()", 10_000, ("round_trips_per_route",), 1.0, True),
    ("import 10k tools, precomputed, s", None, ("upsert_precomputed_s",), 5.0, True),
    ("import 30k intent examples, precomputed, s", None, ("add_examples_precomputed_s",), 10.0, True),
    ("import through the local model / model alone", None, ("local_model_vs_model_alone",), 1.2, True),
]


def targets(results: list[dict[str, Any]], imports: dict[str, float]) -> str:
    """Each target with this run's value (targets not measured in this run are left out)."""
    lines = ["| target | bound | measured | met |", "|---|---|---|---|"]
    by_size = {r["tools"]: r for r in results}
    for label, size, path, bound, at_most in TARGETS:
        source: Any = imports if size is None else by_size.get(size)
        for key in path:
            source = source.get(key) if source else None
        if source is None:  # not measured in this run
            continue
        met = source <= bound if at_most else source >= bound
        lines.append(f"| {label} | {'<=' if at_most else '>='} {bound:g} | {source:.2f} | {'yes' if met else 'NO'} |")
    return "\n".join(lines)


def table(results: list[dict[str, Any]], imports: dict[str, float]) -> str:
    rows = [
        ("route() p50 / p95 ms", lambda r: f"{r['route']['p50']:.1f} / {r['route']['p95']:.1f}"),
        ("  round trips per route()", lambda r: f"{r['round_trips_per_route']:.2f}"),
        ("  query embedding alone p50 ms", lambda r: f"{r['embed']['p50']:.1f}"),
        ("statement p50 / p95 ms", lambda r: f"{r['statement']['p50']:.1f} / {r['statement']['p95']:.1f}"),
        ("in-process p50 / p95 ms", lambda r: f"{r['inprocess']['p50']:.2f} / {r['inprocess']['p95']:.2f}"),
        ("statement / in-process (p50)", lambda r: f"{r['ratio_statement_inprocess']:.2f}x"),
        (
            "  beside a memory copier: statement / in-process p50 ms, ratio",
            lambda r: (
                f"{r['memory_traffic']['statement']['p50']:.1f} / {r['memory_traffic']['inprocess']['p50']:.2f}, "
                f"{r['memory_traffic']['ratio']:.2f}x"
                if r.get("memory_traffic")
                else "-"
            ),
        ),
        ("top-10 identical / overlap", lambda r: f"{r['top10_identical']:.2f} / {r['top10_overlap']:.3f}"),
        ("route() hit@8 (targeted queries)", lambda r: f"{r['route_hit8_targeted']:.2f}"),
        (f"route() /s, {CLIENTS} clients", lambda r: f"{r['routes_per_s']:.0f}"),
        (f"statement /s, {CLIENTS} clients", lambda r: f"{r['statements_per_s']:.0f}"),
        (
            "route() p50 ms: plain / session / messages",
            lambda r: " / ".join(f"{r['sessions'][f'route_{x}']['p50']:.1f}" for x in ("plain", "session", "messages")),
        ),
        (
            "  session - plain, p50 ms (statement alone)",
            lambda r: (
                f"{r['sessions']['route_session']['p50'] - r['sessions']['route_plain']['p50']:+.2f} "
                f"({r['sessions']['statement_session']['p50'] - r['sessions']['statement_plain']['p50']:+.2f})"
            ),
        ),
        (
            "  log: calls / transition rows",
            lambda r: f"{r['sessions']['logged_calls']:,} / {r['sessions']['transition_rows']:,}",
        ),
        (
            "route() p50 / p95 ms, coverage on vs off (cold query vectors)",
            lambda r: (
                f"{r['coverage']['route_on']['p50']:.1f} / {r['coverage']['route_on']['p95']:.1f} vs "
                f"{r['coverage']['route_off']['p50']:.1f} / {r['coverage']['route_off']['p95']:.1f}"
            ),
        ),
        (
            "  requests split, clauses each; their p50 on vs off",
            lambda r: (
                f"{r['coverage']['split_share']:.0%}, {r['coverage']['parts_mean']:.1f}; "
                + (
                    f"{r['coverage']['split_only_on']['p50']:.1f} vs {r['coverage']['split_only_off']['p50']:.1f}"
                    if r["coverage"]["split_only_on"]
                    else "-"
                )
            ),
        ),
        ("postings rows / touched per query", lambda r: f"{r['postings_rows']} / {r['postings_touched_mean']:.0f}"),
    ]
    for name in results[0].get("filters", {}) if results else []:
        rows.append(
            (
                f"statement p50 ms filtered ({name}) vs not; tools kept",
                lambda r, f=name: (
                    f"{r['filters'][f]['filtered']['p50']:.1f} vs {r['filters'][f]['unfiltered']['p50']:.1f}; "
                    f"{r['filters'][f]['kept']:,}"
                ),
            )
        )
    for name in results[0]["variants"] if results else []:
        rows.append(
            (
                f"{name}: p50 ms vs base (backend CPU), identical rows, top-10 overlap (route, lexical), hit@8 vs base",
                lambda r, v=name: (
                    f"{r['variants'][v]['variant']['p50']:.1f} vs {r['variants'][v]['baseline']['p50']:.1f} "
                    f"({r['variants'][v]['cpu_variant']['p50']:.2f} vs {r['variants'][v]['cpu_baseline']['p50']:.2f}), "
                    f"{r['variants'][v]['identical']:.3f}, "
                    f"{r['variants'][v]['top10_overlap']:.3f}, "
                    f"{r['variants'][v]['lexical_top10_overlap'] or float('nan'):.3f}, "
                    f"{r['variants'][v]['hit8_variant']:.2f} vs {r['variants'][v]['hit8_baseline']:.2f}"
                ),
            )
        )
    head = "| | " + " | ".join(f"{r['tools']:,} tools" for r in results) + " |"
    lines = [head, "|---" * (len(results) + 1) + "|"]
    lines += [f"| {label} | " + " | ".join(fmt(r) for r in results) + " |" for label, fmt in rows]
    for key in results[0]["explain"] if results else []:
        lines.append(
            f"| explain: {key} (median) | " + " | ".join(f"{r['explain'].get(key, 0):.1f}" for r in results) + " |"
        )
    for key, value in imports.items():
        lines.append(f"| import 10k: {key} | {value:.1f} |" + " |" * (len(results) - 1))
    return "\n".join(lines)
