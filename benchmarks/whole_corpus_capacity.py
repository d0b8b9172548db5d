"""The capacity line, measured (issue 16): how long each corpus of `benchmarks/whole_corpus.sh` took
on this machine, from the store the runs wrote.

    python benchmarks/whole_corpus_capacity.py STORE [--gap 600] [-o benchmarks/results/whole_corpus_capacity.json]

A run resumed across sessions has pauses between its results: a gap longer than ``--gap`` seconds
between two consecutive stored results is not counted (a test's own limit is far shorter). For each
run: its corpus and options, tests stored and planned, wall hours while running, tests per hour,
the summed per-test durations by target (a worker's time on its tests: a batch's parts share
their batch's time), and, for a run not yet complete, the wall hours its remaining tests would take
at its own rate.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import sys
from pathlib import Path
from typing import Any


def run_figures(db: sqlite3.Connection, run_id: int, config: dict[str, Any], status: str, gap: float) -> dict[str, Any]:
    rows = db.execute("SELECT finished, duration, target FROM results WHERE run = ? ORDER BY finished", (run_id,)).fetchall()
    planned = db.execute("SELECT COUNT(*) FROM planned WHERE run = ?", (run_id,)).fetchone()[0]
    wall = 0.0
    previous = None
    for finished, _, _ in rows:
        if previous is not None and finished - previous < gap:
            wall += finished - previous
        previous = finished
    by_target: dict[str, list[float]] = {}
    for _, duration, target in rows:
        by_target.setdefault(target, [0, 0.0])
        by_target[target][0] += 1
        by_target[target][1] += duration
    per_hour = len(rows) / (wall / 3600) if wall else None
    remaining = max(0, planned - len(rows))
    selection = config.get("selection") or {}
    return {
        "run": run_id,
        "corpus": [Path(c).name for c in config.get("corpus", [])],
        "targets": sorted(by_target),
        "oracles": ["reference", *config.get("rules", [])],
        "batch": config.get("batch", 1),
        "sample": selection.get("sample"),
        "status": status,
        "tests": len(rows),
        "planned": planned,
        "wall_hours": round(wall / 3600, 2),
        "tests_per_hour": round(per_hour) if per_hour else None,
        "test_hours_by_target": {t: round(s / 3600, 2) for t, (n, s) in sorted(by_target.items())},
        "hours_left_at_this_rate": round(remaining / per_hour, 2) if per_hour and remaining else 0.0,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("store", type=Path)
    parser.add_argument("--gap", type=float, default=600.0, help="a pause longer than this (s) is not counted")
    parser.add_argument("-o", "--output", type=Path)
    args = parser.parse_args(argv)
    if not args.store.is_file():
        print(f"store not found: {args.store}", file=sys.stderr)
        return 2
    db = sqlite3.connect(f"file:{args.store}?mode=ro", uri=True)
    runs = [
        run_figures(db, run_id, json.loads(config), status, args.gap)
        for run_id, config, status in db.execute("SELECT id, config, status FROM runs ORDER BY id")
    ]
    print("| run | corpus | oracles | batch | tests (planned) | status | wall h | tests/h | h left |")
    print("|---:|---|---|---:|---:|---|---:|---:|---:|")
    for r in runs:
        corpus = ", ".join(r["corpus"]) + (f" (sample {r['sample']})" if r["sample"] else "")
        oracles = "every oracle" if len(r["oracles"]) > 4 else ",".join(r["oracles"])
        print(
            f"| {r['run']} | {corpus} | {oracles} | {r['batch']} | {r['tests']:,} ({r['planned']:,}) | {r['status']} "
            f"| {r['wall_hours']} | {r['tests_per_hour'] or '-'} | {r['hours_left_at_this_rate']} |"
        )
    total = sum(r["wall_hours"] + r["hours_left_at_this_rate"] for r in runs)
    print(f"all runs, the incomplete ones finished at their own rate: {total:.1f} wall hours")
    if args.output:
        args.output.write_text(json.dumps({"store": args.store.name, "gap_s": args.gap, "runs": runs, "total_wall_hours": round(total, 2)}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
