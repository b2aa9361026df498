"""Hand-computed checks of toolstore._metrics against the bench README definitions."""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Callable
from pathlib import Path

import pytest

from toolstore import InvalidInputError, InvalidTypeError
from toolstore._metrics import (
    METRICS,
    Judgement,
    aggregate,
    load_judgements,
    load_sessions,
    score_query,
)

from benchdata import BENCH
from conftest import INT_LIMIT

FILLER = [f"x{i}" for i in range(20)]  # never relevant, never acceptable

SINGLE_NONE = {
    "single hit@1": None,
    "single hit@10": None,
    "lenient hit@1": None,
    "lenient hit@10": None,
}
MULTI_NONE = {"multi R@10": None, "multi comp@10": None}


def check(scores: dict[str, float | None], expected: dict[str, float | None]) -> None:
    assert tuple(scores) == METRICS
    for name in METRICS:
        if expected[name] is None:
            assert scores[name] is None, name
        else:
            assert scores[name] == pytest.approx(expected[name]), name


def test_metric_names_and_order() -> None:
    assert METRICS == (
        "R@1",
        "R@5",
        "R@10",
        "MRR@10",
        "nDCG@10",
        "multi R@10",
        "multi comp@10",
        "single hit@1",
        "single hit@10",
        "lenient hit@1",
        "lenient hit@10",
        "comp@5",
        "comp@10",
    )


def test_single_tool_hit_at_rank_3() -> None:
    j = Judgement("q", ("t",), ("t",))
    scores = score_query(["x0", "x1", "t", "x2"], j)
    check(
        scores,
        {
            "R@1": 0.0,
            "R@5": 1.0,
            "R@10": 1.0,
            "MRR@10": 1 / 3,
            "nDCG@10": (1 / math.log2(4)) / (1 / math.log2(2)),  # = 0.5
            **MULTI_NONE,
            "single hit@1": 0.0,
            "single hit@10": 1.0,
            "lenient hit@1": 0.0,
            "lenient hit@10": 1.0,
            "comp@5": 1.0,
            "comp@10": 1.0,
        },
    )
    assert scores["nDCG@10"] == pytest.approx(0.5)


def test_single_tool_hit_at_rank_1() -> None:
    scores = score_query(["t", "x0"], Judgement("q", ("t",), ("t",)))
    check(
        scores,
        {
            "R@1": 1.0,
            "R@5": 1.0,
            "R@10": 1.0,
            "MRR@10": 1.0,
            "nDCG@10": 1.0,
            **MULTI_NONE,
            "single hit@1": 1.0,
            "single hit@10": 1.0,
            "lenient hit@1": 1.0,
            "lenient hit@10": 1.0,
            "comp@5": 1.0,
            "comp@10": 1.0,
        },
    )


def test_miss_including_hit_beyond_rank_10() -> None:
    j = Judgement("q", ("t",), ("t",))
    zeros = {
        "R@1": 0.0,
        "R@5": 0.0,
        "R@10": 0.0,
        "MRR@10": 0.0,
        "nDCG@10": 0.0,
        **MULTI_NONE,
        "single hit@1": 0.0,
        "single hit@10": 0.0,
        "lenient hit@1": 0.0,
        "lenient hit@10": 0.0,
        "comp@5": 0.0,
        "comp@10": 0.0,
    }
    check(score_query(FILLER[:10], j), zeros)
    check(score_query([], j), zeros)
    # Rank 11 is outside the cutoff.
    check(score_query([*FILLER[:10], "t"], j), zeros)


def test_rank_6_counts_for_r10_but_not_r5() -> None:
    scores = score_query([*FILLER[:5], "t"], Judgement("q", ("t",)))
    assert scores["R@5"] == 0.0 and (scores["comp@5"], scores["comp@10"]) == (0.0, 1.0)
    assert scores["R@10"] == 1.0
    assert scores["MRR@10"] == pytest.approx(1 / 6)
    assert scores["nDCG@10"] == pytest.approx(1 / math.log2(7))


