"""Fixed costs per test (issue 16, section 1): per-test time before and after each fix, same instances.

The same tests (a seeded sample of N valid instances x one target) run through the local worker
pool (one spawned worker, the runner's own per-test path: reference twice, convert, compile, run,
oracle) once per mode. The modes add the fixes one at a time; each fix can be undone for
benchmarking through ``OPERA_FIXED_COSTS_UNDO`` (read by the worker):

- ``before``: every fix undone (imports-only warm-up, no ``gc.freeze``, torch's uncached composite-op
  scan, Inductor's graph caches on, torch's own ``py_impl``: torch's defaults);
- ``+warm-up op``: the worker takes one tiny real op (ReLU) through the target before the first
  test's clock starts (``warm-up-op``);
- ``+gc.freeze``: the objects alive after warm-up frozen out of the garbage collector (``gc-freeze``);
- ``+scan cache`` (tvm-torch, ov-torch: the targets whose frontends call ``run_decompositions``):
  the cached composite-op scan (``cia-scan-cache``);
- ``+lazy annotations`` (tvm-torch, ov-torch): torch's ``py_impl``, which ``run_decompositions``
  calls about 11,500 times, with its annotations not evaluated on every call
  (``py-impl-annotations``, opera/run/targets/_torch_py_impl.py);
- ``+graph caches off`` (inductor targets): Inductor's FX graph and AOT-autograd caches off
  (``inductor-graph-caches``; a fidelity fix).

The last mode is the code as shipped. Each mode gets a fresh worker and a fresh, empty Inductor cache
folder (``TORCHINDUCTOR_CACHE_DIR``), so ``before`` is a first night: on later nights Inductor's
on-disk cache would skip the code generation of every graph seen before. Recorded per mode: the
median, mean and 90th percentile of the per-test durations (the worker's own clock, the one the
timeout uses), the first test's duration, the wall time from the pool's start to the last verdict
(worker start-up and warm-up included) and tests per second on it, and the outcome counts. Every
instance's verdict (outcome, stage, signature) in every mode is compared with ``before``; any
difference is listed. With ``--reps`` > 1 the mode order rotates and the medians of the repetitions
are reported.

    nice -n 10 .venv/bin/python benchmarks/fixed_costs.py -t tvm-torch -n 40
    nice -n 10 .venv/bin/python benchmarks/fixed_costs.py -t tvm-keras --corpus harvested/keras.jsonl.gz -n 40

Rows are merged into ``benchmarks/results/fixed_costs.json`` keyed by (corpus, target, n, seed).
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import add_sample_arguments, load, save_row, shown

ROOT = Path(__file__).resolve().parents[1]
RESULTS = Path(__file__).resolve().parent / "results" / "fixed_costs.json"
UNDO_ENV = "OPERA_FIXED_COSTS_UNDO"

# (mode, the fix it adds); the fixes a target's modes add, in order
FIXES = {
    "+warm-up op": "warm-up-op",
    "+gc.freeze": "gc-freeze",
    "+scan cache": "cia-scan-cache",
    "+lazy annotations": "py-impl-annotations",
    "+graph caches off": "inductor-graph-caches",
}


def modes_for(target: str) -> list[str]:
    modes = ["before", "+warm-up op", "+gc.freeze"]
    if target in ("tvm-torch", "ov-torch"):
        modes.extend(["+scan cache", "+lazy annotations"])
    if target.startswith("inductor-"):
        modes.append("+graph caches off")
    return modes


def undo_for(mode: str, modes: list[str]) -> str:
    """The fixes a mode leaves undone: those of the modes after it."""
    return ",".join(FIXES[m] for m in modes[modes.index(mode) + 1 :])


def sample(corpus: str, library: str, n: int, seed: int) -> list[Any]:
    """A seeded random sample of ``n`` valid, migratable instances of ``library``, in corpus order."""
    from opera.corpus import CorpusReader

    usable = [i for i in CorpusReader([corpus]) if i.library == library and i.valid is not False and i.migratable]
    picked = sorted(random.Random(seed).sample(range(len(usable)), min(n, len(usable))))
    return [usable[k] for k in picked]


def run_mode(instances: list[Any], target: str, undo: str, seed: int) -> dict[str, Any]:
    """One fresh worker over every instance; per-instance verdicts and durations, wall time."""
    from opera.run.executors import TestTask, WorkerSettings
    from opera.run.executors.local import LocalExecutor

    saved = {k: os.environ.get(k) for k in (UNDO_ENV, "TORCHINDUCTOR_CACHE_DIR")}
    with tempfile.TemporaryDirectory(prefix="opera-fixed-costs-") as tmp:
        os.environ[UNDO_ENV] = undo
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(Path(tmp) / "inductor")
        started = time.perf_counter()
        executor = LocalExecutor(1, WorkerSettings(seed=seed, log_dir=str(Path(tmp) / "logs")))
        results = {}
        try:
            for seq, inst in enumerate(instances):
                executor.submit(TestTask(seq, inst, target))
            while executor.in_flight():
                for outcome in executor.poll(0.5):
                    if outcome.result is not None:
                        results[outcome.task.seq] = outcome.result
        finally:
            executor.close()
            wall = time.perf_counter() - started
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value
    ordered = [results[k] for k in sorted(results)]
    return {
        "wall": wall,
        "durations": [r.duration or 0.0 for r in ordered],
        "verdicts": {
            instances[k].id: [r.outcome.value, r.stage.value if r.stage else None, r.signature]
            for k, r in sorted(results.items())
        },
        "apis": {instances[k].id: instances[k].api for k in results},
    }


def _p90(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))]


def measure(corpus: str, target: str, n: int, seed: int, reps: int) -> dict[str, Any]:
    from collections import Counter

    from opera.run.targets import get_target

    library = get_target(target).library
    instances = sample(corpus, library, n, seed)
    modes = modes_for(target)
    runs: dict[str, list[dict[str, Any]]] = {m: [] for m in modes}
    loads = [load()]
    for rep in range(reps):
        order = modes[rep % len(modes) :] + modes[: rep % len(modes)]
        for mode in order:
            runs[mode].append(run_mode(instances, target, undo_for(mode, modes), seed))
            print(f"  {target} rep {rep + 1} {mode}: wall {runs[mode][-1]['wall']:.1f} s", file=sys.stderr, flush=True)
        loads.append(load())

    def med(values: list[float]) -> float:
        return round(statistics.median(values), 4)

    table: dict[str, Any] = {}
    for mode in modes:
        reps_of = runs[mode]
        table[mode] = {
            "undo": undo_for(mode, modes),
            "median_s": med([statistics.median(r["durations"]) for r in reps_of]),
            "mean_s": med([statistics.fmean(r["durations"]) for r in reps_of]),
            "p90_s": med([_p90(r["durations"]) for r in reps_of]),
            "first_s": med([r["durations"][0] for r in reps_of]),
            "sum_s": med([sum(r["durations"]) for r in reps_of]),
            "wall_s": med([r["wall"] for r in reps_of]),
            "tests_per_s": med([len(r["durations"]) / r["wall"] for r in reps_of]),
            "outcomes": dict(Counter(v[0] for v in reps_of[0]["verdicts"].values())),
        }
    reference = runs["before"][0]
    differences = []
    for mode in modes:
        for rep, run in enumerate(runs[mode]):
            for inst_id, verdict in run["verdicts"].items():
                if verdict != reference["verdicts"].get(inst_id):
                    differences.append(
                        {
                            "instance": inst_id,
                            "api": run["apis"][inst_id],
                            "mode": mode,
                            "rep": rep,
                            "before": reference["verdicts"].get(inst_id),
                            "now": verdict,
                        }
                    )
    return {
        "corpus": shown(corpus),
        "target": target,
        "n": len(instances),
        "seed": seed,
        "reps": reps,
        "modes": table,
        "verdicts_identical": not differences,
        "verdict_differences": differences,
        "load": loads,
        "machine": f"{platform.machine()} {os.cpu_count()} cpus, python {platform.python_version()}",
        "measured": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


def render(row: dict[str, Any]) -> str:
    lines = [
        f"{row['target']}: {row['n']} instances of {row['corpus']} (seed {row['seed']}, {row['reps']} rep(s))",
        f"{'mode':<20} {'median':>8} {'mean':>8} {'p90':>8} {'first':>8} {'wall':>8} {'tests/s':>8}",
    ]
    for mode, m in row["modes"].items():
        lines.append(
            f"{mode:<20} {m['median_s']:>8.3f} {m['mean_s']:>8.3f} {m['p90_s']:>8.3f} {m['first_s']:>8.3f} "
            f"{m['wall_s']:>8.1f} {m['tests_per_s']:>8.2f}"
        )
    if row["verdicts_identical"]:
        lines.append("verdicts: identical instance by instance in every mode")
    else:
        lines.append(f"verdicts: {len(row['verdict_differences'])} difference(s)")
        for d in row["verdict_differences"]:
            lines.append(f"  {d['mode']} rep {d['rep']}: {d['api']} ({d['instance']}) {d['before']} -> {d['now']}")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_sample_arguments(parser, n=40, reps=1)
    parser.set_defaults(corpus="harvested/torch.jsonl.gz", target="tvm-torch")
    args = parser.parse_args()
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    os.environ.setdefault("CI", "true")  # no OpenVINO telemetry
    row = measure(args.corpus, args.target, args.n, args.seed, args.reps)
    print(render(row))
    save_row(RESULTS, row, ("corpus", "target", "n", "seed"))


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    main()
