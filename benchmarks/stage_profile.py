"""Where a test's time goes, and the runner's own share (issue 16, sections "Where the time goes" and 3).

For a seeded sample of N valid instances of one target's library:

1. **Stages, in this process** (one warmed ``WorkerState``, the worker's own functions): build the
   model and compute the reference twice (``library_reference``), ``convert``, ``compile``, ``run``,
   judge the outputs (``judge_outputs``: the comparison and, on a difference, the second reference).
   A test that fails at a stage stops there, as in a worker.
2. **The runner**: the same instances through the local pool (one worker, reproducers off), its
   throughput from the first to the last result (worker start-up and warm-up left out).

The runner's own share per test is the runner's wall time per test minus the sum of the stages:
queueing, the pipes between driver and worker, storing each result (one SQLite commit), the
worker's bookkeeping. Medians over the instances; the mean too, since a few slow tests weigh on
throughput.

    nice -n 10 .venv/bin/python benchmarks/stage_profile.py -t tvm-torch -n 100
    .venv/bin/python benchmarks/stage_profile.py -t ov-onnx --corpus harvested/onnx.jsonl.gz -n 200

Rows are merged into ``benchmarks/results/stage_profile.json`` keyed by (corpus, target, n, seed).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import add_sample_arguments, save_row
from fixed_costs import sample

RESULTS = Path(__file__).resolve().parent / "results" / "stage_profile.json"
STAGES = ("reference", "convert", "compile", "run", "judge")


def profile_stages(instances: list[Any], target_name: str, seed: int) -> list[dict[str, float]]:
    from opera.run.execution import WorkerState, library_reference
    from opera.run.executors import WorkerSettings
    from opera.verdict.judge import judge_outputs

    state = WorkerState(WorkerSettings(seed=seed))
    state.warm_up(target_name, instances[0].library)
    target = state.target(target_name)
    rows = []
    for inst in instances:
        row: dict[str, float] = {}
        try:
            t = time.perf_counter()
            built, pristine, reference, again = library_reference(inst, state)
            row["reference"] = time.perf_counter() - t
            t = time.perf_counter()
            converted = target.convert(built)
            row["convert"] = time.perf_counter() - t
            t = time.perf_counter()
            compiled = target.compile(converted)
            row["compile"] = time.perf_counter() - t
            t = time.perf_counter()
            outputs = target.run(compiled, [x.copy() if hasattr(x, "copy") else x for x in pristine])
            row["run"] = time.perf_counter() - t
            t = time.perf_counter()
            judge_outputs(state.oracle, target, built, pristine, reference, outputs, None if again.consistent else again, _finish)
            row["judge"] = time.perf_counter() - t
        except Exception:
            pass  # a failing stage ends the test, as in a worker; its time up to there is kept
        rows.append(row)
    return rows


def _finish(outcome: Any, stage: Any, **kw: Any) -> tuple[Any, Any]:
    return outcome, stage


def runner_per_test(instances: list[Any], target: str, seed: int) -> tuple[float, list[float]]:
    from opera.run.executors import TestTask, WorkerSettings
    from opera.run.executors.local import LocalExecutor

    with tempfile.TemporaryDirectory(prefix="opera-stage-profile-") as tmp:
        executor = LocalExecutor(1, WorkerSettings(seed=seed, log_dir=str(Path(tmp) / "logs")))
        finished: list[float] = []
        durations: list[float] = []
        try:
            for seq, inst in enumerate(instances):
                executor.submit(TestTask(seq, inst, target))
            while executor.in_flight():
                for outcome in executor.poll(0.2):
                    if outcome.result is not None:
                        finished.append(time.perf_counter())
                        durations.append(outcome.result.duration or 0.0)
        finally:
            executor.close()
    wall = (finished[-1] - finished[0]) / (len(finished) - 1) if len(finished) > 1 else 0.0
    return wall, durations


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_sample_arguments(parser, 100, 1)
    args = parser.parse_args(argv)
    from opera.run.targets import get_target

    library = get_target(args.target).library
    corpus = args.corpus
    if Path(corpus).name == "onnx.jsonl.gz" and library != "onnx":  # the default corpus is ONNX's
        corpus = str(Path(__file__).resolve().parents[1] / "harvested" / f"{library}.jsonl.gz")
    instances = sample(corpus, library, args.n, args.seed)
    stages = profile_stages(instances, args.target, args.seed)
    wall, durations = runner_per_test(instances, args.target, args.seed)
    sums = [sum(r.values()) for r in stages]
    row: dict[str, Any] = {
        "corpus": Path(corpus).name,
        "target": args.target,
        "n": len(instances),
        "seed": args.seed,
        "stage_median_s": {s: round(statistics.median([r[s] for r in stages if s in r] or [0.0]), 4) for s in STAGES},
        "stage_mean_s": {s: round(statistics.fmean([r.get(s, 0.0) for r in stages]), 4) for s in STAGES},
        "stages_sum_median_s": round(statistics.median(sums), 4),
        "stages_sum_mean_s": round(statistics.fmean(sums), 4),
        "worker_duration_median_s": round(statistics.median(durations), 4),
        "worker_duration_mean_s": round(statistics.fmean(durations), 4),
        "runner_wall_per_test_s": round(wall, 4),
        "runner_share_s": round(wall - statistics.fmean(sums), 4),
    }
    save_row(RESULTS, row, ("corpus", "target", "n", "seed"))
    print(
        f"{args.target}: {len(instances)} tests; stages (median s) "
        + ", ".join(f"{s} {v}" for s, v in row["stage_median_s"].items())
        + f"; sum mean {row['stages_sum_mean_s']} s, worker's clock mean {row['worker_duration_mean_s']} s, "
        f"runner wall per test {row['runner_wall_per_test_s']} s -> runner's own share {row['runner_share_s']} s"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