def test_two_tool_query_hits_at_ranks_1_and_4() -> None:
    j = Judgement("q", ("a", "b"), ("a", "b"))
    check(
        score_query(["a", "x0", "x1", "b", "x2"], j),
        {
            "R@1": 1 / 2,
            "R@5": 2 / 2,
            "R@10": 2 / 2,
            "MRR@10": 1 / 1,
            "nDCG@10": (1 + 1 / math.log2(5)) / (1 + 1 / math.log2(3)),
            "multi R@10": 2 / 2,
            "multi comp@10": 1.0,
            **SINGLE_NONE,
            "comp@5": 1.0,
            "comp@10": 1.0,
        },
    )


def test_three_tool_query_two_found() -> None:
    j = Judgement("q", ("a", "b", "c"), ("a", "b", "c"))
    # b at rank 2, a at rank 7; c missing.
    ranked = ["x0", "b", "x1", "x2", "x3", "x4", "a", "x5", "x6", "x7", "c"]
    check(
        score_query(ranked, j),
        {
            "R@1": 0 / 3,
            "R@5": 1 / 3,
            "R@10": 2 / 3,
            "MRR@10": 1 / 2,
            "nDCG@10": (1 / math.log2(3) + 1 / math.log2(8)) / (1 / math.log2(2) + 1 / math.log2(3) + 1 / math.log2(4)),
            "multi R@10": 2 / 3,
            "multi comp@10": 0.0,
            **SINGLE_NONE,
            "comp@5": 0.0,
            "comp@10": 0.0,
        },
    )


def test_acceptable_alternative_is_lenient_hit_only() -> None:
    j = Judgement("q", ("t",), ("t", "alt"))
    check(
        score_query(["alt", "x0", "t"], j),
        {
            "R@1": 0.0,
            "R@5": 1.0,
            "R@10": 1.0,
            "MRR@10": 1 / 3,
            "nDCG@10": 1 / math.log2(4),
            **MULTI_NONE,
            "single hit@1": 0.0,
            "single hit@10": 1.0,
            "lenient hit@1": 1.0,
            "lenient hit@10": 1.0,
            "comp@5": 1.0,
            "comp@10": 1.0,
        },
    )
    # Only the alternative is returned: a lenient hit, a strict miss.
    scores = score_query(["x0", "alt"], j)
    assert scores["single hit@10"] == 0.0
    assert scores["lenient hit@1"] == 0.0
    assert scores["lenient hit@10"] == 1.0
    assert scores["MRR@10"] == 0.0


def test_acceptable_does_not_affect_multi_tool_metrics() -> None:
    j = Judgement("q", ("a", "b"), ("a", "b", "alt"))
    scores = score_query(["alt", "a"], j)
    assert scores["R@1"] == 0.0
    assert scores["MRR@10"] == pytest.approx(1 / 2)
    assert scores["multi comp@10"] == 0.0
    assert all(scores[name] is None for name in SINGLE_NONE)


def test_duplicates_in_ranked_count_once() -> None:
    j = Judgement("q", ("a", "b"), ("a", "b"))
    # Distinct ranking: a, x0, x1, b -> same as hits at ranks 1 and 4.
    ranked = ["a", "a", "x0", "a", "x1", "x0", "b", "b"]
    expected_ndcg = (1 + 1 / math.log2(5)) / (1 + 1 / math.log2(3))
    scores = score_query(ranked, j)
    assert scores["R@1"] == pytest.approx(1 / 2)
    assert scores["R@10"] == pytest.approx(2 / 2)
    assert scores["MRR@10"] == pytest.approx(1.0)
    assert scores["nDCG@10"] == pytest.approx(expected_ndcg)
    assert scores["nDCG@10"] <= 1.0


