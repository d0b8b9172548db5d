"""opera bugs [--store] [--run] [--verify | --verify-pending] [--ledger]: unique bug signatures with
counts, one reproducer each, and whether that reproducer shows its failure on its own.

With a ledger of known bugs (``--ledger``, default ``bugs/ledger.toml`` when it exists here), each
signature is ``known`` when a ledger entry of its target names it (its ``signature`` key, whatever
features or error narrow the entry), or when the ledger knows every root cause under it (each root
cause matched as ``--root-causes`` and ``opera triage`` match it: an entry with only an ``id`` or an
``error`` names root causes, not signatures); ``part`` when it knows some of them, ``new``
otherwise. A ledger with no entry for the listed targets changes nothing (the project's ledger is
about real compilers, not a store of test targets)."""

from __future__ import annotations

import argparse
import functools
import json
import os
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from opera.errors import OperaError
from opera.run.runner import render_rule_counts
from opera.store import BugRecord, ResultStore
from opera.triage.ledger import Entry, Ledger, add_ledger_argument, resolve_ledger

HELP = "list unique bug signatures (crash, native crash, timeout, inconsistency) with a reproducer each"

# what the status column says for a bug whose reproducer was never run on its own
_UNVERIFIED = "unverified"
_NO_SCRIPT = "no-reproducer"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--store", default="opera.db", help="SQLite results store (default: opera.db)")
    parser.add_argument("--run", type=int, help="only signatures seen in this run (counts are that run's)")
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.add_argument(
        "--by-source",
        action="store_true",
        help="outcomes and unique signatures per source (human-written vs generated instances) instead",
    )
    verify = parser.add_mutually_exclusive_group()
    verify.add_argument(
        "--verify",
        action="store_true",
        help="first re-run every listed signature's reproducer in a fresh process and record whether it "
        "shows its failure",
    )
    verify.add_argument(
        "--verify-pending",
        action="store_true",
        help="the same, only for reproducers not verified yet (e.g. after `opera run --no-verify`, or a "
        "verification that was interrupted)",
    )
    parser.add_argument(
        "--timeout",
        default=None,
        help="per-script limit for --verify: the run's per-test timeout (default: the run's, else 60s) "
        "plus time for the script's imports",
    )
    parser.add_argument(
        "--workers", type=int, default=None, help="scripts run at a time for --verify (default: one per core)"
    )
    parser.add_argument("--quiet", "-q", action="store_true", help="no progress bar")
    parser.add_argument(
        "--gaps",
        action="store_true",
        help="coverage gaps instead: what each frontend does not implement (unsupported results), as a "
        "per-target operator x feature table with evidence; not bugs",
    )
    parser.add_argument(
        "--root-causes",
        action="store_true",
        help="group the signatures into root causes (what separates the failing instances from the "
        "passing ones; signatures that are one defect merged): root cause -> signatures -> examples",
    )
    add_ledger_argument(parser)  # a known/new column


