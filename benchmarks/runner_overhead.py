"""Runner overhead: ``opera run`` (1 and 2 workers) against a bare in-process loop, same tests.

A seeded random sample of N valid instances of one corpus is written to a temporary corpus file,
and the same tests (every instance x one target) run three ways, each in a fresh Python process:

- ``bare``: one loop in one process, calling the template and the target directly (build, the
  reference twice, convert, compile, run, compare: the work ``opera.run.execution`` does per test) with
  no isolation, no store, no progress bar, no reproducers;
- ``workers=1`` and ``workers=2``: ``opera run`` (``start_run``) with its defaults otherwise:
  persistent spawned workers, per-test timeout, one SQLite commit per result, reproducers for
  failures.

Each timing counts from before the frameworks are imported (the bare loop imports them itself;
``opera run``'s workers import them at start-up) to the last result, so start-up is part of both.
The three modes alternate over the repetitions (rotated order) and the medians are reported: wall
time, tests/s, the overhead of one worker against the bare loop, and the speed-up of two workers
over one. The machine's load average is recorded before and after each repetition.

OpenVINO's telemetry is switched off in all three (``CI=true``, which ``openvino_telemetry`` reads
as "decline"): on every ``convert_model`` it forks a ``multiprocessing`` child to post events and
waits for it. Opera's workers are daemonic processes, which may not have children, so there it
fails at once and costs nothing; in a plain process it made each ov-onnx test ~10x slower here
(0.3 s instead of 0.03 s), which would credit the runner with a large negative "overhead".

    .venv/bin/python benchmarks/runner_overhead.py                       # 200 ONNX on ov-onnx, 3 reps
    .venv/bin/python benchmarks/runner_overhead.py -n 100 --target tvm-onnx --reps 3

Results go to ``benchmarks/results/runner_overhead.json`` (one row per (corpus, target, n, seed)).
Issue targets: overhead < 15% with one worker; two workers >= 1.7x one worker's throughput.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from _common import add_sample_arguments, load, save_row, spawn, write_sample

ROOT = Path(__file__).resolve().parents[1]
RESULTS = Path(__file__).resolve().parent / "results" / "runner_overhead.json"
MODES = ("bare", "workers=1", "workers=2")


# ---- one mode, in a fresh process -------------------------------------------------------------
def _copies(arrays: list[Any]) -> list[Any]:
    import numpy as np

    return [a.copy() if isinstance(a, np.ndarray) else a for a in arrays]


def run_bare(sample: str, target_name: str, seed: int) -> dict[str, Any]:
    """Template + target called directly in one loop, no isolation; the same work per test as
    ``opera.run.execution._execute_test`` minus its bookkeeping."""
    started = time.perf_counter()
    from opera.corpus import CorpusReader
    from opera.run.targets import get_target
    from opera.templates import get_template
    from opera.verdict.oracles import compare_outputs, load_oracle_config

    oracle = load_oracle_config(None)
    target = get_target(target_name)
    reason = target.availability()
    if reason is not None:
        raise SystemExit(f"{target_name} is not available: {reason}")
    outcomes: Counter[str] = Counter()
    for inst in CorpusReader([sample]):
        if inst.library != target.library:
            continue
        try:
            template = get_template(inst.library)
            built = template.build(inst, seed)
            pristine = _copies(built.inputs)
            built.inputs = _copies(pristine)
            reference = template.reference(built)
            built.inputs = _copies(pristine)
            second = template.reference(built)
            built.inputs = _copies(pristine)
        except Exception:
            outcomes["invalid"] += 1
            continue
        dtypes = [a.dtype.name for a in pristine if hasattr(a, "dtype")]
        if not compare_outputs(reference, second, oracle, target=None, input_dtypes=dtypes).consistent:
            outcomes["nondeterministic"] += 1
            continue
        try:
            outputs = target.run(target.compile(target.convert(built)), _copies(pristine))
        except Exception:
            outcomes["error"] += 1
            continue
        try:
            same = compare_outputs(reference, outputs, oracle, target=target_name, input_dtypes=dtypes)
            outcomes["pass" if same.consistent else "inconsistent"] += 1
        except Exception:
            outcomes["inconsistent"] += 1
    return {
        "wall_seconds": time.perf_counter() - started,
        "tests": sum(outcomes.values()),
        "outcomes": outcomes,
    }


def run_runner(sample: str, target_name: str, seed: int, workers: int) -> dict[str, Any]:
    started = time.perf_counter()
    from opera.run.runner import RunConfig, start_run

    with tempfile.TemporaryDirectory(prefix="opera-overhead-") as tmp:
        config = RunConfig(
            corpus=[sample],
            targets=[target_name],
            store=str(Path(tmp) / "bench.db"),
            seed=seed,
            workers=workers,
        )
        summary = start_run(config, show_progress=False)
    counts = summary.counts.get(target_name, {})
    return {
        "wall_seconds": time.perf_counter() - started,
        "tests": sum(counts.values()),
        "outcomes": counts,
    }


def one(mode: str, sample: str, target: str, seed: int) -> None:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    row = (
        run_bare(sample, target, seed) if mode == "bare" else run_runner(sample, target, seed, int(mode[8:]))
    )
    print("RESULT " + json.dumps(row), flush=True)


# ---- the driver ---------------------------------------------------------------------------------
def measure(corpus: str, target: str, n: int, seed: int, reps: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="opera-overhead-sample-") as tmp:
        sample = str(Path(tmp) / "sample.jsonl.gz")
        size = write_sample(corpus, n, seed, Path(sample))
        runs: dict[str, list[dict[str, Any]]] = {m: [] for m in MODES}
        reps_log = []
        for rep in range(reps):
            order = MODES[rep % len(MODES) :] + MODES[: rep % len(MODES)]  # alternate the order
            for mode in order:
                load_before = load()
                row = spawn(__file__, mode, sample, target, seed)
                row["load_before"], row["load_after"] = load_before, load()
                runs[mode].append(row)
                reps_log.append({"rep": rep + 1, "mode": mode, **row})
                print(
                    f"rep {rep + 1} {mode:9s} {row['wall_seconds']:7.1f} s  {row['tests']} tests  "
                    f"load {load_before[0]:.2f} -> {row['load_after'][0]:.2f}  {dict(row['outcomes'])}",
                    flush=True,
                )
    median = {m: statistics.median(r["wall_seconds"] for r in runs[m]) for m in MODES}
    tests = {m: runs[m][0]["tests"] for m in MODES}
    rate = {m: tests[m] / median[m] for m in MODES}
    return {
        "corpus": corpus,
        "target": target,
        "n": size,
        "seed": seed,
        "reps": reps,
        "median_wall_seconds": {m: round(median[m], 2) for m in MODES},
        "tests": tests,
        "tests_per_second": {m: round(rate[m], 2) for m in MODES},
        "overhead_1_worker_pct": round(100 * (median["workers=1"] / median["bare"] - 1), 1),
        "speedup_2_vs_1_workers": round(rate["workers=2"] / rate["workers=1"], 2),
        "runs": reps_log,
        "machine": f"{platform.machine()} {os.cpu_count()} cpus",
        "load_average_1min": {
            "min": min(r["load_before"][0] for r in reps_log),
            "max": max(r["load_after"][0] for r in reps_log),
        },
        "measured": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


def render(row: dict[str, Any]) -> str:
    lines = [
        f"{row['n']} instances of {row['corpus']} on {row['target']}, median of {row['reps']} alternating "
        f"repetitions ({row['machine']}, 1-min load {row['load_average_1min']['min']}..{row['load_average_1min']['max']})",
        f"{'mode':<10} {'wall s':>8} {'tests/s':>8}",
    ]
    for m in MODES:
        lines.append(f"{m:<10} {row['median_wall_seconds'][m]:>8.1f} {row['tests_per_second'][m]:>8.2f}")
    lines.append(
        f"overhead of 1 worker vs the bare loop: {row['overhead_1_worker_pct']:+.1f}%  (target < 15%)"
    )
    lines.append(f"speed-up of 2 workers vs 1: {row['speedup_2_vs_1_workers']:.2f}x  (target >= 1.7x)")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_sample_arguments(parser, n=200, reps=3)
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
