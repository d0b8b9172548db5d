"""Runner throughput: tests per second of ``opera run`` over a corpus slice, per target.

Runs the real runner (persistent local workers, reference twice, convert/compile/run, oracle,
one SQLite commit per result) into a throw-away store and records wall time, tests/s, the mean
per-test duration per target and the outcome counts. ``test-faults`` (onnxruntime as the
"compiler") measures the runner's own overhead.

    .venv/bin/python benchmarks/runner_throughput.py harvested/onnx.jsonl.gz -t test-faults --limit 300
    .venv/bin/python benchmarks/runner_throughput.py harvested/onnx.jsonl.gz -t tvm-onnx -t ov-onnx --limit 100

Rows are merged into ``benchmarks/results/runner_throughput.json`` keyed by (corpus, targets,
limit, workers).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import save_row

RESULTS = Path(__file__).resolve().parent / "results" / "runner_throughput.json"


def measure(corpus: str, targets: list[str], limit: int | None, workers: int) -> dict[str, Any]:
    from opera.run.runner import RunConfig, start_run
    from opera.store import ResultStore

    with tempfile.TemporaryDirectory(prefix="opera-bench-") as tmp:
        store = str(Path(tmp) / "bench.db")
        config = RunConfig(corpus=[corpus], targets=targets, store=store, workers=workers, limit=limit)
        started = time.perf_counter()
        summary = start_run(config, show_progress=False)
        wall = time.perf_counter() - started
        with ResultStore(store) as db:
            results = db.results(summary.run_id)
    per_target: dict[str, dict[str, Any]] = {}
    for r in results:
        row = per_target.setdefault(r.target, {"tests": 0, "seconds": 0.0})
        row["tests"] += 1
        row["seconds"] += r.duration
    return {
        "corpus": corpus,
        "targets": targets,
        "limit": limit,
        "workers": workers,
        "tests": len(results),
        "wall_seconds": round(wall, 2),
        "tests_per_second": round(len(results) / wall, 2),
        "mean_test_seconds": {t: round(v["seconds"] / max(1, v["tests"]), 3) for t, v in per_target.items()},
        "outcomes": summary.counts,
        "machine": f"{platform.machine()} {os.cpu_count()} cpus, load {os.getloadavg()[0]:.1f} at the end",
        "measured": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("corpus")
    parser.add_argument("--target", "-t", action="append", required=True)
    parser.add_argument("--limit", type=int, default=100)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    row = measure(args.corpus, args.target, args.limit, args.workers)
    print(json.dumps(row, indent=2))
    save_row(RESULTS, row, ("corpus", "targets", "limit", "workers"))


if __name__ == "__main__":
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    main()
