#!/usr/bin/env bash
# The fresh run behind "The real comparison" (issue 15) and the judged verdict sample (issue 11):
# every valid human ONNX instance, and a seeded random sample of N torch and N Keras instances of
# the shipped corpus, each through every CPU target of its library, into one store. The run's order
# does not matter: `opera report` re-orders the run's own tests offline with every strategy.
#   usage: benchmarks/comparison_run.sh STORE [N_TORCH N_KERAS SEED]
set -euo pipefail
STORE=${1:?store path}
N_TORCH=${2:-1200}
N_KERAS=${3:-1200}
SEED=${4:-0}
HERE=$(cd "$(dirname "$0")/.." && pwd)
OPERA=${OPERA:-opera}
run() {  # corpus, extra args..., then targets
    "$OPERA" run "$HERE/harvested/$1.jsonl.gz" "${@:2}" --store "$STORE" --quiet || [ $? -le 1 ]
}
run onnx -t tvm-onnx -t ov-onnx
run torch --sample "$N_TORCH" --sample-seed "$SEED" -t tvm-torch -t ov-torch -t inductor-torch
run keras --sample "$N_KERAS" --sample-seed "$SEED" -t tvm-keras -t ov-keras
