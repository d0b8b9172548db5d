#!/usr/bin/env python3
"""What each oracle beside the reference found on a stored run (issue 14): per target and rule, the
outcome counts, the median cost per test, the failing signatures, and which of them the reference
oracle did not already report (the rule failed on a test whose own verdict is not a failure).

    python benchmarks/rules_findings.py STORE [--run N] [-o benchmarks/results/rules_findings.json]

The run is one of `opera run ... --oracle all` (benchmarks/verdicts_run.sh with EXTRA="--oracle all").
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import statistics
import sys
from collections import defaultdict
from pathlib import Path

FAILURES = ("crash", "native-crash", "timeout", "inconsistent")


def _relative(message: str) -> str:
    """Tracebacks name files by absolute path: keep them from the repository or site-packages on."""
    import re

    return re.sub(r'File "[^"]*?/((?:site-packages|opera|templates|instrumentation)/)', r'File "\1', message)


def findings(store: Path, run: int | None) -> dict:
    db = sqlite3.connect(f"file:{store}?mode=ro", uri=True)
    where, params = ("WHERE u.run=?", (run,)) if run is not None else ("", ())
    rows = db.execute(
        """SELECT u.target, u.rule, u.outcome, u.signature, u.duration, u.instance_id, r.api, r.outcome, r.signature,
                  substr(u.message, 1, 300)
           FROM rule_results u JOIN results r ON r.run=u.run AND r.instance_id=u.instance_id AND r.target=u.target
           """ + where,
        params,
    ).fetchall()
    counts: dict = defaultdict(lambda: defaultdict(lambda: defaultdict(int)))
    costs: dict = defaultdict(lambda: defaultdict(list))
    signatures: dict = defaultdict(lambda: defaultdict(dict))
    for target, rule, outcome, sig, duration, iid, api, verdict, _test_sig, message in rows:
        counts[target][rule][outcome] += 1
        if outcome != "not-applicable":
            costs[target][rule].append(duration)
        if sig and outcome in ("inconsistent", "crash"):
            entry = signatures[rule].setdefault(
                sig, {"target": target, "tests": 0, "beyond_reference": 0, "examples": [], "message": message}
            )
            entry["tests"] += 1
            if verdict not in FAILURES:
                entry["beyond_reference"] += 1
            entry["message"] = _relative(entry["message"])
            if len(entry["examples"]) < 3:
                entry["examples"].append({"instance": iid, "api": api, "test_verdict": verdict})
    per_rule = {}
    for rule in sorted({r for t in counts for r in counts[t]}):
        sigs = signatures.get(rule, {})
        per_rule[rule] = {
            "signatures": len(sigs),
            "signatures_beyond_reference": sum(1 for e in sigs.values() if e["beyond_reference"]),
        }
    return {
        "runs": [run] if run is not None else [r for (r,) in db.execute("SELECT DISTINCT run FROM rule_results ORDER BY run")],
        "per_rule": per_rule,
        "counts": {t: {r: dict(o) for r, o in rs.items()} for t, rs in sorted(counts.items())},
        "median_seconds": {
            t: {r: round(statistics.median(v), 4) for r, v in rs.items() if v} for t, rs in sorted(costs.items())
        },
        "signatures": {r: dict(sorted(s.items())) for r, s in sorted(signatures.items())},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("store", type=Path)
    parser.add_argument("--run", type=int, help="one run (default: every run of the store)")
    parser.add_argument("-o", "--output", type=Path)
    args = parser.parse_args(argv)
    result = findings(args.store, args.run)
    text = json.dumps(result, indent=1)
    if args.output:
        args.output.write_text(text + "\n")
    for rule, figures in result["per_rule"].items():
        print(f"{rule}: {figures['signatures']} failing signatures, {figures['signatures_beyond_reference']} beyond the reference")
    for target, rules in result["counts"].items():
        for rule, outcomes in rules.items():
            cost = result["median_seconds"].get(target, {}).get(rule)
            print(f"  {target:15} {rule:9} {dict(outcomes)}  median {cost} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
