#!/usr/bin/env bash
# The whole shipped corpus, human and generated, on every CPU target (issue 13, item 5): one
# `opera run` per corpus file into one store (torch targets compiled in batches of 16: the same
# verdicts as alone, measured in benchmarks/batched.py). A killed run resumes with
# `opera run --resume N --store STORE`; this script skips corpus files whose run is complete.
# Then: opera triage --store STORE --reduce -o triage/ ; python benchmarks/triage_figures.py triage/
#   usage: benchmarks/whole_corpus.sh STORE
set -euo pipefail
STORE=${1:?store path}
HERE=$(cd "$(dirname "$0")/.." && pwd)
OPERA=${OPERA:-opera}
runs_of() {  # corpus file name -> "id status" of each run of the store on it
    [ -f "$STORE" ] || return 0
    python - "$STORE" "$1" <<'PY'
import json, sqlite3, sys
db = sqlite3.connect(sys.argv[1])
for run_id, config, status in db.execute("SELECT id, config, status FROM runs ORDER BY id"):
    if any(c.endswith("/" + sys.argv[2]) for c in json.loads(config)["corpus"]):
        print(run_id, status)
PY
}
run() {  # corpus file name, then opera run arguments
    local file=$1; shift
    local last; last=$(runs_of "$file" | tail -1)
    if [ "${last#* }" = complete ]; then echo "skip $file (run ${last% *} complete)"; return; fi
    if [ -n "$last" ]; then
        "$OPERA" run --resume "${last% *}" --store "$STORE" --quiet || [ $? -le 1 ]
    else
        "$OPERA" run "$HERE/harvested/$file" "$@" --store "$STORE" --quiet || [ $? -le 1 ]
    fi
}
run onnx.jsonl.gz -t tvm-onnx -t ov-onnx
run generated-onnx.jsonl.gz -t tvm-onnx -t ov-onnx
run keras.jsonl.gz -t tvm-keras -t ov-keras
run generated-keras.jsonl.gz -t tvm-keras -t ov-keras
run generated-torch.jsonl.gz -t tvm-torch -t ov-torch -t inductor-torch --batch 16
run torch.jsonl.gz -t tvm-torch -t ov-torch -t inductor-torch --batch 16
