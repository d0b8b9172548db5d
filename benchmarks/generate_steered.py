#!/usr/bin/env python3
"""`opera generate` unsteered vs ``--steer coverage`` (issue 14, section 4): operator-level coverage
(paper 004's OTC/IDC/ODC/SPC/OLC) of human + generated, valid mutants and wall time.

A seeded sample of the corpus's operators (``--operators``, 0: all) is generated twice with the
same seed, ``--per-api`` and ``--attempts`` (so the same budget of gate calls per operator), once
unsteered and once steered, through the default validity gate (a child process per library). The
coverage is measured by ``opera.report.op_coverage`` over the sampled operators only, against the
union of the human slice and both generated corpora. Merges one row per setting into
``benchmarks/results/generate_steered.json``.

    python benchmarks/generate_steered.py [--corpus harvested/onnx.jsonl.gz] [--operators 60] \
        [--sample-seed 0] [--seed 0] [--per-api 5] [--attempts 3] [-o OUT.json]
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import ROOT, load, save_row, shown

from opera.corpus import CorpusReader
from opera.generate import GenerateOptions, GenerateSummary, generate
from opera.generate.profiles import learn_profiles
from opera.model import OperatorInstance
from opera.prioritize.partitions import operator_key
from opera.report.op_coverage import coverage_sets, operator_level_coverage

KEY = ("corpus", "operators", "sample_seed", "seed", "per_api", "attempts")  # one row per setting


def sample_operators(instances: list[OperatorInstance], n: int, seed: int) -> list[str]:
    """``n`` operators drawn with ``seed`` from those the generator can mutate (all when n is 0)."""
    mutable = sorted(learn_profiles(instances))
    return mutable if n <= 0 or n >= len(mutable) else sorted(random.Random(seed).sample(mutable, n))


def run(corpus: str, out: Path, options: GenerateOptions) -> tuple[GenerateSummary, float]:
    start = time.perf_counter()
    summary = generate([corpus], out, options)
    return summary, round(time.perf_counter() - start, 1)


def figures(summary: GenerateSummary, wall_s: float) -> dict[str, Any]:
    """The run's figures, summed over libraries (one library here)."""
    every = list(summary.figures.values())
    return {
        "written": summary.written,
        "tried": sum(f.tried for f in every),
        "valid": sum(f.valid for f in every),
        "valid_adding_coverage": sum(f.coverage_gains for f in every),
        "coverage_elements_added": sum(f.coverage_elements for f in every),
        "not_gated_nothing_new": sum(f.no_gain_skipped for f in every),
        "wall_s": wall_s,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--corpus", default="harvested/onnx.jsonl.gz")
    parser.add_argument("--operators", type=int, default=60, help="operators sampled (0: all)")
    parser.add_argument("--sample-seed", type=int, default=0)
    parser.add_argument("--seed", type=int, default=0, help="the generator's seed (both runs)")
    parser.add_argument("--per-api", type=int, default=5)
    parser.add_argument("--attempts", type=int, default=3)
    parser.add_argument(
        "-o", "--output", type=Path, default=ROOT / "benchmarks" / "results" / "generate_steered.json"
    )
    args = parser.parse_args(argv)

    instances = list(CorpusReader([args.corpus]))
    apis = sample_operators(instances, args.operators, args.sample_seed)
    human = [i for i in instances if operator_key(i) in set(apis)]
    result: dict[str, Any] = {
        "corpus": shown(args.corpus),
        "operators": len(apis),
        "sample_seed": args.sample_seed,
        "seed": args.seed,
        "per_api": args.per_api,
        "attempts": args.attempts,
        "load_before": load(),
        "runs": {},
        "coverage": {},
        "spc_vectors": {},
    }
    corpora: dict[str, list[OperatorInstance]] = {"human": human}
    with tempfile.TemporaryDirectory() as tmp:
        for name, steer in (("unsteered", None), ("steered", "coverage")):
            options = GenerateOptions(
                seed=args.seed, per_api=args.per_api, attempts_per_valid=args.attempts, apis=tuple(apis),
                show_progress=False, steer=steer,
            )  # fmt: skip
            out = Path(tmp) / f"{name}.jsonl.gz"
            summary, wall_s = run(args.corpus, out, options)
            result["runs"][name] = figures(summary, wall_s)
            corpora[f"human + {name}"] = [*human, *CorpusReader([out])]
            print(f"{name}: {result['runs'][name]}", file=sys.stderr)
    block = coverage_sets(i for insts in corpora.values() for i in insts)
    for name, insts in corpora.items():
        one = coverage_sets(insts)
        result["coverage"][name] = operator_level_coverage(one, block).to_json()
        result["spc_vectors"][name] = sum(len(v) for v in one.vectors.values())
    result["load_after"] = load()
    print(f"{'corpus':<22}OTC     IDC     ODC     SPC     OLC     vectors")
    for name, row in result["coverage"].items():
        cells = "  ".join(f"{row[k]:.4f}" for k in ("otc", "idc", "odc", "spc", "olc"))
        print(f"{name:<22}{cells}  {result['spc_vectors'][name]}")
    save_row(args.output, result, KEY)
    return 0


if __name__ == "__main__":
    sys.exit(main())
