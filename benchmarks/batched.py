#!/usr/bin/env python3
"""Batched compilation (issue 16, section 2): tests per second with `opera run --batch 1` (every
test alone) and `--batch K`, on the same instances, and the verdicts compared instance by instance.

    python benchmarks/batched.py CORPUS ORDER --targets tvm-torch ov-torch --limit 300 --batch 16 [--reps 2]
        [-o benchmarks/results/batched.json]

Each mode runs in a fresh store (subprocess `opera run`, 2 workers, no reproducer verification);
modes alternate per repetition. Throughput is counted from the first to the last stored result, so
worker start-up and warm-up are left out; the median over repetitions is reported.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path


def run_mode(corpus: str, order: str, target: str, limit: int, batch: int, workers: int) -> tuple[float, dict[str, tuple]]:
    with tempfile.TemporaryDirectory(prefix="opera-batched-") as tmp:
        store = Path(tmp) / "s.db"
        cmd = [
            sys.executable, "-m", "opera.cli", "run", corpus, "-t", target, "--order", order, "--limit", str(limit),
            "--store", str(store), "--workers", str(workers), "--no-verify", "--no-reproducers", "-q", "--batch", str(batch),
        ]  # fmt: skip
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        db = sqlite3.connect(store)
        rows = db.execute("SELECT instance_id, outcome, stage, signature, finished FROM results ORDER BY finished").fetchall()
    finished = [r[4] for r in rows]
    rate = (len(rows) - 1) / (finished[-1] - finished[0]) if len(rows) > 1 and finished[-1] > finished[0] else 0.0
    return rate, {r[0]: (r[1], r[2], r[3]) for r in rows}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("corpus")
    parser.add_argument("order")
    parser.add_argument("--targets", nargs="+", default=["tvm-torch", "ov-torch"])
    parser.add_argument("--limit", type=int, default=300)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--reps", type=int, default=1)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("-o", "--output", type=Path)
    args = parser.parse_args(argv)
    report: dict[str, dict] = {}
    for target in args.targets:
        rates: dict[int, list[float]] = {1: [], args.batch: []}
        verdicts: dict[int, dict[str, tuple]] = {}
        for _ in range(args.reps):
            for batch in (1, args.batch):
                rate, seen = run_mode(args.corpus, args.order, target, args.limit, batch, args.workers)
                rates[batch].append(rate)
                verdicts[batch] = seen
        alone, batched = verdicts[1], verdicts[args.batch]
        differ = {iid: (alone.get(iid), batched.get(iid)) for iid in set(alone) | set(batched) if alone.get(iid) != batched.get(iid)}
        single, many = statistics.median(rates[1]), statistics.median(rates[args.batch])
        report[target] = {
            "tests": len(alone),
            "tests_per_s_alone": round(single, 3),
            f"tests_per_s_batch_{args.batch}": round(many, 3),
            "speedup": round(many / single, 2) if single else None,
            "verdicts_differ": len(differ),
            "differences": {k: [list(v[0] or ()), list(v[1] or ())] for k, v in sorted(differ.items())},
        }
        print(f"{target}: {len(alone)} tests, {single:.2f} -> {many:.2f} tests/s ({report[target]['speedup']}x), "
              f"{len(differ)} verdicts differ")  # fmt: skip
    if args.output:
        args.output.write_text(json.dumps({"limit": args.limit, "batch": args.batch, "reps": args.reps, "targets": report}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
