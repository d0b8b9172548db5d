#!/usr/bin/env bash
# The whole shipped corpus, human and generated, on every CPU target (issues 13 and 14): one
# `opera run` per corpus file into one store (torch targets compiled in batches of 16: the same
# verdicts as alone, measured in benchmarks/batched.py). A killed run resumes with
# `opera run --resume N --store STORE`; this script skips corpus files whose run is complete.
# Then: opera triage --store STORE --reduce -o triage/ ; python benchmarks/triage_figures.py triage/
#   usage: benchmarks/whole_corpus.sh STORE
set -euo pipefail
STORE=${1:?store path}
HERE=$(cd "$(dirname "$0")/.." && pwd)
OPERA=${OPERA:-opera}
runs_of() {  # corpus file name, sample size or "" -> "id status" of each such run of the store
    [ -f "$STORE" ] || return 0
    python - "$STORE" "$1" "$2" <<'PY'
import json, sqlite3, sys
db = sqlite3.connect(sys.argv[1])
for run_id, config, status in db.execute("SELECT id, config, status FROM runs ORDER BY id"):
    config = json.loads(config)
    sample = (config.get("selection") or {}).get("sample")
    if any(c.endswith("/" + sys.argv[2]) for c in config["corpus"]) and str(sample or "") == sys.argv[3]:
        print(run_id, status)
PY
}
run() {  # corpus file name, then opera run arguments (a --sample N among them keys the run too)
    local file=$1; shift
    local sample="" prev=""
    for arg in "$@"; do [ "$prev" = --sample ] && sample=$arg; prev=$arg; done
    local last; last=$(runs_of "$file" "$sample" | tail -1)
    if [ "${last#* }" = complete ]; then echo "skip $file (run ${last% *} complete)"; return; fi
    if [ -n "$last" ]; then
        "$OPERA" run --resume "${last% *}" --store "$STORE" --quiet || [ $? -le 1 ]
    else
        "$OPERA" run "$HERE/harvested/$file" "$@" --store "$STORE" --quiet || [ $? -le 1 ]
    fi
}
# ONNX and Keras with every oracle beside the reference (issue 14); torch in batches (the rules
# need each test alone, and torch's rules cost ~2 s a test: a seeded sample of 1,000 gets them)
run onnx.jsonl.gz -t tvm-onnx -t ov-onnx --oracle all
run generated-onnx.jsonl.gz -t tvm-onnx -t ov-onnx --oracle all
run keras.jsonl.gz -t tvm-keras -t ov-keras --oracle all
run generated-keras.jsonl.gz -t tvm-keras -t ov-keras --oracle all
run torch.jsonl.gz --sample 1000 --sample-seed 0 -t tvm-torch -t ov-torch -t inductor-torch --oracle all
run generated-torch.jsonl.gz -t tvm-torch -t ov-torch -t inductor-torch --batch 16
run torch.jsonl.gz -t tvm-torch -t ov-torch -t inductor-torch --batch 16
# the generated torch corpus with every oracle: a seeded sample, as for the human torch corpus
run generated-torch.jsonl.gz --sample 600 --sample-seed 0 -t tvm-torch -t ov-torch -t inductor-torch --oracle all