def test_repeated_relevant_tool_cannot_exceed_one() -> None:
    j = Judgement("q", ("a", "b"), ("a", "b"))
    scores = score_query(["a"] * 10, j)
    assert scores["R@10"] == pytest.approx(1 / 2)
    assert scores["nDCG@10"] == pytest.approx(1 / (1 + 1 / math.log2(3)))
    assert scores["multi comp@10"] == 0.0


def test_duplicates_do_not_occupy_ranks() -> None:
    # 9 distinct fillers, one repeated many times, then the tool: it is the 10th distinct id.
    j = Judgement("q", ("t",), ("t",))
    ranked = [*FILLER[:9], *[FILLER[0]] * 5, "t"]
    scores = score_query(ranked, j)
    assert scores["MRR@10"] == pytest.approx(1 / 10)
    assert scores["nDCG@10"] == pytest.approx(1 / math.log2(11))
    # An 11th distinct id is past the cutoff.
    assert score_query([*FILLER[:10], FILLER[0], "t"], j)["R@10"] == 0.0


def test_more_than_ten_relevant_caps_ideal_dcg() -> None:
    relevant = tuple(f"r{i}" for i in range(12))
    j = Judgement("q", relevant, relevant)
    ideal = sum(1 / math.log2(rank + 1) for rank in range(1, 11))
    # All top 10 are relevant: perfect nDCG although 2 relevant tools are missing.
    perfect = score_query(list(relevant), j)
    assert perfect["nDCG@10"] == pytest.approx(1.0)
    assert perfect["R@10"] == pytest.approx(10 / 12)
    assert perfect["R@5"] == pytest.approx(5 / 12)
    assert perfect["R@1"] == pytest.approx(1 / 12)
    assert perfect["multi R@10"] == pytest.approx(10 / 12)
    assert perfect["multi comp@10"] == 0.0
    # Relevant at ranks 2 and 3 only.
    partial = score_query(["x0", "r5", "r7"], j)
    assert partial["nDCG@10"] == pytest.approx((1 / math.log2(3) + 1 / math.log2(4)) / ideal)
    assert partial["R@10"] == pytest.approx(2 / 12)


def test_judgement_normalises_ids() -> None:
    j = Judgement("q", ["a", "b", "a"], ["c", "b"])  # type: ignore[arg-type]
    assert j.relevant == ("a", "b")
    assert j.acceptable == ("a", "b", "c")
    assert set(j.relevant) <= set(j.acceptable)
    # acceptable omitted -> relevant
    assert Judgement("q", ("a",)).acceptable == ("a",)
    # Missing relevant ids are unioned into acceptable, so lenient hits include them.
    k = Judgement("q", ("t",), ("alt",))
    assert k.acceptable == ("t", "alt")
    assert score_query(["t"], k)["lenient hit@1"] == 1.0
    with pytest.raises(dataclasses.FrozenInstanceError):
        j.qid = "other"  # type: ignore[misc]


def test_judgement_reads_iterators_once() -> None:
    """relevant and acceptable may be any iterables of ids (generators too): each is read once, none lost."""
    j = Judgement("q", iter(["a", "b"]), (t for t in ["c", "a"]))  # type: ignore[arg-type]
    assert (j.relevant, j.acceptable) == (("a", "b"), ("a", "b", "c"))


def test_judgement_rejects_bad_input() -> None:
    """toolstore's error for bad input (an InvalidInputError naming the judgement and what is wrong), still of the
    built-in type it raised before: a ValueError for no relevant tool, a TypeError for a value of the wrong type."""
    with pytest.raises(InvalidInputError, match="judgement 'q' has no relevant tool") as empty:
        Judgement("q", (), ())
    assert isinstance(empty.value, ValueError)
    cases = [
        (("abc", ()), "judgement 'q': relevant must be a sequence of tool ids, got str"),
        ((("a",), None), "judgement 'q': acceptable must be a sequence of tool ids, got NoneType"),
        (((1,),), "judgement 'q': tool ids must be str, got int"),
        ((("a",), ("b", 2.5)), "judgement 'q': tool ids must be str, got float"),
        (((["a"],),), "judgement 'q': tool ids must be str, got list"),
    ]
    for args, said in cases:
        with pytest.raises(InvalidTypeError) as raised:
            Judgement("q", *args)  # type: ignore[arg-type]
        assert str(raised.value) == said
        assert isinstance(raised.value, InvalidInputError) and isinstance(raised.value, TypeError)


