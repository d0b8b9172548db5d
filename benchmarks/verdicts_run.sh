#!/usr/bin/env bash
# The fixed slice behind the "How far to trust a verdict" figures of docs/results.md (issue 11): the first
# N instances of each shipped human corpus in the `opera` order (prioritized for the library's
# first target), run through every CPU target of the library, into one store. Running the same
# script with an older checkout's `opera` (OPERA=...) on the same order files gives the
# before/after counts; ORDERS=dir reuses order files instead of writing them.
#   usage: benchmarks/verdicts_run.sh STORE [N_ONNX N_TORCH N_KERAS]
set -euo pipefail
STORE=${1:?store path}
N_ONNX=${2:-200}
N_TORCH=${3:-100}
N_KERAS=${4:-100}
OPERA=${OPERA:-opera}
ORDERS=${ORDERS:-$(dirname "$STORE")/orders}
HERE=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$ORDERS"
run() {  # library, first target, N, targets...
    local lib=$1 first=$2 n=$3; shift 3
    local order="$ORDERS/$lib.order"
    [ -s "$order" ] || opera prioritize "$HERE/harvested/$lib.jsonl.gz" --target "$first" -o "$order"
    local targets=()
    for t in "$@"; do targets+=(--target "$t"); done
    "$OPERA" run "$HERE/harvested/$lib.jsonl.gz" "${targets[@]}" --order "$order" --limit "$n" \
        --store "$STORE" --quiet "${EXTRA_ARGS[@]}" || [ $? -le 1 ]
}
EXTRA_ARGS=(${EXTRA:-})
run onnx tvm-onnx "$N_ONNX" tvm-onnx ov-onnx
run torch tvm-torch "$N_TORCH" tvm-torch ov-torch inductor-torch
run keras tvm-keras "$N_KERAS" tvm-keras ov-keras