def run(args: argparse.Namespace) -> int:
    if not Path(args.store).exists():
        raise OperaError(f"store not found: {args.store}")
    if args.workers is not None and args.workers < 1:
        raise OperaError("--workers must be at least 1")
    verifying = args.verify or args.verify_pending
    if args.timeout is not None and not verifying:
        raise OperaError("--timeout goes with --verify or --verify-pending")
    ledger = resolve_ledger(args.ledger)
    with ResultStore(args.store) as store:
        run_record = (
            store.get_run(args.run) if args.run is not None else None
        )  # a clear error for an unknown run
        if args.gaps:
            if verifying:
                raise OperaError("--gaps does not verify; leave out --verify")
            return _gaps(store, args)
        if args.by_source:
            if verifying:
                raise OperaError("--by-source does not verify; leave out --verify")
            return _by_source(store, args)
        if args.root_causes:
            if verifying:
                raise OperaError("--root-causes does not verify; leave out --verify")
            return _root_causes(store, args, ledger)
        interrupted = False
        if verifying:
            interrupted = _verify(store, args, run_record)
        bugs = store.bugs(args.run)
        evidence = {b.signature: store.signature_evidence(b.signature, b.example_instance, args.run) for b in bugs}
        harness = _harness_errors(store, args.run)
        rule_counts = store.rule_counts(args.run)
        ledger = _for_targets(ledger, {b.target for b in bugs})
        by_cause = _signatures_by_root_cause(store, args.run, ledger) if ledger is not None else {}
    from opera.reproduce.verify import summarize

    summary = summarize(bugs)
    if args.json:
        # one object per signature, as before; repro_status etc. say how its reproducer did
        print(
            json.dumps(
                [
                    {**b.__dict__, "outcome": b.outcome.value}
                    | {"message": evidence[b.signature][0], "source_tests": evidence[b.signature][1]}
                    | ({"ledger": _ledger_json(ledger, b, by_cause)} if ledger is not None else {})
                    for b in bugs
                ],
                indent=2,
            )
        )
        return 130 if interrupted else 0
    if not bugs:
        print("no bug signatures" + (f" in run {args.run}" if args.run is not None else ""))
        _print_harness(harness)
        return 130 if interrupted else 0
    width = max(len(_status(b)) for b in bugs)
    for b in bugs:
        entry = _named_by(ledger, b) if ledger is not None else None
        causes = by_cause.get(b.signature, [])
        known = "" if ledger is None else f"{_known_mark(entry, causes):<5}  "
        print(f"{b.count:>5}  {_status(b):<{width}}  {known}{b.signature}")
        pad = " " * (7 + width + 2 + len(known))
        print(
            f"{pad}first run {b.first_run}, last run {b.last_run}, example {b.example_instance} ({b.example_api})"
        )
        message, tests, n_tests = evidence[b.signature]
        if message.strip():
            print(f"{pad}message: {_first_line(message)}")
        if tests:
            more = f" (+{n_tests - len(tests)} more)" if n_tests > len(tests) else ""
            print(f"{pad}from: {', '.join(tests)}{more}")
        print(f"{pad}reproducer: {b.reproducer or '-'}")
        if b.repro_status is not None and b.repro_detail:
            print(f"{pad}on its own: {b.repro_detail}")
        if entry is not None:
            print(f"{pad}ledger: {entry.name}, {entry.label.removeprefix('known (').removesuffix(')')}")
        elif any(e is not None for _, e in causes):
            named = ", ".join(f"{cid} {e.name}" if e is not None else f"{cid} new" for cid, e in causes)
            print(f"{pad}ledger, by root cause: {named}")
    line = f"{len(bugs)} signature(s)"
    if ledger is not None:
        marks = Counter(_known_mark(_named_by(ledger, b), by_cause.get(b.signature, [])) for b in bugs)
        partly = f", {marks['part']} with some of their root causes known" if marks["part"] else ""
        line += f" ({marks['known']} known to the ledger {ledger.path}{partly}, {marks['new']} new)"
    if summary.verified or summary.unverified:
        line += f"; {summary.headline()}"
    print(line)
    by_oracle = Counter(oracle_of(b.signature) for b in bugs)
    if set(by_oracle) != {"reference"}:
        print("by oracle: " + ", ".join(f"{name} {n}" for name, n in sorted(by_oracle.items())))
    for text in render_rule_counts(rule_counts):
        print(text)
    if summary.unverified:
        where = f" --run {args.run}" if args.run is not None else ""
        print(f"verify the rest with: opera bugs --store {args.store}{where} --verify-pending")
    _print_harness(harness)
    if interrupted:
        print("verification interrupted: the verdicts shown are the ones stored")
        return 130
    return 0


def _first_line(message: str, width: int = 160) -> str:
    """The line that says what happened: a traceback's exception line, else the first line."""
    lines = [text for text in message.splitlines() if text.strip()]
    if lines and lines[0].startswith("Traceback"):
        frames = [k for k, text in enumerate(lines) if text.startswith("  File ")]
        k = frames[-1] + 1 if frames else 1
        while k < len(lines) and lines[k].startswith("    "):  # the frame's source line
            k += 1
        lines = lines[k:] or lines
    line = lines[0].strip() if lines else ""
    return line if len(line) <= width else line[: width - 3] + "..."


def oracle_of(signature: str) -> str:
    """The oracle a bug signature comes from: a rule's name (``...:rule=<name>:...``) or ``reference``."""
    parts = signature.split(":")
    return next((p.removeprefix("rule=") for p in parts[2:3] if p.startswith("rule=")), "reference")


