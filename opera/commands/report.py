"""opera report --store S [--run N] [--target T ...] -o DIR: APFD, RAUC and time-to-bug of every
prioritization strategy, evaluated offline on a finished run (docs/design.md, Report)."""

from __future__ import annotations

import argparse
import sys

from opera.errors import OperaError
from opera.prioritize._greedy import ZERO_CASES
from opera.report.data import BUG_KEYS

HELP = "evaluate every prioritization strategy on a finished run: APFD/RAUC tables and time-to-bug plots"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--store", default="opera.db", help="SQLite results store (default: opera.db)")
    parser.add_argument("--run", type=int, help="run id (default: the store's last run)")
    parser.add_argument(
        "--target", "-t", action="append", default=[], help="only this target of the run (repeatable)"
    )
    parser.add_argument(
        "--strategy", action="append", default=None, help="only this strategy (repeatable; default: all)"
    )
    parser.add_argument(
        "--equipped",
        action="append",
        default=[],
        metavar="[TARGET=]FILE",
        help="equipped corpus of the compiler's own tests, as for `opera prioritize` (repeatable); "
        "a plain FILE serves every target of its library, TARGET=FILE one target",
    )
    parser.add_argument(
        "--coverage",
        action="append",
        default=[],
        metavar="TARGET=FILE",
        help="per-test coverage data of TARGET's frontend (total-cov, add-cov; skipped where none is given)",
    )
    parser.add_argument(
        "--random-seeds", type=int, default=5, help="random orders to average (seeds 0..N-1, default 5)"
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the fast strategy (default 0)")
    parser.add_argument(
        "--no-precover", action="store_true", help="do not count the equipped tests' partitions as covered"
    )
    parser.add_argument(
        "--zero-case", choices=ZERO_CASES, default=ZERO_CASES[0], help="as for `opera prioritize`"
    )
    parser.add_argument(
        "--allow-partial",
        action="store_true",
        help="report on an unfinished run, over the tests that have a result",
    )
    parser.add_argument(
        "--bugs",
        choices=BUG_KEYS,
        default=BUG_KEYS[0],
        help="what one bug of APFD / RAUC / the time-to-bug curves is: a unique failure signature "
        "(default) or a root cause as `opera triage` finds them (many signatures of one defect count once)",
    )
    parser.add_argument(
        "--history",
        metavar="STORE",
        action="append",
        help="results store of earlier runs: the opera strategy scores operators by their bug rate there "
        "(as `opera prioritize --history`; repeat to merge stores); the evaluated run itself is never counted",
    )
    parser.add_argument("-o", "--output", required=True, metavar="DIR", help="directory for the report files")
    parser.add_argument("--quiet", "-q", action="store_true", help="no progress bar")


def _coverage(specs: list[str], default_target: str | None) -> dict[str, str]:
    out: dict[str, str] = {}
    for spec in specs:
        target, sep, path = spec.partition("=")
        if not sep:
            if default_target is None:
                raise OperaError(f"--coverage {spec}: name the target, e.g. --coverage tvm-onnx={spec}")
            target, path = default_target, spec
        if not target or not path:
            raise OperaError(f"--coverage {spec}: expected TARGET=FILE")
        out[target] = path
    return out


def run(args: argparse.Namespace) -> int:
    from opera.report import build_report, write_report
    from opera.report.tables import apfd_frame

    single = args.target[0] if len(set(args.target)) == 1 else None
    report = build_report(
        args.store,
        args.run,
        targets=args.target or None,
        strategies=args.strategy,
        equipped=args.equipped,
        coverage=_coverage(args.coverage, single),
        random_seeds=args.random_seeds,
        seed=args.seed,
        precover_equipped=not args.no_precover,
        zero_case=args.zero_case,
        allow_partial=args.allow_partial,
        progress=not args.quiet,
        bugs=args.bugs,
        history=args.history,
    )
    written = write_report(report, args.output)
    frame = apfd_frame(report)
    for target, t in report.targets.items():
        rows = frame[(frame["target"] == target) & (frame["status"] == "ok")]
        if len(rows):
            cells = ", ".join(f"{r.strategy} {r.apfd:.3f}" for r in rows.itertuples())
            print(f"{target}: {len(t.tests.ids)} tests, {len(t.tests.signatures)} unique bugs; APFD {cells}")
        else:
            print(f"{target}: {len(t.tests.ids)} tests, no bug signature: APFD undefined")
    print(f"report of run {report.run_id} ({report.seconds:.1f} s): {len(written)} files in {args.output}")
    if not report.has_bugs:
        print(
            f"opera report: error: run {report.run_id} has no bug signatures"
            + (f" on {', '.join(report.targets)}" if args.target else "")
            + f": APFD is undefined; wrote the outcome tables to {args.output}",
            file=sys.stderr,
        )
        return 2
    return 0
