"""opera generate CORPUS... -o FILE [--seed N] [--per-api K] [--library L] [--steer coverage]"""

from __future__ import annotations

import argparse
import json
import sys

from opera import __version__
from opera.errors import OperaError

HELP = "generate new operator instances by type-aware mutation of harvested ones (validity-gated)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("corpus", nargs="+", help="harvested corpus files to learn from and mutate")
    parser.add_argument("-o", "--output", required=True, help="corpus file to write (.jsonl or .jsonl.gz)")
    parser.add_argument(
        "--seed", type=int, default=0, help="random seed; the same seed gives the same corpus (default 0)"
    )
    parser.add_argument(
        "--per-api", type=int, default=10, help="valid mutants to make per operator (default 10)"
    )
    parser.add_argument(
        "--attempts",
        type=int,
        default=3,
        help="give up on an operator after ATTEMPTS x --per-api mutants (default 3)",
    )
    parser.add_argument("--library", action="append", default=[], help="only this library (repeatable)")
    parser.add_argument("--api", action="append", default=[], help="only this operator (repeatable)")
    parser.add_argument(
        "--keep-invalid", action="store_true", help="also write the mutants the library rejected"
    )
    parser.add_argument(
        "--timeout", type=float, default=30.0, help="CPU seconds one mutant may run in its library (default 30)"
    )
    parser.add_argument(
        "--steer",
        choices=["coverage"],
        help="coverage: steer toward operator-level coverage (input/output degrees, shape-and-parameter "
        "vectors) the corpus lacks; only mutants adding some are written and count toward --per-api",
    )
    parser.add_argument("--summary-json", help="also write the per-library figures as JSON to this file")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")


def run(args: argparse.Namespace) -> int:
    from opera.generate import GenerateOptions, generate

    if args.attempts < 1:
        raise OperaError("--attempts must be at least 1")
    options = GenerateOptions(
        seed=args.seed,
        per_api=args.per_api,
        attempts_per_valid=args.attempts,
        libraries=tuple(args.library),
        apis=tuple(args.api),
        keep_invalid=args.keep_invalid,
        show_progress=not args.quiet,
        timeout_s=args.timeout,
        steer=args.steer,
    )
    header = {"command": _command_line(args), "opera_version": __version__}
    summary = generate(args.corpus, args.output, options, header=header)
    for message in summary.messages:
        print(f"opera generate: {message}", file=sys.stderr)
    print(summary.render())
    if args.summary_json:
        with open(args.summary_json, "w") as fh:
            json.dump(summary.to_json(), fh, indent=2)
    return 130 if summary.interrupted else 0


def _command_line(args: argparse.Namespace) -> str:
    """The command that regenerates this corpus (recorded in its header and in MANIFEST.json)."""
    parts = ["opera", "generate", *args.corpus, "--seed", str(args.seed), "--per-api", str(args.per_api)]
    if args.attempts != 3:
        parts += ["--attempts", str(args.attempts)]
    for lib in args.library:
        parts += ["--library", lib]
    for api in args.api:
        parts += ["--api", api]
    if args.keep_invalid:
        parts.append("--keep-invalid")
    if args.timeout != 30.0:
        parts += ["--timeout", str(args.timeout)]
    if args.steer:
        parts += ["--steer", args.steer]
    parts += ["-o", args.output]
    return " ".join(parts)
