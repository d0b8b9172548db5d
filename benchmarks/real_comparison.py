#!/usr/bin/env python3
"""The real comparison of prioritization strategies (issue 15): APFD and RAUC of every strategy on
each run of a store, over unique signatures and over root causes, and the ``opera`` strategy again
with a history of other runs (``--history``: what it would know on a later night).

    python benchmarks/real_comparison.py STORE [--run N ...] [--history RUN=HISTORY_STORE ...] \\
        [--coverage TARGET=FILE ...] [--random-seeds 10] [-o benchmarks/results/real_comparison.json] \\
        [--markdown TABLE.md]

``--history 2=other.db`` evaluates ``opera`` on run 2 with the history of ``other.db`` (never the
evaluated run itself); ``--history 2=a.db,b.db`` merges several stores (several earlier nights).
The coverage strategies run where ``--coverage`` gives a target's measured coverage, charged its
collection time.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from pathlib import Path
from typing import Any

from opera.report.build import build_report
from opera.report.tables import apfd_frame
from opera.store import ResultStore

STRATEGIES = ["opera", "op-only", "param-only", "random", "fast", "opera-artifact"]
# with --coverage TARGET=FILE (python -m opera.prioritize.coverage_data ... --store S --run N), charged
# the coverage pass's time in their time-to-bug curves; skipped on targets without a file
COVERAGE_STRATEGIES = ["total-cov", "add-cov"]


def table(
    store: str, run: int, bugs: str, seeds: int, history: list[str] | None, coverage: dict[str, str] | None = None
) -> dict[str, dict[str, Any]]:
    strategies = ["opera"] if history else STRATEGIES + (COVERAGE_STRATEGIES if coverage else [])
    report = build_report(
        store, run, strategies=strategies, random_seeds=seeds, bugs=bugs, history=history, coverage=coverage or {}
    )
    frame = apfd_frame(report)
    out: dict[str, dict[str, Any]] = {}
    for row in frame.to_dict("records"):
        name = "opera+history" if history and row["strategy"] == "opera" else row["strategy"]
        out.setdefault(row["target"], {})[name] = {
            "apfd": row["apfd"],
            "rauc_25": row.get("rauc_25"),
            "rauc_100": row.get("rauc_100"),
            "tests": row["tests"],
            "bugs": row["bugs"],
        }
    return out


def _apfd(rows: dict[str, Any], name: str) -> float | None:
    value = rows.get(name, {}).get("apfd")
    return None if value is None or math.isnan(value) else float(value)


def markdown(result: dict[str, Any]) -> str:
    """The APFD tables (over signatures, over root causes) of a result; "-" where a strategy did not
    run on a target (the coverage strategies without a coverage file), means over the targets it ran on."""
    names = [*STRATEGIES, *(COVERAGE_STRATEGIES if result.get("coverage") else []), "opera+history"]
    lines = []
    for bugs, per_target in result["bugs"].items():
        lines.append(f"APFD over {bugs}:\n")
        lines.append("| target (tests, bugs) | " + " | ".join(names) + " |")
        lines.append("|---|" + "---:|" * len(names))
        means: dict[str, list[float]] = {n: [] for n in names}
        for target, rows in per_target.items():
            first = next(iter(rows.values()))
            values = {n: _apfd(rows, n) for n in names}
            best = max((v for v in values.values() if v is not None), default=None)
            cells = []
            for n, value in values.items():
                if value is None:
                    cells.append("-")
                    continue
                means[n].append(value)
                cells.append(f"**{value:.3f}**" if value == best else f"{value:.3f}")
            lines.append(f"| {target} ({first['tests']:,}, {first['bugs']}) | " + " | ".join(cells) + " |")
        cells = [
            (f"{statistics.fmean(v):.3f}" + (f" ({len(v)})" if len(v) < len(per_target) else "")) if v else "-"
            for v in means.values()
        ]
        lines.append("| mean | " + " | ".join(cells) + " |\n")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("store")
    parser.add_argument("--run", type=int, action="append")
    parser.add_argument("--history", action="append", default=[], metavar="RUN=STORE")
    parser.add_argument("--random-seeds", type=int, default=10)
    parser.add_argument("--coverage", action="append", default=[], metavar="TARGET=FILE")
    parser.add_argument("-o", "--output", type=Path)
    parser.add_argument("--markdown", type=Path)
    parser.add_argument("--render", type=Path, metavar="JSON", help="only print the tables of an earlier -o file")
    args = parser.parse_args(argv)
    if args.render:
        print(markdown(json.loads(args.render.read_text())))
        return 0
    histories = {int(k): v.split(",") for k, v in (h.split("=", 1) for h in args.history)}
    coverage = dict(c.split("=", 1) for c in args.coverage)
    with ResultStore(args.store) as db:
        runs = args.run or [r.id for r in db.runs()]
    result: dict[str, Any] = {"store": Path(args.store).name, "random_seeds": args.random_seeds, "bugs": {}}
    for bugs in ("signatures", "root-causes"):
        per_target: dict[str, dict[str, Any]] = {}
        for run in runs:
            with ResultStore(args.store) as db:
                targets = set(db.get_run(run).config.get("targets", []))
            own = {t: f for t, f in coverage.items() if t in targets}  # a coverage file per target of this run
            rows = table(args.store, run, bugs, args.random_seeds, None, own)
            if run in histories:
                for target, extra in table(args.store, run, bugs, 1, histories[run]).items():
                    rows.setdefault(target, {}).update({k: v for k, v in extra.items() if k == "opera+history"})
            per_target.update(rows)
        result["bugs"][bugs] = per_target
    result["coverage"] = coverage
    text = markdown(result)
    print(text)
    if args.markdown:
        args.markdown.write_text(text + "\n")
    if args.output:
        args.output.write_text(json.dumps(result, indent=1, default=float) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