def test_ranked_as_bare_string_is_rejected() -> None:
    with pytest.raises(TypeError):
        score_query("t", Judgement("q", ("t",)))


def test_aggregate_skips_none() -> None:
    single_rank3 = score_query(["x0", "x1", "t"], Judgement("s1", ("t",)))
    single_alt = score_query(["alt"], Judgement("s2", ("t",), ("alt",)))
    multi_ok = score_query(["a", "x0", "x1", "b"], Judgement("m1", ("a", "b")))
    multi_part = score_query(["x0", "b"], Judgement("m2", ("a", "b", "c")))
    agg = aggregate(iter([single_rank3, single_alt, multi_ok, multi_part]))

    assert agg["n_queries"] == 4
    assert agg["n_multi"] == 2
    assert agg["n_single"] == 2
    assert agg["R@1"] == pytest.approx((0 + 0 + 1 / 2 + 0) / 4)
    assert agg["R@10"] == pytest.approx((1 + 0 + 1 + 1 / 3) / 4)
    assert agg["MRR@10"] == pytest.approx((1 / 3 + 0 + 1 + 1 / 2) / 4)
    assert agg["nDCG@10"] == pytest.approx(
        (
            1 / math.log2(4)
            + 0
            + (1 + 1 / math.log2(5)) / (1 + 1 / math.log2(3))
            + (1 / math.log2(3)) / (1 + 1 / math.log2(3) + 1 / math.log2(4))
        )
        / 4
    )
    # Multi metrics average over the 2 multi-tool queries only.
    assert agg["multi R@10"] == pytest.approx((1 + 1 / 3) / 2)
    assert agg["multi comp@10"] == pytest.approx((1 + 0) / 2)
    # Single metrics average over the 2 single-tool queries only.
    assert agg["single hit@1"] == pytest.approx((0 + 0) / 2)
    assert agg["single hit@10"] == pytest.approx((1 + 0) / 2)
    assert agg["lenient hit@1"] == pytest.approx((0 + 1) / 2)
    assert agg["lenient hit@10"] == pytest.approx((1 + 1) / 2)


def test_aggregate_none_when_no_query_qualifies() -> None:
    agg = aggregate([score_query(["t"], Judgement("s", ("t",)))])
    assert agg["multi R@10"] is None
    assert agg["multi comp@10"] is None
    assert agg["single hit@1"] == 1.0
    assert (agg["n_queries"], agg["n_multi"], agg["n_single"]) == (1, 0, 1)

    empty = aggregate([])
    assert all(empty[name] is None for name in METRICS)
    assert (empty["n_queries"], empty["n_multi"], empty["n_single"]) == (0, 0, 0)


def test_aggregate_rejects_incomplete_scores() -> None:
    with pytest.raises(ValueError, match="R@5"):
        aggregate([{"R@1": 1.0}])


def write_lines(tmp_path: Path, lines: list[str]) -> Path:
    path = tmp_path / "queries.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_load_judgements(tmp_path: Path) -> None:
    path = write_lines(
        tmp_path,
        [
            json.dumps({"qid": "q1", "query": "weather in Paris", "relevant": ["w"], "acceptable": ["w", "w2"]}),
            "",
            json.dumps({"qid": "q2", "query": "stock news", "relevant": ["f", "n"], "acceptable": ["f"]}),
            json.dumps({"qid": "q3", "query": "café ☕", "relevant": ["c"]}),
        ],
    )
    pairs = load_judgements(path)
    assert pairs == [
        ("weather in Paris", Judgement("q1", ("w",), ("w", "w2"))),
        ("stock news", Judgement("q2", ("f", "n"), ("f", "n"))),
        ("café ☕", Judgement("q3", ("c",), ("c",))),
    ]
    assert load_judgements(str(path)) == pairs


