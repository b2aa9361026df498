#!/usr/bin/env bash
# Routing quality on the public benchmarks, two tables:
#  1. zero-shot (no labelled examples: `toolstore eval` without --train) for every candidate embedder: the
#     shipped local model and every model exported with scripts/build_candidate_model.py (or build_bge_model.py,
#     build_static_model.py) into bench/out/models/NAME (or the specs in $EMBEDDERS, e.g.
#     EMBEDDERS="local local:/models/x static:/models/y");
#  2. with train.jsonl as intent examples, every config plus weights tuned on train.jsonl, local model.
#     bfcl_sessions is replayed turn by turn (configs turn / session / tuned; train_sessions.jsonl logged, stored
#     as intent examples and tuned on); it has no zero-shot row in table 1.
# Each set is loaded into a scratch catalog (dropped afterwards).
#
#   bash bench/quality.sh                 # all four sets
#   bash bench/quality.sh metatool        # some of them
#   ZERO_SHOT_ONLY=1 bash bench/quality.sh
#
# Data: $TOOLSTORE_BENCH (default: ../shared/bench next to this checkout), one folder per set holding
# tools.jsonl, queries.jsonl and train.jsonl (or sessions.jsonl and train_sessions.jsonl). Results: $OUT (default bench/out/quality), one JSON per run.
set -euo pipefail
cd "$(dirname "$0")/.."

BENCH="${TOOLSTORE_BENCH:-$(cd .. && pwd)/shared/bench}"
OUT="${OUT:-bench/out/quality}"
SETS=("$@")
[ ${#SETS[@]} -gt 0 ] || SETS=(metatool seal_tools gorilla_torch bfcl_sessions)

if [ -x .venv/bin/toolstore ]; then
    TOOLSTORE=.venv/bin/toolstore
    PYTHON=.venv/bin/python
else
    TOOLSTORE=toolstore
    PYTHON=python3
fi
command -v "$TOOLSTORE" >/dev/null || { echo "no toolstore command: run 'bash scripts/setup-venv' first" >&2; exit 1; }

if [ -z "${EMBEDDERS:-}" ]; then
    EMBEDDERS="local"
    for dir in bench/out/models/*/; do
        [ -f "$dir/embedder.json" ] || continue
        if [ -f "$dir/embeddings.npy" ]; then
            EMBEDDERS="$EMBEDDERS static:${dir%/}"  # scripts/build_static_model.py
        else
            EMBEDDERS="$EMBEDDERS local:${dir%/}"
        fi
    done
fi

mkdir -p "$OUT"
QUERY_SETS=()
for set in "${SETS[@]}"; do
    [ -f "$BENCH/$set/sessions.jsonl" ] || QUERY_SETS+=("$set")
done
for spec in $EMBEDDERS; do
    tag=$(basename "${spec#*:}")
    for set in ${QUERY_SETS[@]+"${QUERY_SETS[@]}"}; do
        dir="$BENCH/$set"
        [ -f "$dir/tools.jsonl" ] && [ -f "$dir/queries.jsonl" ] || { echo "missing $dir (set TOOLSTORE_BENCH)" >&2; exit 1; }
        echo "== zero-shot $set, embedder $spec" >&2
        start=$(date +%s)
        "$TOOLSTORE" --embedder "$spec" eval --tools "$dir/tools.jsonl" --queries "$dir/queries.jsonl" \
            --config name --config description --config bm25 --config dense --config default \
            --json > "$OUT/zeroshot-$tag-$set.json"
        echo "   $(( $(date +%s) - start )) s" >&2
    done
done

[ ${#QUERY_SETS[@]} -eq 0 ] || "$PYTHON" - "$OUT" "$EMBEDDERS" "${QUERY_SETS[@]}" <<'EOF'
import json, sys
out, specs, sets = sys.argv[1], sys.argv[2].split(), sys.argv[3:]
cols = ("nDCG@10", "R@10", "MRR@10", "multi comp@10", "latency_ms_p50")
heads = ("nDCG@10", "R@10", "MRR@10", "comp@10", "p50 ms")
print("zero-shot (no labelled examples)")
print(f"{'set':<14} {'embedder':<20} {'config':<12} " + " ".join(f"{h:>8}" for h in heads))
for s in sets:
    for spec in specs:
        tag = spec.partition(":")[2].rstrip("/").rsplit("/", 1)[-1] or spec
        r = json.load(open(f"{out}/zeroshot-{tag}-{s}.json"))
        for name, row in r["configs"].items():
            if tag != specs[0] and name in ("name", "description", "bm25"):
                continue  # the lexical retrievers do not depend on the embedder
            cells = ["-" if row.get(c) is None else (f"{row[c]:.1f}" if c.startswith("latency") else f"{row[c]:.3f}") for c in cols]
            print(f"{s:<14} {tag:<20} {name:<12} " + " ".join(f"{c:>8}" for c in cells))
print()
EOF
[ -z "${ZERO_SHOT_ONLY:-}" ] || exit 0

for set in "${SETS[@]}"; do
    dir="$BENCH/$set"
    if [ -f "$dir/sessions.jsonl" ]; then
        files=(tools.jsonl sessions.jsonl train_sessions.jsonl)
        data=(--sessions "$dir/sessions.jsonl" --train-sessions "$dir/train_sessions.jsonl")
    else
        files=(tools.jsonl queries.jsonl train.jsonl)
        data=(--queries "$dir/queries.jsonl" --train "$dir/train.jsonl")
    fi
    for f in "${files[@]}"; do
        [ -f "$dir/$f" ] || { echo "missing $dir/$f (set TOOLSTORE_BENCH)" >&2; exit 1; }
    done
    echo "== $set" >&2
    start=$(date +%s)
    "$TOOLSTORE" eval --tools "$dir/tools.jsonl" "${data[@]}" --tune --json --report "$OUT/$set" > "$OUT/$set.json"
    echo "   $(( $(date +%s) - start )) s" >&2
done

"$PYTHON" - "$OUT" "${SETS[@]}" <<'EOF'
import json, sys
out, sets = sys.argv[1], sys.argv[2:]
cols = ("nDCG@10", "R@10", "MRR@10", "comp@5", "comp@10", "multi comp@10", "latency_ms_p50")
heads = ("nDCG@10", "R@10", "MRR@10", "comp@5", "comp@10", "mcomp@10", "p50 ms")
print("with train.jsonl as intent examples (local model)")
print(f"{'set':<14} {'config':<12} " + " ".join(f"{h:>8}" for h in heads))
for s in sets:
    r = json.load(open(f"{out}/{s}.json"))
    for name, row in r["configs"].items():
        cells = ["-" if row.get(c) is None else (f"{row[c]:.1f}" if c.startswith("latency") else f"{row[c]:.3f}") for c in cols]
        print(f"{s:<14} {name:<12} " + " ".join(f"{c:>8}" for c in cells))
    t = r.get("tune")
    if t:
        w = ", ".join(f"{k}={v:g}" for k, v in t["fusion"]["weights"].items())
        print(f"{'':<14} tuned in {t['seconds']:.0f} s on {t['n_examples']} examples: CV nDCG default "
              f"{t['cv_ndcg_uniform']:.3f} -> tuned {t['cv_ndcg_tuned']:.3f}; {w}, k_rrf={t['fusion']['k_rrf']:g}, "
              f"overfetch={t['fusion']['overfetch']}, split={t['fusion'].get('split', 0):g}" + (" (fell back to uniform)" if t["fell_back"] else ""))
EOF
