#!/usr/bin/env bash
# Verify the GPU target inductor-torch-cuda on a machine with an NVIDIA GPU and PyTorch with CUDA.
#
#   benchmarks/gpu_check.sh [OUT_DIR] [SAMPLE] [BUDGET]
#
# Runs the same random sample of the shipped torch corpus through inductor-torch-cuda and
# inductor-torch (CPU), verifies every new signature's reproducer in a fresh process, then runs
# the metamorphic rules that apply to Inductor (optlevel, transforms) on a smaller slice of the
# CUDA target (RULES_SAMPLE, RULES_SEED, RULES_ORACLES change that slice; GEN_SAMPLE=N adds N
# instances of the generated torch corpus through both targets). Needs only torch (+ numpy, onnx, tqdm, pandas) and Opera itself: on a GPU image whose
# Python differs from the pinned one, install the wheel with --no-deps --target DIR and put DIR on
# PYTHONPATH (`pip wheel --no-deps . -w .whl` makes it). Everything lands in OUT_DIR (default gpu-check/):
# env.txt, run.txt, bugs.txt, rules.txt, gen.txt, pytest.txt and store.tgz (the SQLite store with reproducers).
set -u
out=${1:-gpu-check}
sample=${2:-400}
budget=${3:-4m}
gpu=${GPU_TARGET:-inductor-torch-cuda}  # GPU_TARGET=inductor-torch tries the script on a CPU
py=${PYTHON:-python3}
mkdir -p "$out"
# PYTHONSAFEPATH: `python -m opera` in the checkout must import the installed package, not ./opera
export PYTHONUNBUFFERED=1 PYTHONSAFEPATH=1
{
  date -u
  nvidia-smi -L
  "$py" -c "import sys, torch; print(sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda, torch.cuda.is_available() and torch.cuda.get_device_name(0))"
  "$py" -m opera targets
} 2>&1 | tee "$out/env.txt"
store=$out/gpu.db
rm -rf "$store" "$store".d
/usr/bin/time -f 'run wall %e s' "$py" -m opera run harvested/torch.jsonl.gz -t "$gpu" -t inductor-torch \
  --sample "$sample" --sample-seed 0 --budget "$budget" --store "$store" --quiet --no-verify 2>&1 | tee "$out/run.txt"
timeout 120 "$py" -m opera bugs --store "$store" --verify-pending --quiet > "$out/verify.txt" 2>&1
"$py" -m opera bugs --store "$store" > "$out/bugs.txt" 2>&1

timeout 100 "$py" -m opera run harvested/torch.jsonl.gz -t "$gpu" --oracle "${RULES_ORACLES:-optlevel,transforms}" \
  --sample "${RULES_SAMPLE:-48}" --sample-seed "${RULES_SEED:-1}" --budget 70s --store "$out/rules.db" --quiet --no-verify > "$out/rules.txt" 2>&1
"$py" -m opera bugs --store "$out/rules.db" >> "$out/rules.txt" 2>&1
# GEN_SAMPLE > 0: the same pair of targets on a sample of the generated torch corpus (new dtypes,
# values and shapes the human tests never hold), every new signature's reproducer verified
gen=${GEN_SAMPLE:-0}
if [ "$gen" -gt 0 ]; then
  timeout "${GEN_TIMEOUT:-150}" "$py" -m opera run harvested/generated-torch.jsonl.gz -t "$gpu" -t inductor-torch \
    --sample "$gen" --sample-seed 0 --budget "${GEN_BUDGET:-2m}" --store "$out/gen.db" --quiet --no-verify > "$out/gen.txt" 2>&1
  timeout 60 "$py" -m opera bugs --store "$out/gen.db" --verify-pending --quiet >> "$out/gen.txt" 2>&1
  "$py" -m opera bugs --store "$out/gen.db" --root-causes >> "$out/gen.txt" 2>&1
fi
# the CUDA target's own tests (PYTHONSAFEPATH above keeps the checkout's opera/ from shadowing the wheel)
timeout 120 "$py" -m pytest tests/test_inductor_cuda.py -q > "$out/pytest.txt" 2>&1
tar czf "$out/store.tgz" -C "$out" gpu.db gpu.db.d rules.db rules.db.d gen.db gen.db.d 2>/dev/null
rm -rf "$store" "$store".d "$out"/rules.db* "$out"/gen.db*
ls -la "$out"
