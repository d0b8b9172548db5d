"""Ray executor throughput: 1 and 2 Ray nodes against the local pool (1 and 2 workers), same tests.

A seeded random sample of N valid instances of one corpus (default 200 ONNX instances on the cheap
ov-onnx target, where per-test overhead is most visible) runs four ways, each in a fresh Python
process, through ``start_run`` with its defaults (one SQLite commit per result, reproducers):

- ``local-1``, ``local-2``: the local pool with 1 / 2 workers;
- ``ray-1``, ``ray-2``: ``--executor ray`` on a ``ray.cluster_utils.Cluster`` of 1 / 2 nodes on
  this machine (``num_cpus=1`` each: one actor per node). The cluster is started before the clock
  starts (a real cluster is already running); connecting, probing the nodes and starting the
  actors and their workers are inside the run's wall time.

Reported per mode (medians over the repetitions): wall time and tests/s from start_run's call to
its return; the steady-state seconds per test (time between the commits of the 20%-th and the
last result, over the tests committed between them), and the *dispatch overhead per test*: the
steady-state time per test times the workers minus the mean test duration the worker measured
itself. Ray's added per-test cost is ``ray-1`` minus ``local-1`` on that figure.

Caveats: ray and ray's actors export OMP_NUM_THREADS=1 to the worker processes, the local pool
does not; both "nodes" share the same 2 cores, so 2 nodes cannot beat 2 local workers here. The
1-minute load average is recorded before and after each repetition: this machine is shared
with long measurement runs, so absolute figures are pessimistic.

    .venv/bin/python benchmarks/ray_throughput.py                 # 200 ONNX on ov-onnx, 2 reps
    .venv/bin/python benchmarks/ray_throughput.py -n 100 --reps 1

Results go to ``benchmarks/results/ray_throughput.json`` (one row per (corpus, target, n, seed)).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import add_sample_arguments, load, save_row, spawn, write_sample

ROOT = Path(__file__).resolve().parents[1]
RESULTS = Path(__file__).resolve().parent / "results" / "ray_throughput.json"
MODES = ("local-1", "local-2", "ray-1", "ray-2")
OBJECT_STORE = 100 << 20


def _steady(store: str, workers: int) -> dict[str, float]:
    db = sqlite3.connect(store)
    try:
        rows = db.execute("SELECT finished, duration FROM results ORDER BY finished").fetchall()
    finally:
        db.close()
    finished = [r[0] for r in rows]
    first = len(finished) // 5
    span = finished[-1] - finished[first]
    per_test = span / max(1, len(finished) - 1 - first)
    mean_duration = statistics.fmean(r[1] for r in rows[first + 1 :] if r[1] is not None)
    return {
        "steady_seconds_per_test": round(per_test, 4),
        "mean_test_duration": round(mean_duration, 4),
        "dispatch_overhead_per_test": round(per_test * workers - mean_duration, 4),
    }


def one(mode: str, sample: str, target: str, seed: int) -> None:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    kind, workers = mode.split("-")[0], int(mode.split("-")[1])
    cluster = None
    cluster_seconds = 0.0
    if kind == "ray":
        from ray.cluster_utils import Cluster

        t0 = time.perf_counter()
        cluster = Cluster(
            initialize_head=True,
            head_node_args={"num_cpus": 1, "object_store_memory": OBJECT_STORE, "include_dashboard": False},
        )
        for _ in range(workers - 1):
            cluster.add_node(num_cpus=1, object_store_memory=OBJECT_STORE)
        cluster.wait_for_nodes()
        cluster_seconds = time.perf_counter() - t0
    from opera.run.runner import RunConfig, start_run

    with tempfile.TemporaryDirectory(prefix="opera-ray-bench-") as tmp:
        store = str(Path(tmp) / "bench.db")
        config = RunConfig(
            corpus=[sample],
            targets=[target],
            store=store,
            seed=seed,
            workers=workers if kind == "local" else 0,
            executor=kind,
            address=cluster.address if cluster is not None else None,
        )
        started = time.perf_counter()
        summary = start_run(config, show_progress=False)
        wall = time.perf_counter() - started
        steady = _steady(store, workers)
    if cluster is not None:
        import ray

        ray.shutdown()
        cluster.shutdown()
    counts = summary.counts.get(target, {})
    row = {"wall_seconds": wall, "cluster_start_seconds": cluster_seconds, "tests": sum(counts.values())}
    print("RESULT " + json.dumps({**row, **steady, "outcomes": counts}), flush=True)


def measure(corpus: str, target: str, n: int, seed: int, reps: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="opera-ray-bench-sample-") as tmp:
        sample = str(Path(tmp) / "sample.jsonl.gz")
        size = write_sample(corpus, n, seed, Path(sample))
        runs: dict[str, list[dict[str, Any]]] = {m: [] for m in MODES}
        log = []
        for rep in range(reps):
            order = MODES[rep % len(MODES) :] + MODES[: rep % len(MODES)]
            for mode in order:
                before = load()
                row = spawn(__file__, mode, sample, target, seed)
                row["load_before"], row["load_after"] = before, load()
                runs[mode].append(row)
                log.append({"rep": rep + 1, "mode": mode, **row})
                print(
                    f"rep {rep + 1} {mode:8s} {row['wall_seconds']:6.1f} s  {row['tests']} tests  "
                    f"steady {row['steady_seconds_per_test'] * 1000:.1f} ms/test  "
                    f"overhead {row['dispatch_overhead_per_test'] * 1000:.1f} ms  "
                    f"load {before[0]:.2f} -> {row['load_after'][0]:.2f}",
                    flush=True,
                )

    def med(mode: str, key: str) -> float:
        return statistics.median(r[key] for r in runs[mode])

    tests = {m: runs[m][0]["tests"] for m in MODES}
    wall = {m: round(med(m, "wall_seconds"), 2) for m in MODES}
    steady = {m: round(med(m, "steady_seconds_per_test"), 4) for m in MODES}
    overhead = {m: round(med(m, "dispatch_overhead_per_test"), 4) for m in MODES}
    return {
        "corpus": corpus,
        "target": target,
        "n": size,
        "seed": seed,
        "reps": reps,
        "tests": tests,
        "median_wall_seconds": wall,
        "tests_per_second": {m: round(tests[m] / wall[m], 2) for m in MODES},
        "steady_tests_per_second": {m: round(1 / steady[m], 2) for m in MODES},
        "median_steady_seconds_per_test": steady,
        "median_dispatch_overhead_per_test": overhead,
        "ray_added_overhead_per_test_seconds": round(overhead["ray-1"] - overhead["local-1"], 4),
        "median_cluster_start_seconds": {m: round(med(m, "cluster_start_seconds"), 2) for m in MODES[2:]},
        "speedup_ray2_vs_ray1": round(steady["ray-1"] / steady["ray-2"], 2),
        "speedup_local2_vs_local1": round(steady["local-1"] / steady["local-2"], 2),
        "runs": log,
        "machine": f"{platform.machine()} {os.cpu_count()} cpus, shared with other jobs",
        "load_average_1min": {
            "min": min(r["load_before"][0] for r in log),
            "max": max(max(r["load_before"][0], r["load_after"][0]) for r in log),
        },
        "measured": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


def render(row: dict[str, Any]) -> str:
    lines = [
        f"{row['n']} instances of {row['corpus']} on {row['target']}, median of {row['reps']} "
        f"({row['machine']}, 1-min load {row['load_average_1min']['min']}..{row['load_average_1min']['max']})",
        f"{'mode':<8} {'wall s':>7} {'tests/s':>8} {'steady/s':>9} {'overhead ms/test':>17}",
    ]
    for m in MODES:
        lines.append(
            f"{m:<8} {row['median_wall_seconds'][m]:>7.1f} {row['tests_per_second'][m]:>8.2f} "
            f"{row['steady_tests_per_second'][m]:>9.2f} {row['median_dispatch_overhead_per_test'][m] * 1000:>17.1f}"
        )
    lines.append(
        f"Ray adds {row['ray_added_overhead_per_test_seconds'] * 1000:.1f} ms per test (ray-1 vs local-1)"
    )
    lines.append(
        f"steady speed-up: ray 2 nodes vs 1 {row['speedup_ray2_vs_ray1']:.2f}x, "
        f"local 2 workers vs 1 {row['speedup_local2_vs_local1']:.2f}x"
    )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_sample_arguments(parser, n=200, reps=2)
    parser.add_argument("--one", choices=MODES, help=argparse.SUPPRESS)
    parser.add_argument("--sample", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        one(args.one, args.sample, args.target, args.seed)
        return
    row = measure(args.corpus, args.target, args.n, args.seed, args.reps)
    print(render(row))
    save_row(RESULTS, row, ("corpus", "target", "n", "seed"))


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    main()
