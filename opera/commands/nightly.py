"""opera nightly [CORPUS...] [--target T ...] [--budget 2h] [--store opera.db] [-o DIR] [--ledger]:
the nightly regression job (docs/design.md, Nightly). Exit 0: no new failure; 1: new failures (with
a ledger of known bugs: new failures whose root cause it does not know); 2: bad input."""

from __future__ import annotations

import argparse
import glob
import sys

from opera.commands.run import add_run_settings_arguments, run_settings_from_args
from opera.errors import OperaError
from opera.run.runner import parse_duration
from opera.triage.ledger import add_ledger_argument, ledger_path

HELP = (
    "prioritized, budgeted run of the corpus on every installed target, compared with the previous "
    "nightly run (exit 1 on new failures); writes JUnit XML and an HTML report"
)

DEFAULT_CORPUS = "harvested/*.jsonl.gz"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("corpus", nargs="*", help=f"corpus files (default: {DEFAULT_CORPUS})")
    parser.add_argument(
        "--target",
        "-t",
        action="append",
        default=[],
        help="target name (repeatable; default: every installed CPU target, see `opera targets`)",
    )
    parser.add_argument("--budget", default="2h", help="whole job, split across targets (default 2h)")
    parser.add_argument("--strategy", default="opera", help="prioritization strategy (default: opera)")
    parser.add_argument(
        "--equipped",
        action="append",
        default=[],
        metavar="TARGET=FILE",
        help="equipped corpus of TARGET's own frontend tests, for the strategy (repeatable)",
    )
    parser.add_argument(
        "-o", "--output", metavar="DIR", help="report directory (default: STORE.d/nightly/NUMBER)"
    )
    add_run_settings_arguments(parser, seed_help="seed for inputs, weights and strategies (default 0)")
    parser.add_argument("--quiet", "-q", action="store_true", help="no progress bars")
    add_ledger_argument(parser)  # new failures it knows are "known (URL)", not counted toward exit 1


def _equipped(specs: list[str]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for spec in specs:
        target, sep, path = spec.partition("=")
        if not sep or not target or not path:
            raise OperaError(f"--equipped {spec}: use TARGET=FILE (e.g. tvm-onnx=equipped/tvm-onnx.jsonl.gz)")
        out.setdefault(target, []).append(path)
    return out


def run(args: argparse.Namespace) -> int:
    from opera.nightly import NightlyConfig, render_text, run_nightly

    budget = parse_duration(args.budget)
    settings = run_settings_from_args(args)
    corpus = list(args.corpus) or sorted(glob.glob(DEFAULT_CORPUS))
    if not corpus:
        raise OperaError(f"no corpus file given and none at {DEFAULT_CORPUS} (run from the checkout's root)")
    equipped = _equipped(args.equipped)
    unknown = [t for t in equipped if args.target and t not in args.target]
    if unknown:
        raise OperaError(f"--equipped names target(s) not run: {', '.join(unknown)}")
    config = NightlyConfig(
        corpus=corpus,
        targets=list(args.target),
        budget_s=budget,
        strategy=args.strategy,
        equipped=equipped,
        out_dir=args.output,
        ledger=ledger_path(args.ledger),
        **settings.run_settings(),
    )
    try:
        outcome = run_nightly(config, show_progress=not args.quiet)
    except KeyboardInterrupt:  # during prioritization or the reports: a run in progress is resumable
        print(
            "opera nightly: interrupted (see `opera run --resume` for a run that had started)",
            file=sys.stderr,
        )
        return 130
    print(render_text(outcome))
    sys.stdout.flush()
    return outcome.exit_code