def _for_targets(ledger: Ledger | None, targets: set[str]) -> Ledger | None:
    """The ledger, or None when it has no entry for any of ``targets``."""
    return ledger if ledger is not None and any(e.target in targets for e in ledger.entries) else None


def _named_by(ledger: Ledger, bug: BugRecord) -> Entry | None:
    """The first ledger entry of the bug's target that names its signature."""
    return next((e for e in ledger.entries if e.target == bug.target and e.names_signature(bug.signature)), None)


def _ledger_json(ledger: Ledger, bug: BugRecord, by_cause: dict[str, list[tuple[str, Entry | None]]]) -> dict[str, Any]:
    entry = _named_by(ledger, bug)
    if entry is not None:
        return {"known": True, **entry.to_json()}
    causes = by_cause.get(bug.signature, [])
    if not causes:
        return {"known": False}
    return {
        "known": _known_mark(None, causes) == "known",
        "root_causes": [{"id": cid, **({"known": False} if e is None else {"known": True, **e.to_json()})} for cid, e in causes],
    }


def _known_mark(entry: Entry | None, causes: list[tuple[str, Entry | None]]) -> str:
    """``known`` when an entry names the signature or knows every root cause under it (an entry
    with only an ``id`` names a root cause), ``part`` when it knows some, else ``new``."""
    if entry is not None:
        return "known"
    found = sum(e is not None for _, e in causes)
    return "new" if not found else "known" if found == len(causes) else "part"


def _signatures_by_root_cause(store: ResultStore, run: int | None, ledger: Ledger) -> dict[str, list[tuple[str, Entry | None]]]:
    """Each failing signature's root causes (as ``--root-causes`` finds them) with the ledger entry
    that knows each, or None."""
    causes, targets = _find_root_causes(store, run)
    known = ledger.classify(causes, targets)
    out: dict[str, list[tuple[str, Entry | None]]] = {}
    for cause in causes:
        for signature in cause.signatures:
            out.setdefault(signature, []).append((cause.id, known.entry(cause)))
    return out


def _find_root_causes(store: ResultStore, run: int | None) -> tuple[list[Any], set[str]]:
    """The root causes of a run's (or the store's) latest results, and the targets examined."""
    from opera.commands.triage import latest_results
    from opera.corpus import instances_by_id
    from opera.triage.root_causes import find_root_causes

    results = latest_results(store.results(run))
    runs = [store.get_run(run)] if run is not None else store.runs()
    instances = instances_by_id(
        (c for r in runs for c in r.corpus),
        {r.instance_id for r in results},
        warn=lambda line: print(line + " (its failures are one root cause per signature)", file=sys.stderr),
    )
    return find_root_causes(results, instances), {r.target for r in results}


def _root_causes(store: ResultStore, args: argparse.Namespace, ledger: Ledger | None = None) -> int:
    """Root cause -> its signatures -> example instances (``opera triage`` writes the reports)."""
    from opera.commands.triage import latest_results

    causes, targets = _find_root_causes(store, args.run)
    results = latest_results(store.results(args.run))
    ledger = _for_targets(ledger, targets)
    known = ledger.classify(causes, targets) if ledger is not None else None
    if args.json:
        print(
            json.dumps(
                [c.to_json() | ({"ledger": known.as_json(c)} if known is not None else {}) for c in causes],
                indent=2,
            )
        )
        return 0
    per_signature: dict[str, list[str]] = {}
    for r in results:
        if r.signature:
            per_signature.setdefault(r.signature, []).append(r.instance_id)
    for cause in causes:
        mark = f"  {known.mark(cause)}" if known is not None else ""
        print(f"{cause.id}  {len(cause.instances):>4} test(s)  {cause.target}  [{', '.join(cause.features)}]{mark}")
        if cause.error:
            print(f"    error: {cause.error}")
        mine = set(cause.instances)
        for signature in cause.signatures:
            examples = [i for i in per_signature.get(signature, []) if i in mine]
            shown = ", ".join(examples[:3]) + (f" (+{len(examples) - 3})" if len(examples) > 3 else "")
            print(f"    {signature}")
            print(f"        {shown}")
    n_sigs = len({s for c in causes for s in c.signatures})
    print(f"{n_sigs} signature(s) -> {len(causes)} root cause(s); reports: opera triage --store {args.store}")
    if known is not None and ledger is not None:
        print("\n".join(known.lines(ledger.path)))
    return 0


