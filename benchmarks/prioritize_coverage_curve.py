"""How fast each strategy's order reaches the frontend code the whole corpus reaches (TVM ONNX).

Needs per-test coverage data of the corpus on tvm-onnx, made by
``python -m opera.prioritize.coverage_data harvested/onnx.jsonl.gz --target tvm-onnx -o COV``.
For each strategy: the share of the statements covered by the whole corpus that the first 5, 10,
25 and 50 % of its order cover, and the strategy's own time. Writes
``benchmarks/results/prioritize_coverage_curve.json``.

    nice -n 10 python benchmarks/prioritize_coverage_curve.py COV [--corpus harvested/onnx.jsonl.gz] \
        [--equipped TVM_0.27_EQUIPPED_ONNX]

The equipped corpus defaults to ``equipped/tvm-0.27_equipped_onnx_tc.txt`` in $OPERA_SHARED, else in
shared/ beside the checkout; a missing file is a usage error.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from _common import ROOT, SHARED, data_path, shown

from opera.prioritize import prioritize_files
from opera.prioritize.coverage_data import load_coverage

RESULTS = ROOT / "benchmarks" / "results" / "prioritize_coverage_curve.json"
STRATEGIES = ("opera", "op-only", "param-only", "random", "fast", "total-cov", "add-cov")
FRACTIONS = (0.05, 0.10, 0.25, 0.50)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("coverage", type=data_path)
    parser.add_argument("--corpus", type=data_path, default=str(ROOT / "harvested" / "onnx.jsonl.gz"))
    parser.add_argument(
        "--equipped",
        type=data_path,
        default=str(SHARED / "equipped" / "tvm-0.27_equipped_onnx_tc.txt"),
        help="TVM's own ONNX tests as an equipped corpus (default: $OPERA_SHARED/equipped/"
        "tvm-0.27_equipped_onnx_tc.txt, else the same under shared/ beside the checkout)",
    )
    parser.add_argument("-o", "--output", type=Path, default=RESULTS)
    args = parser.parse_args()
    cov = load_coverage(args.coverage)
    reached = set().union(*map(set, cov.values()))
    rows = {}
    print(f"{len(cov)} tests with coverage, {len(reached)} frontend statements reached by the corpus")
    print(f"{'strategy':<12}" + "".join(f"{int(f * 100):>6}%" for f in FRACTIONS) + "   seconds")
    for strategy in STRATEGIES:
        ordering, _ = prioritize_files(
            [args.corpus],
            target="tvm-onnx",
            strategy=strategy,
            equipped=[args.equipped],
            coverage=args.coverage,
        )
        shares = []
        for frac in FRACTIONS:
            seen: set[str] = set()
            for iid in ordering.ids[: int(len(ordering.ids) * frac)]:
                seen.update(cov.get(iid, ()))
            shares.append(len(seen) / len(reached))
        rows[strategy] = {
            "shares": dict(zip((str(f) for f in FRACTIONS), shares, strict=True)),
            "seconds": ordering.seconds,
        }
        print(f"{strategy:<12}" + "".join(f"{s:>7.3f}" for s in shares) + f"   {ordering.seconds:.2f}")
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(
        json.dumps(
            {
                "corpus": shown(args.corpus),
                "equipped": shown(args.equipped),
                "statements": len(reached),
                "rows": rows,
            },
            indent=2,
        )
        + "\n"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
