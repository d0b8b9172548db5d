#!/usr/bin/env python3
"""torch's ``py_impl`` with and without postponed annotations (issue 16, tenth session), on the
tests it matters most to: those that run alone.

The instances a store recorded with one outcome on one target (``--outcome unsupported``: the tests a
batch sends back to run alone) run alone in a fresh warmed process (``execute_task``, the worker's
own path), once with Opera's lazy ``py_impl`` and once with torch's own
(``OPERA_FIXED_COSTS_UNDO=py-impl-annotations``), alternating ``--reps`` times; per-test mean and
median per run, and the medians over runs.

    python benchmarks/lazy_annotations.py STORE -t tvm-torch --outcome unsupported -n 40 --reps 3

STORE: a store of a run of ``harvested/torch.jsonl.gz`` on the target (e.g. ``opera run
harvested/torch.jsonl.gz -t tvm-torch --sample 1000 --sample-seed 5 --store STORE``). Rows are
merged into ``benchmarks/results/lazy_annotations.json`` keyed by (target, outcome, n).
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import statistics
import subprocess
import sys
import time
from pathlib import Path

from _common import save_row

RESULTS = Path(__file__).resolve().parent / "results" / "lazy_annotations.json"
CORPUS = Path(__file__).resolve().parents[1] / "harvested" / "torch.jsonl.gz"


def one_process(target: str, ids: list[str]) -> list[float]:
    """Run in the child: the instances alone, after warm-up; their times."""
    from opera.corpus import CorpusReader
    from opera.run.execution import WorkerState, execute_task
    from opera.run.executors import TestTask, WorkerSettings

    wanted = set(ids)
    instances = [i for i in CorpusReader([str(CORPUS)]) if i.id in wanted]
    state = WorkerState(WorkerSettings(seed=5))
    state.warm_up(target, "torch")
    times = []
    for inst in instances:
        started = time.perf_counter()
        execute_task(TestTask(0, inst, target), state, lambda stage: None, lambda *a: None)
        times.append(time.perf_counter() - started)
    return times


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("store")
    parser.add_argument("-t", "--target", default="tvm-torch")
    parser.add_argument("--outcome", default="unsupported")
    parser.add_argument("-n", type=int, default=40)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(one_process(args.target, json.loads(args.child))))
        return 0
    query = "SELECT instance_id FROM results WHERE target = ? AND outcome = ? ORDER BY instance_id LIMIT ?"
    ids = [row[0] for row in sqlite3.connect(args.store).execute(query, (args.target, args.outcome, args.n))]
    if not ids:
        parser.error(f"no {args.outcome} result of {args.target} in {args.store}")
    runs: dict[str, list[dict[str, float]]] = {"lazy": [], "stock": []}
    for rep in range(args.reps):
        for mode in ("stock", "lazy") if rep % 2 == 0 else ("lazy", "stock"):
            env = {k: v for k, v in os.environ.items() if k != "OPERA_FIXED_COSTS_UNDO"}
            if mode == "stock":
                env["OPERA_FIXED_COSTS_UNDO"] = "py-impl-annotations"
            cmd = [sys.executable, __file__, args.store, "-t", args.target, "--child", json.dumps(ids)]
            out = subprocess.run(cmd, env=env, check=True, capture_output=True, text=True).stdout
            times = json.loads(out.strip().splitlines()[-1])
            runs[mode].append({"mean": statistics.mean(times), "median": statistics.median(times)})
            print(f"  {mode}: mean {runs[mode][-1]['mean']:.3f} s, median {runs[mode][-1]['median']:.3f} s", flush=True)
    medians = {mode: statistics.median(v["median"] for v in values) for mode, values in runs.items()}
    row: dict[str, object] = {"target": args.target, "outcome": args.outcome, "n": len(ids), "reps": args.reps}
    for mode, values in runs.items():
        row[f"{mode}_median_s"] = round(medians[mode], 4)
        row[f"{mode}_mean_s"] = round(statistics.median(v["mean"] for v in values), 4)
    row["speedup_median"] = round(medians["stock"] / medians["lazy"], 2)
    save_row(RESULTS, row, ("target", "outcome", "n"))
    print(row)
    return 0


if __name__ == "__main__":
    sys.exit(main())
