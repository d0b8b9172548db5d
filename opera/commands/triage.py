"""opera triage [--store] [--run] [-o DIR]: root causes of a run's failures, one upstream-ready
Markdown report each (with a standalone reproducer of the smallest failing instance inline), and a
machine-readable ``root-causes.json`` beside them."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from opera.errors import OperaError
from opera.outcomes import TestResult
from opera.triage.ledger import add_ledger_argument, resolve_ledger

HELP = "group failures into root causes and write one upstream-ready bug report per root cause"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--store", default="opera.db", help="SQLite results store (default: opera.db)")
    parser.add_argument("--run", type=int, help="only this run's results (default: every run's latest result per test)")
    parser.add_argument("--target", action="append", default=[], help="only this target (repeatable)")
    parser.add_argument(
        "-o", "--output", help="directory for the reports (default: <store>.d/triage/<run or 'all'>)"
    )
    parser.add_argument(
        "--no-reproducers",
        action="store_true",
        help="do not rebuild a reproducer per root cause (fast: reports without the script)",
    )
    parser.add_argument(
        "--reduce",
        action="store_true",
        help="shrink each root cause's example first (each candidate runs isolated on the target, like "
        "any test); the report and its reproducer use the reduced instance",
    )
    parser.add_argument(
        "--reduce-known",
        action="store_true",
        help="with --reduce, also shrink the root causes the ledger already knows (default: only the new ones; "
        "a known one's report keeps its original example)",
    )
    parser.add_argument(
        "--reduce-budget",
        type=float,
        default=60.0,
        metavar="SECONDS",
        help="per root cause: stop reducing after this long and keep the smallest failing instance so far (default 60)",
    )
    parser.add_argument(
        "--timeout", type=float, default=60.0, metavar="SECONDS", help="per candidate test when reducing (default 60)"
    )
    parser.add_argument("--json", action="store_true", help="print the root causes as JSON")
    parser.add_argument("--quiet", "-q", action="store_true", help="no progress bar")
    add_ledger_argument(parser)  # known (status, URL) or new, per root cause


def latest_results(results: list[TestResult]) -> list[TestResult]:
    """One result per (instance, target): the last one stored (a later run re-tests it)."""
    latest: dict[tuple[str, str], TestResult] = {}
    for r in results:
        latest[(r.instance_id, r.target)] = r
    return list(latest.values())


def run(args: argparse.Namespace) -> int:
    from opera.corpus import instances_by_id
    from opera.progress import progress_bar
    from opera.store import ResultStore
    from opera.triage.reports import write_reports
    from opera.triage.root_causes import BUG_OUTCOMES, find_root_causes

    if not Path(args.store).exists():
        raise OperaError(f"store not found: {args.store}")
    ledger = resolve_ledger(args.ledger)
    with ResultStore(args.store) as store:
        runs = [store.get_run(args.run)] if args.run is not None else store.runs()
        results = latest_results(store.results(args.run))
    if args.target:
        unknown = set(args.target) - {r.target for r in results}
        if unknown:
            raise OperaError(f"no results for target(s) {', '.join(sorted(unknown))} in {args.store}")
        results = [r for r in results if r.target in set(args.target)]
    instances = instances_by_id(
        (c for run in runs for c in run.corpus),
        {r.instance_id for r in results},
        warn=lambda line: print(line + " (its failures are one root cause per signature)", file=sys.stderr),
    )
    causes = find_root_causes(results, instances)
    out_dir = Path(args.output) if args.output else Path(f"{args.store}.d") / "triage" / str(args.run or "all")
    by_key = {(r.instance_id, r.target): r for r in results}
    versions = {t: v for run in runs for t, v in run.versions.items()}
    if args.reduce_budget <= 0 or args.timeout <= 0:
        raise OperaError("--reduce-budget and --timeout must be positive")
    known = ledger.classify(causes, {r.target for r in results}) if ledger is not None else None
    to_reduce = [c for c in causes if args.reduce_known or known is None or known.entry(c) is None]
    if args.reduce and len(to_reduce) < len(causes):
        print(f"reducing the {len(to_reduce)} root cause(s) the ledger does not know; --reduce-known for all {len(causes)}", file=sys.stderr)
    reductions = _reduce_all(to_reduce, by_key, instances, out_dir, args) if args.reduce else {}
    reports = []
    with progress_bar(total=len(causes), desc="reports", unit="root cause", disable=args.quiet) as bar:
        for cause in causes:
            result = by_key[(cause.example, cause.target)]
            instance = instances.get(cause.example)
            reduced = reductions.get(cause.id)
            if reduced is not None and reduced.result is not None:
                instance, result = reduced.reduction.reduced, reduced.result
            report = _report(cause, result, instance, versions, out_dir, not args.no_reproducers)
            if reduced is not None:
                report.reduction = reduced.reduction.summary() + (
                    f"; steps: {'; '.join(reduced.reduction.steps)}" if reduced.reduction.steps else ""
                )
            reports.append(report)
            bar.update(1)
    paths = write_reports(reports, out_dir)
    ledger_json = [
        {
            **report.cause.to_json(),
            "title": _title(report),
            "report": str(path),
            "stage": report.result.stage.value,
            "ledger": known.as_json(report.cause) if known is not None else None,
            "reduction": reductions[report.cause.id].to_json() if report.cause.id in reductions else None,
        }
        for report, path in zip(reports, paths, strict=True)
    ]
    (out_dir / "root-causes.json").write_text(json.dumps(ledger_json, indent=2) + "\n", encoding="utf-8")
    if args.json:
        print(json.dumps(ledger_json, indent=2))
        for line in known.lines(ledger.path)[1:] if known is not None and ledger is not None else []:
            print(line, file=sys.stderr)  # the entries that matched nothing
        return 0
    signatures = {r.signature for r in results if r.outcome in BUG_OUTCOMES and r.signature}
    _print_summary(causes, signatures, out_dir, known.mark if known is not None else None)
    if known is not None and ledger is not None:
        print("\n".join(known.lines(ledger.path)))
    return 0


def _title(report: Any) -> str:
    from opera.triage.reports import title

    return title(report.cause, report.result)


@dataclass
class _Reduced:
    reduction: Any  # opera.triage.reduce.Reduction
    result: TestResult | None  # the reduced instance's own result (None: it no longer fails the same way)

    def to_json(self) -> dict[str, Any]:
        return {**self.reduction.to_json(), "still_fails": self.result is not None}


def _reduce_all(
    causes: list[Any], by_key: dict[tuple[str, str], TestResult], instances: dict[str, Any], out_dir: Path, args: argparse.Namespace
) -> dict[str, _Reduced]:
    """Each root cause's example reduced on its target (one isolated worker per target), then run
    once more: the report uses the reduced instance only when that run fails with the signature."""
    from opera.progress import progress_bar
    from opera.triage.reduce import RECLASSIFIED, reduce_instance, still_fails_on
    from opera.triage.root_causes import keeps_features, required_features

    out: dict[str, _Reduced] = {}
    todo = [c for c in causes if c.example in instances]
    with progress_bar(total=len(todo), desc="reduce", unit="root cause", disable=args.quiet) as bar:
        for target in sorted({c.target for c in todo}):
            mine = [c for c in todo if c.target == target]
            first = by_key[(mine[0].example, target)]
            try:
                predicate = still_fails_on(target, first.signature or "", timeout_s=args.timeout)
            except OperaError as exc:  # the target is not usable here: its reports keep the originals
                print(f"{target}: not reduced ({exc})", file=sys.stderr)
                bar.update(len(mine))
                continue
            with predicate:
                for cause in mine:
                    result = by_key[(cause.example, target)]
                    predicate.signature = result.signature or ""
                    example = instances[cause.example]
                    required = required_features(cause, example)

                    def same_cause(candidate: Any, required: set[str] = required, predicate: Any = predicate) -> bool:
                        # a candidate that lost what separates this root cause from the passing
                        # instances fails for another reason, if at all: no drift to another defect
                        return keeps_features(candidate, required) and predicate(candidate)

                    reduction = reduce_instance(example, same_cause, budget_s=args.reduce_budget)
                    if reduction.flaky and predicate.results:
                        recheck = predicate.results[-1]
                        reduction.rechecked(recheck.outcome.value, recheck.message)
                        if reduction.stopped_because == RECLASSIFIED:
                            print(f"{cause.id}: reclassified: today's Opera calls its example {reduction.recheck}", file=sys.stderr)
                    if reduction.reduced is not reduction.original:
                        final = predicate.run(reduction.reduced)
                        still = final if predicate.matches(final) else None
                        if still is None:
                            print(f"{cause.id}: the reduced instance no longer fails the same way; the report keeps the original", file=sys.stderr)
                    else:  # nothing kept: the original's re-check said whether it still fails
                        still = None if reduction.flaky or reduction.stopped_because == RECLASSIFIED else result
                    out[cause.id] = _Reduced(reduction, still)
                    bar.update(1)
    return out


def _report(cause: Any, result: TestResult, instance: Any, versions: dict[str, Any], out_dir: Path, scripts: bool) -> Any:
    from opera.run.targets import get_target
    from opera.templates import get_template
    from opera.triage.reports import CauseReport

    target = get_target(cause.target)
    reproducer = None
    doc_url = None
    reference = ""
    if instance is not None:
        template = get_template(instance.library)
        doc_url = template.doc_url(instance.api)
        if scripts:
            from opera.reproduce.write import write_reproducer

            try:
                path = write_reproducer(instance, target, result, out_dir / "reproducers", file_name=f"{cause.id}.py")
            except Exception as exc:  # the library cannot rebuild it here: the report says so
                print(f"{cause.id}: no reproducer ({type(exc).__name__}: {exc})", file=sys.stderr)
                path = None
            if path is not None:
                reproducer = path.read_text(encoding="utf-8")
        reference = template.reference_name
    return CauseReport(
        cause,
        result,
        instance,
        versions.get(cause.target, {}),
        reproducer,
        issue_tracker=target.issue_tracker,
        doc_url=doc_url,
        reference=reference,
    )


def _print_summary(causes: list[Any], signatures: set[str], out_dir: Path, mark: Any = None) -> None:
    """``mark``: the ledger's word for a root cause (``known (...)`` / ``new``), None without one."""
    by_target: dict[str, tuple[set[str], int]] = {}
    for cause in causes:
        sigs, n = by_target.get(cause.target, (set(), 0))
        by_target[cause.target] = (sigs | set(cause.signatures), n + 1)
    print(f"{'target':<22} {'signatures':>10} {'root causes':>11}")
    for target in sorted(by_target):
        sigs, n = by_target[target]
        print(f"{target:<22} {len(sigs):>10} {n:>11}")
    print(f"{len(signatures)} signatures -> {len(causes)} root causes")
    for cause in causes:
        known = f"{mark(cause)}  " if mark is not None else ""
        print(f"  {cause.id}  {len(cause.instances):>4}  {known}{cause.title[:140]}")
    print(f"reports: {out_dir}/<root cause>.md, machine-readable: {out_dir}/root-causes.json")
