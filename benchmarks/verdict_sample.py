"""Draw the stratified random sample of bug signatures that people judge by hand (issue 11).

Every signature of a store (crash, native-crash, timeout, inconsistent) is listed per target; the
sample takes at least ``--per-target`` of each target (all of them where a target has fewer), then
fills up to ``--size`` at random over the rest, with a fixed seed, so that the same store gives the
same sample. Output: a JSON list (one object per signature: target, outcome, signature, example
instance and API, count, reproducer, its verification status) to hand to the judges, and the
per-target counts on stderr.

    python benchmarks/verdict_sample.py STORE --size 32 --per-target 3 --seed 11 -o sample.json
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections import defaultdict
from pathlib import Path

from opera.store import ResultStore


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("store")
    parser.add_argument("--size", type=int, default=32)
    parser.add_argument("--per-target", type=int, default=3)
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("-o", "--output", required=True)
    args = parser.parse_args()
    with ResultStore(args.store) as store:
        bugs = store.bugs()
    by_target: dict[str, list] = defaultdict(list)
    for bug in sorted(bugs, key=lambda b: b.signature):
        by_target[bug.target].append(bug)
    rng = random.Random(args.seed)
    chosen = []
    for target in sorted(by_target):
        pool = by_target[target]
        chosen.extend(rng.sample(pool, min(args.per_target, len(pool))))
    rest = [b for b in sorted(bugs, key=lambda b: b.signature) if b not in chosen]
    chosen.extend(rng.sample(rest, max(0, min(args.size - len(chosen), len(rest)))))
    rows = [
        {
            "target": b.target,
            "outcome": b.outcome.value,
            "signature": b.signature,
            "count": b.count,
            "example_instance": b.example_instance,
            "example_api": b.example_api,
            "reproducer": b.reproducer,
            "reproduces": getattr(b, "repro_status", None),
        }
        for b in chosen
    ]
    Path(args.output).write_text(json.dumps(rows, indent=1) + "\n", encoding="utf-8")
    counts = defaultdict(int)
    for row in rows:
        counts[row["target"]] += 1
    total = {t: len(v) for t, v in by_target.items()}
    print(
        f"{len(rows)} of {len(bugs)} signatures: "
        + ", ".join(f"{t} {counts[t]}/{total[t]}" for t in sorted(total)),
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
