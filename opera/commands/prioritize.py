"""opera prioritize CORPUS... --target T [--strategy S] [--equipped FILE] -o ORDER (docs/design.md, Prioritize)."""

from __future__ import annotations

import argparse

from opera.prioritize import prioritize_files, strategy_names, write_order
from opera.prioritize._greedy import ZERO_CASES
from opera.selection import add_selection_arguments, selection_from_args

HELP = "order a corpus for a target so that diverse tests run first; writes an order file for `opera run --order`"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("corpus", nargs="+", help="corpus files (.jsonl / .jsonl.gz)")
    parser.add_argument(
        "--target", required=True, help="compiler target, e.g. tvm-onnx (see `opera targets`)"
    )
    parser.add_argument(
        "--strategy", default="opera", help=f"one of: {', '.join(strategy_names())} (default: opera)"
    )
    parser.add_argument(
        "--equipped",
        action="append",
        default=[],
        metavar="FILE",
        help="equipped corpus of the compiler's own frontend tests (repeatable)",
    )
    parser.add_argument(
        "--no-precover",
        action="store_true",
        help="do not count the equipped tests' parameter partitions as covered",
    )
    parser.add_argument(
        "--zero-case",
        choices=ZERO_CASES,
        default=ZERO_CASES[0],
        help="operator score when the compiler's own tests never use an operator (default: untested-first)",
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the random and fast strategies")
    parser.add_argument("--coverage", metavar="FILE", help="per-test coverage data (total-cov, add-cov)")
    parser.add_argument(
        "--history",
        metavar="STORE",
        action="append",
        help="results store of earlier runs on the target: the opera strategy scores each operator by "
        "its bug rate there (unseen operators first), instead of by the equipped corpus; repeat to merge stores",
    )
    parser.add_argument("-o", "--output", required=True, metavar="ORDER", help="order file to write")
    add_selection_arguments(parser)


def run(args: argparse.Namespace) -> int:
    ordering, header = prioritize_files(
        args.corpus,
        target=args.target,
        strategy=args.strategy,
        equipped=args.equipped,
        seed=args.seed,
        coverage=args.coverage,
        precover_equipped=not args.no_precover,
        zero_case=args.zero_case,
        selection=selection_from_args(args),
        history=args.history,
    )
    n = write_order(args.output, ordering.ids, header)
    print(
        f"{n} instances ordered by {args.strategy} for {args.target} in {ordering.seconds:.2f} s -> {args.output}"
    )
    return 0