def _print_harness(harness: dict[str, tuple[int, str]]) -> None:
    if harness:
        print(f"Opera's own defects (harness-error, not compiler bugs): {len(harness)} signature(s)")
        for signature, (count, example) in sorted(harness.items(), key=lambda kv: -kv[1][0]):
            print(f"{count:>5}  {signature}  (example {example})")


def _harness_errors(store: ResultStore, run_id: int | None) -> dict[str, tuple[int, str]]:
    """signature -> (results, an example instance) of the harness errors (Opera's own defects)."""
    from opera.outcomes import Outcome

    found: dict[str, tuple[int, str]] = {}
    for r in store.results(run_id):
        if r.outcome is Outcome.HARNESS_ERROR:
            count, example = found.get(r.signature or "harness:?", (0, r.instance_id))
            found[r.signature or "harness:?"] = (count + 1, example)
    return found


def _gaps(store: ResultStore, args: argparse.Namespace) -> int:
    """The coverage-gap table of a run (or of every run), features named from the run's corpus."""
    from opera.corpus import instances_by_id
    from opera.report.coverage_gaps import coverage_gaps, gap_table_lines

    results = store.results(args.run)
    runs = [store.get_run(args.run)] if args.run is not None else store.runs()
    instances = instances_by_id(
        (c for run in runs for c in run.corpus),
        {r.instance_id for r in results},
        warn=lambda line: print(line + " (dtypes and attributes are not named)", file=sys.stderr),
    )
    gaps = coverage_gaps(results, instances)
    if args.json:
        print(json.dumps([g.to_json() for g in gaps], indent=2))
    else:
        print("\n".join(gap_table_lines(gaps)))
    return 0


def _status(bug: BugRecord) -> str:
    if bug.reproducer is None:
        return _NO_SCRIPT
    return bug.repro_status or _UNVERIFIED


def _verify(store: ResultStore, args: argparse.Namespace, run_record: Any) -> bool:
    """Run the selected reproducers; True when interrupted (what was verified is stored)."""
    from opera.reproduce.verify import verify_bugs
    from opera.run.runner import parse_duration

    bugs = [b for b in store.bugs(args.run) if b.reproducer is not None]
    if args.verify_pending:
        bugs = [b for b in bugs if b.repro_status is None]
    unavailable = sorted(t for t in {b.target for b in bugs} if _current_versions(t) is None)
    if unavailable:  # the scripts would die on a missing compiler: not a verdict on the bug
        print(
            f"not verified: {', '.join(unavailable)} not usable here (see `opera targets`)", file=sys.stderr
        )
        bugs = [b for b in bugs if b.target not in unavailable]
    if args.timeout is not None:
        timeout = parse_duration(args.timeout)
    elif run_record is not None:
        timeout = float(run_record.config.get("timeout_s") or 60.0)
    else:
        timeout = 60.0
    workers = args.workers or max(1, os.cpu_count() or 1)
    from opera.run.executors.local import default_max_rss_bytes

    _, interrupted = verify_bugs(
        store,
        bugs,
        timeout_s=timeout,
        workers=workers,
        max_rss_bytes=default_max_rss_bytes(workers),
        versions=_current_versions,
        show_progress=not args.quiet and not args.json,
    )
    return interrupted


@functools.cache
def _current_versions(target: str) -> dict[str, Any] | None:
    """The installed compiler/library versions the scripts run with (as a run records them);
    None when the target is not usable here."""
    from opera.run.targets import get_target

    try:
        found = get_target(target)
        if found.availability() is not None:
            return None
        return dict(found.versions())
    except Exception:
        return None


def _by_source(store: ResultStore, args: argparse.Namespace) -> int:
    from opera.report.by_source import breakdown_by_source

    breakdown = breakdown_by_source(store.results(args.run))
    print(json.dumps(breakdown.to_json(), indent=2) if args.json else breakdown.render())
    return 0
