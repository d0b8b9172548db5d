#!/usr/bin/env bash
# Batched compilation with the store's earlier runs (issue 16): the same N torch instances per
# target alone, batched in a fresh store, and batched in a copy of a store that already ran them
# (a nightly's previous night), whose failing operators then run alone from the start.
#   usage: benchmarks/batched_history.sh PRIOR_STORE [N SEED K]
# TARGETS="tvm-torch" limits the targets. PRIOR_STORE: a store with a run of the same sample on the targets (e.g. benchmarks/comparison_run.sh
# STORE N N SEED). Prints each run's summary line; compare the outcomes per instance with sqlite3.
set -euo pipefail
PRIOR=${1:?a store with an earlier run of the same sample}
N=${2:-800}
SEED=${3:-7}
K=${4:-16}
HERE=$(cd "$(dirname "$0")/.." && pwd)
OPERA=${OPERA:-opera}
OUT=${OUT:-batched-history}
mkdir -p "$OUT"
for t in ${TARGETS:-tvm-torch ov-torch inductor-torch}; do
    run() { "$OPERA" run "$HERE/harvested/torch.jsonl.gz" --sample "$N" --sample-seed "$SEED" -t "$t" \
        --store "$1" --no-verify --no-reproducers --quiet "${@:2}" | grep -E "^run|decided in batches" | sed "s/^/$t $(basename "$1" .db): /" || true; }
    run "$OUT/alone-$t.db"
    run "$OUT/fresh-$t.db" --batch "$K"
    cp "$PRIOR" "$OUT/history-$t.db"
    run "$OUT/history-$t.db" --batch "$K"
done