@pytest.mark.parametrize(
    ("bad_line", "message"),
    [
        ("{not json", "invalid JSON"),
        ("[1, 2]", "JSON object"),
        (json.dumps({"qid": "b", "query": "x"}), "relevant"),
        (json.dumps({"qid": "b", "relevant": ["t"]}), "query"),
        (json.dumps({"qid": "b", "query": "x", "relevant": []}), "empty"),
        (json.dumps({"qid": "b", "query": "x", "relevant": "t"}), "relevant"),
        (json.dumps({"qid": "b", "query": "x", "relevant": ["t", 3]}), "relevant"),
        (json.dumps({"qid": "b", "query": "x", "relevant": ["t"], "acceptable": None}), "acceptable"),
        (json.dumps({"qid": 7, "query": "x", "relevant": ["t"]}), "qid"),
        (json.dumps({"qid": "b", "query": "  ", "relevant": ["t"]}), "query"),
        (json.dumps({"qid": "ok", "query": "dup", "relevant": ["t"]}), "already used on line 1"),
    ],
)
def test_load_judgements_names_bad_line(tmp_path: Path, bad_line: str, message: str) -> None:
    good = json.dumps({"qid": "ok", "query": "fine", "relevant": ["t"], "acceptable": ["t"]})
    path = write_lines(tmp_path, [good, good.replace('"ok"', '"ok2"'), bad_line])
    with pytest.raises(ValueError, match="line 3") as info:
        load_judgements(path)
    assert message in str(info.value)
    assert str(path) in str(info.value)


@pytest.mark.parametrize("load", [load_judgements, load_sessions])
def test_a_line_that_is_no_json_is_named_by_its_line_alone(tmp_path: Path, load: Callable[[Path], object]) -> None:
    """A labelled file's line that is no JSON is named by the file's line and the parser's column, and the parser's
    own line (always "line 1" of that one line) is not added to it: both files read their lines the one way."""
    good = json.dumps({"qid": "ok", "sid": "ok", "query": "fine", "relevant": ["t"], "turns": [{"query": "fine"}]})
    path = write_lines(tmp_path, [good, good.replace('"ok"', '"ok2"'), "{not json"])
    with pytest.raises(ValueError) as info:
        load(path)
    assert (
        str(info.value) == f"{path} line 3, column 2: invalid JSON: Expecting property name enclosed in double quotes"
    )


def test_an_integer_of_thousands_of_digits_is_said_without_pythons_advice(tmp_path: Path) -> None:
    """parse_json, which every file a user gives is read with, says what is wrong with an integer of 5,000 digits
    without Python's advice to the programmer (sys.set_int_max_str_digits), here for a labelled file as for a tools
    file (test_formats)."""
    path = write_lines(tmp_path, ['{"qid": "q", "query": "x", "relevant": ["t"], "n": ' + "9" * 5000 + "}"])
    with pytest.raises(ValueError) as info:
        load_judgements(path)
    assert str(info.value) == (
        f"{path} line 1: invalid JSON: {INT_LIMIT} for integer string conversion: value has 5000 digits"
    )


@pytest.mark.skipif(not BENCH.is_dir(), reason="shared benchmarks not present")
@pytest.mark.parametrize("name", ["metatool", "seal_tools", "gorilla_torch"])
def test_load_real_bench_files(name: str) -> None:
    pairs = load_judgements(BENCH / name / "queries.jsonl")
    assert pairs
    # A perfect ranking scores 1 on everything that applies.
    agg = aggregate(score_query(list(j.relevant), j) for _, j in pairs)
    assert agg["n_queries"] == len(pairs)
    for metric in ("R@10", "MRR@10", "nDCG@10", "single hit@10", "multi comp@10"):
        if agg[metric] is not None:
            assert agg[metric] == pytest.approx(1.0), metric
