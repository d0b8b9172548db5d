"""Bugs vs coverage gaps per target, on the same slice of tests in two stores (issue 11).

Each store is a run of ``benchmarks/verdicts_run.sh`` (one with an older checkout's Opera, one
with this one); only the first N instances of each order file are counted, so a bigger second run
is compared on the slice both ran. Per target: tests, unique bug signatures and the tests behind
them (crash, native-crash, timeout, inconsistent), coverage-gap tests (unsupported) and
operator x feature gap rows, and the outcomes that are neither (undefined, unstable-reference,
nondeterministic, harness-error).

    python benchmarks/verdict_counts.py --orders DIR --limit onnx=200,torch=100,keras=100 \
        before=STORE1 after=STORE2
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter, defaultdict
from pathlib import Path

from opera.corpus import CorpusReader
from opera.outcomes import FAILURE_OUTCOMES, Outcome
from opera.report.coverage_gaps import coverage_gaps
from opera.store import ResultStore

HARVESTED = Path(__file__).resolve().parents[1] / "harvested"


def _prefix(orders: Path, limits: dict[str, int]) -> set[str]:
    ids: set[str] = set()
    for library, n in limits.items():
        lines = [line.strip() for line in (orders / f"{library}.order").read_text().splitlines()]
        ids.update([line for line in lines if line and not line.startswith("#")][:n])
    return ids


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--orders", required=True, type=Path)
    parser.add_argument("--limit", required=True, help="library=N,library=N,...")
    parser.add_argument("stores", nargs="+", help="label=STORE")
    args = parser.parse_args()
    limits = {k: int(v) for k, v in (item.split("=") for item in args.limit.split(","))}
    wanted = _prefix(args.orders, limits)
    instances = {
        inst.id: inst
        for library in limits
        for inst in CorpusReader([HARVESTED / f"{library}.jsonl.gz"])
        if inst.id in wanted
    }
    rows = []
    for item in args.stores:
        label, path = item.split("=", 1)
        with ResultStore(path) as store:
            results = [r for r in store.results() if r.instance_id in wanted]
        by_target: dict[str, list] = defaultdict(list)
        for r in results:
            by_target[r.target].append(r)
        for target in sorted(by_target):
            rs = by_target[target]
            counts = Counter(r.outcome for r in rs)
            failing = [r for r in rs if r.outcome in FAILURE_OUTCOMES]
            gaps = coverage_gaps(rs, instances)
            rows.append(
                (
                    label,
                    target,
                    len(rs),
                    len({r.signature for r in failing}),
                    len(failing),
                    counts[Outcome.UNSUPPORTED],
                    len(gaps),
                    sum(counts[o] for o in (Outcome.UNDEFINED, Outcome.UNSTABLE_REFERENCE)),
                    counts[Outcome.NONDETERMINISTIC],
                    counts[Outcome.HARNESS_ERROR],
                    counts[Outcome.PASS],
                )
            )
    header = ("run", "target", "tests", "bug sigs", "failing", "unsupported", "gap rows", "undef/unstable", "nondet", "harness", "pass")
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for row in rows:
        print("| " + " | ".join(str(x) for x in row) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
