"""The nightly pipeline: prioritize per target, run within the budget, compare, write the reports.

1. Targets: the ``--target`` names, or every installed CPU target; each takes the corpus files of
   its source library.
2. Order per target: the previous nightly's failing tests of that target first (so *fixed* and
   *still failing* are known even when the budget is short, the replay idea of Hypothesis's example
   database), then the corpus in the strategy's order.
3. One ``opera run`` per target, smallest plan first, each with its share of what is left of the
   budget (``budget.py``), tagged with the nightly's number (``history.py``).
4. Compare each target's run with its previous nightly run (``compare.py``), mark the new
   failures whose root cause the ledger of known bugs knows and flag entries "fixed upstream?"
   (``known.py``; no ledger: nothing marked), write JUnit XML and
   the HTML report into the output directory. Each run re-runs its signatures' reproducers in fresh
   processes (``opera.reproduce.verify``, unless ``--no-verify``); the reports say which reproducers
   show their failure on their own.

Bad input (unknown target, missing corpus, a budget too small to run anything, a store this Opera
cannot read, a malformed ledger) raises ``OperaError`` before anything is stored.

Exit code (``NightlyOutcome.exit_code``): 130 when interrupted; else 1 when a new failure is not
known to the ledger (with no ledger, when anything new fails); else 0. Known failures, still
failing tests, changed symptoms and "fixed upstream?" flags never make it 1.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from opera.corpus import CorpusReader
from opera.errors import OperaError
from opera.model import OperatorInstance
from opera.nightly.budget import BudgetClock, check_budget, run_order
from opera.nightly.compare import Change, ChangeKind, TargetComparison, compare_results, group_changes
from opera.nightly.history import NightlyRunConfig, next_nightly_number, open_store, previous_nightly_run
from opera.nightly.known import KnownTonight
from opera.quiet import quiet_native_logs
from opera.report.coverage_gaps import CoverageGap
from opera.run.executors import Executor, WorkerSettings
from opera.run.runner import RunSettings
from opera.store import RUN_INTERRUPTED, BugRecord, RankedResult, ResultStore, RunRecord

if TYPE_CHECKING:
    from opera.triage.ledger import Ledger

__all__ = ["NightlyConfig", "NightlyOutcome", "TargetNight", "default_targets", "run_nightly"]

EXIT_OK = 0
EXIT_NEW_FAILURES = 1
EXIT_INTERRUPTED = 130
_TEXT_GROUPS = 25  # change groups printed per target; the HTML and JUnit files have all


@dataclass
class NightlyConfig(RunSettings):
    """The nightly job: what to run and how to order it; how each test runs (workers, timeout,
    store, executor, ...) is ``RunSettings``, handed on unchanged to every target's run."""

    corpus: list[str]
    targets: list[str] = field(default_factory=list)  # empty: every installed CPU target
    budget_s: float = 2 * 3600.0  # the whole job, split across the targets' runs
    strategy: str = "opera"
    equipped: dict[str, list[str]] = field(default_factory=dict)  # target -> equipped corpora
    out_dir: str | None = None  # default: <store>.d/nightly/<number>
    ledger: str | None = None  # the ledger of known bugs (None: none, every new failure counts)


@dataclass
class TargetNight:
    target: str
    run: RunRecord
    results: list[RankedResult]  # in planned (prioritized) order
    comparison: TargetComparison
    budget_s: float
    planned: int
    replayed: int  # previous failures put first in the order
    prioritization_s: float
    # the run's signatures, with their reproducers' verdicts when re-run on their own
    bugs: list[BugRecord] = field(default_factory=list)
    known: KnownTonight | None = None  # against the ledger (None: no ledger, or none of its entries is of this target)
    # the oracles beside the reference (``--oracle``): rule -> outcome -> count; empty: none ran
    rule_counts: dict[str, dict[str, int]] = field(default_factory=dict)

    def rule_bugs(self) -> list[BugRecord]:
        """Tonight's signatures that a rule (not the reference) found."""
        return [b for b in self.bugs if ":rule=" in b.signature]

    def reproduction_headline(self) -> str | None:
        """``N of M reproducers reproduce ...`` for the run's signatures; None when it has none."""
        from opera.reproduce.verify import summarize

        summary = summarize(self.bugs)
        if not summary.verified and not summary.unverified:
            return None
        return summary.headline()


@dataclass
class NightlyOutcome:
    number: int
    store: str
    out_dir: Path
    started: float
    ended: float
    budget_s: float
    nights: list[TargetNight]
    notes: list[str]
    interrupted: bool = False
    junit: Path | None = None
    html: Path | None = None
    gaps: list[CoverageGap] = field(default_factory=list)  # what the frontends do not implement: not bugs
    ledger: str | None = None  # the ledger's path when one has entries for tonight's targets

    def reproducer_status(self, signature: str | None) -> BugRecord | None:
        """The bug row (reproducer and its verdict) of a signature seen tonight."""
        if signature is None:
            return None
        return next((b for n in self.nights for b in n.bugs if b.signature == signature), None)

    def changes(self, kind: ChangeKind) -> list[Change]:
        return [c for n in self.nights for c in n.comparison.of(kind)]

    @property
    def first_night_targets(self) -> list[str]:
        return [n.target for n in self.nights if n.comparison.first_night]

    def new_failures(self) -> list[Change]:
        """New failures the ledger does not know (every new failure when there is no ledger)."""
        return [c for n in self.nights for c in n.comparison.new_failures]

    def known_failures(self) -> list[Change]:
        """New failures whose root cause the ledger knows: listed apart, not counted."""
        return [c for n in self.nights for c in n.comparison.known_failures]

    @property
    def exit_code(self) -> int:
        """130 interrupted; 1 when a new failure is unknown to the ledger; else 0."""
        if self.interrupted:
            return EXIT_INTERRUPTED
        return EXIT_NEW_FAILURES if self.new_failures() else EXIT_OK


def default_targets() -> list[str]:
    """Every installed CPU target (not test-only, available here, no GPU needed)."""
    from opera.run.targets import all_targets

    with quiet_native_logs():  # probing imports TensorFlow, whose C++ start-up lines no one asked for
        return [t.name for t in all_targets() if not t.needs_gpu and t.availability() is None]


def _resolve(names: list[str], check_here: bool = True) -> dict[str, str]:
    """target -> the source library it consumes; unknown or unavailable targets are errors
    (``check_here=False``: a cluster executor checks availability on its nodes)."""
    from opera.run.runner import _resolve_targets

    if not names:
        names = default_targets()
        if not names:
            raise OperaError("no CPU target is installed here (see `opera targets`); name one with --target")
    return {name: target.library for name, target in _resolve_targets(names, check_here).items()}


def _read_corpus(paths: list[str]) -> tuple[dict[str, list[str]], dict[str, list[OperatorInstance]]]:
    """Each file read once: library -> the files holding its instances, and those instances."""
    if not paths:
        raise OperaError("no corpus file given (the shipped corpus is harvested/*.jsonl.gz)")
    files: dict[str, list[str]] = {}
    instances: dict[str, list[OperatorInstance]] = {}
    for path in paths:
        for inst in CorpusReader([path]):
            bucket = instances.setdefault(inst.library, [])
            if not bucket or path not in files[inst.library]:
                files.setdefault(inst.library, []).append(path)
            bucket.append(inst)
    return files, instances


def _order(
    config: NightlyConfig,
    target: str,
    library: str,
    instances: list[OperatorInstance],
    store: ResultStore,
    prev: RunRecord | None,
) -> tuple[list[str], dict[str, Any], int, float]:
    """The previous nightly's failing tests of the target (in their old order), then the rest in
    the strategy's order. The corpus is read once per library, not once per target."""
    from opera.prioritize import PrioritizeContext, get_strategy, load_equipped, prioritize
    from opera.prioritize.history import OperatorHistory

    ctx = PrioritizeContext(target=target, library=library, seed=config.seed)
    get_strategy(config.strategy).check(ctx)
    equipped = config.equipped.get(target, [])
    ctx.equipped = load_equipped(equipped, library, target)
    # the store is the bandit's state: what earlier nights found on each operator scores it tonight
    earlier = [r for r in store.results() if r.target == target]
    known = {i.id: i for i in instances} if earlier else {}
    history = OperatorHistory.from_results(target, earlier, source=str(store.path), instances=known)
    ctx.history = history if history.tests else None
    ordering = prioritize(instances, config.strategy, ctx)
    replay: list[str] = []
    if prev is not None:
        failing = {r.instance_id for r in store.results(prev.id) if r.is_failure}
        in_corpus = set(ordering.ids)
        replay = [
            i
            for i in dict.fromkeys(p.instance_id for p in store.planned(prev.id))
            if i in failing and i in in_corpus
        ]
    first = set(replay)
    ids = replay + [i for i in ordering.ids if i not in first]
    header: dict[str, Any] = {
        "strategy": config.strategy,
        "target": target,
        "equipped": equipped or "none",
        "seed": config.seed,
        "history_operators": len(ctx.history.tests) if ctx.history is not None else 0,
        "nightly_replayed_failures": len(replay),
        "instances": len(ids),
        "prioritization_seconds": round(ordering.seconds, 3),
    }
    return ids, header, len(replay), ordering.seconds


def run_nightly(
    config: NightlyConfig,
    *,
    show_progress: bool = True,
    executor_factory: Callable[[int, WorkerSettings], Executor] | None = None,
    out: TextIO | None = None,
) -> NightlyOutcome:
    from opera.prioritize import write_order
    from opera.run.runner import start_run
    from opera.triage.ledger import load_ledger

    log = out or sys.stderr
    started = time.time()
    ledger = load_ledger(config.ledger) if config.ledger else None  # a bad one: before anything runs
    clock = BudgetClock(config.budget_s)
    libraries = _resolve(config.targets, check_here=config.executor == "local")
    check_budget(config.budget_s, list(libraries))
    corpus, loaded = _read_corpus(config.corpus)
    notes: list[str] = []
    if config.selection:
        total = sum(len(v) for v in loaded.values())
        kept = config.selection.apply([inst for insts in loaded.values() for inst in insts])
        loaded = {}
        for inst in kept:
            loaded.setdefault(inst.library, []).append(inst)
        corpus = {lib: files for lib, files in corpus.items() if lib in loaded}
        notes.append(f"note: {len(kept)} of {total} corpus instance(s) selected ({config.selection.describe()})")
    for target, library in list(libraries.items()):
        if library not in corpus:
            notes.append(f"note: {target} skipped: no {library} instances in the corpus files")
            del libraries[target]
    if not libraries:
        raise OperaError(
            f"nothing to run: the corpus holds {', '.join(sorted(corpus)) or 'no'} instances, "
            "which none of the targets consumes"
        )
    store, store_notes = open_store(config.store)
    for note in store_notes + notes:
        print(note, file=log)
    notes = store_notes + notes
    with store:
        number = next_nightly_number(store)
        out_dir = (
            Path(config.out_dir) if config.out_dir else Path(f"{config.store}.d") / "nightly" / str(number)
        )
        (out_dir / "orders").mkdir(parents=True, exist_ok=True)
        orders: dict[str, tuple[Path, int, int, float]] = {}
        previous: dict[str, RunRecord | None] = {}
        for target, library in libraries.items():
            previous[target] = previous_nightly_run(store, target, number)
            ids, header, replayed, seconds = _order(
                config, target, library, loaded[library], store, previous[target]
            )
            header["corpus"] = corpus[library]
            path = out_dir / "orders" / f"{target}.order"
            write_order(path, ids, header)
            orders[target] = (path, len(ids), replayed, seconds)
        del loaded  # each run reads its own corpus files again
        check_budget(config.budget_s, list(libraries), spent_s=config.budget_s - clock.remaining())
    first = [t for t, p in previous.items() if p is None]
    if first:
        print(
            f"first nightly run for {', '.join(first)}: no previous nightly run in {config.store} "
            "to compare with, so every failure counts as new",
            file=log,
        )

    runs: dict[str, tuple[int, float]] = {}
    interrupted = False
    sequence = run_order({t: orders[t][1] for t in libraries})
    for k, target in enumerate(sequence):
        share = clock.share(target, len(sequence) - k)
        print(f"nightly {number}: {target} ({orders[target][1]} instances, budget {share:.0f} s)", file=log)
        run_config = NightlyRunConfig(
            corpus=list(corpus[libraries[target]]),
            targets=[target],
            order=str(orders[target][0]),
            budget_s=share,
            nightly=number,
            **config.run_settings(),
            # the order holds exactly the selected instances: the run neither selects again (a
            # sample drawn from one library's files would differ) nor adds what the order leaves out
            order_only=bool(config.selection),
        )
        summary = start_run(
            run_config, show_progress=show_progress, executor_factory=executor_factory, out=log
        )
        runs[target] = (summary.run_id, share)
        if summary.status == RUN_INTERRUPTED:
            interrupted = True
            notes.append(
                f"interrupted during {target}: finish it with opera run --store {config.store} --resume {summary.run_id}"
            )
            break

    nights = []
    with ResultStore(config.store) as store:
        # A result keeps its own script only when it was the signature's smallest instance so far;
        # the others point at their bug's (smallest) reproducer.
        bugs = store.bugs()
        reproducers = {b.signature: b.reproducer for b in bugs if b.reproducer}
        for target in sequence:
            if target not in runs:
                continue
            run_id, share = runs[target]
            record = store.get_run(run_id)
            prev = previous[target]
            results = store.results_in_plan_order(run_id)
            for ranked in results:
                r = ranked.result
                if r.reproducer is None and r.is_failure and r.signature:
                    r.reproducer = reproducers.get(r.signature)
            comparison = compare_results(
                target,
                run_id,
                (r.result for r in results),
                previous_run_id=prev.id if prev else None,
                previous=store.results(prev.id) if prev else (),
                versions=_versions(record, target),
                previous_versions=_versions(prev, target) if prev else None,
                known_signatures={b.signature for b in bugs if b.first_run < run_id},
            )
            _, planned, replayed, seconds = orders[target]
            nights.append(
                TargetNight(
                    target,
                    record,
                    results,
                    comparison,
                    share,
                    planned,
                    replayed,
                    seconds,
                    store.bugs(run_id),
                    rule_counts=store.rule_counts(run_id).get(target, {}),
                )
            )
    outcome = NightlyOutcome(
        number, config.store, out_dir, started, time.time(), config.budget_s, nights, notes, interrupted
    )
    from opera.report.coverage_gaps import coverage_gaps

    tonight = [r.result for n in nights for r in n.results]
    wanted = {r.instance_id for r in tonight}
    # the corpus is read again (it was freed for the runs), keeping only tonight's instances
    by_id = {inst.id: inst for inst in CorpusReader(config.corpus) if inst.id in wanted}
    outcome.gaps = coverage_gaps(tonight, by_id)
    if ledger is not None and any(e.target in runs for e in ledger.entries):
        outcome.ledger = str(ledger.path)
        _match_ledger(ledger, outcome, previous, by_id)
    from opera.nightly.html import write_html
    from opera.nightly.junit import write_junit

    outcome.junit = write_junit(outcome, out_dir / "junit.xml")
    outcome.html = write_html(outcome, out_dir / "report.html")
    return outcome


def _match_ledger(
    ledger: Ledger, outcome: NightlyOutcome, previous: dict[str, RunRecord | None], by_id: dict[str, OperatorInstance]
) -> None:
    """Each night against the ledger (``known.py``): the previous runs' results and the instances
    they need (from the corpus files those runs read, when not tonight's) are read here."""
    from opera.corpus import instances_by_id
    from opera.nightly.known import match_night

    with ResultStore(outcome.store) as store:
        for night in outcome.nights:
            if not any(e.target == night.target for e in ledger.entries):
                continue
            prev = previous.get(night.target)
            before = store.results(prev.id) if prev is not None else []
            missing = {r.instance_id for r in before} - by_id.keys()
            instances = dict(by_id)
            if prev is not None and missing:
                instances.update(instances_by_id(prev.corpus, missing))
            tonight = [r.result for r in night.results]
            night.known = match_night(ledger, night.comparison, tonight, before, instances)


def _versions(run: RunRecord, target: str) -> dict[str, Any]:
    """The target's compiler/library versions as recorded with the run, plus Opera's own."""
    recorded = run.versions.get(target, {})
    return {**(recorded if isinstance(recorded, dict) else {}), "opera": run.tool_version}


def _known_lines(night: TargetNight) -> list[str]:
    """The night against the ledger: known new failures grouped by entry, "fixed upstream?", the
    entries of the target that matched nothing."""
    if night.known is None:
        return []
    lines = []
    by_entry: dict[int, list[Change]] = {}
    for change in night.comparison.known_failures:
        assert change.known is not None
        by_entry.setdefault(change.known.index, []).append(change)
    for changes in by_entry.values():
        label = changes[0].known.label if changes[0].known is not None else ""
        for group in group_changes(changes)[:_TEXT_GROUPS]:
            lines.append(
                f"  {label}: {len(group.changes)} test(s) of {', '.join(group.apis[:3])}"
                f"{' ...' if len(group.apis) > 3 else ''}: {group.before} -> {group.after}"
            )
    for fixed in night.known.fixed_upstream:
        lines.append(
            f"  fixed upstream? {fixed.entry.name} ({fixed.entry.label.removeprefix('known (').removesuffix(')')}): "
            f"root cause {fixed.cause_id} of {', '.join(fixed.apis[:3])} failed in run {fixed.previous_run_id}, "
            f"its {fixed.passing} test(s) pass tonight, after {'; '.join(fixed.version_changes)}"
        )
    for entry in night.known.unmatched:
        lines.append(f"  ledger: {entry.describe()}: matched no failure tonight")
    return lines


def render_text(outcome: NightlyOutcome) -> str:
    """The summary printed at the end of ``opera nightly``."""
    lines = [
        f"nightly {outcome.number}: {len(outcome.nights)} target(s), {outcome.ended - outcome.started:.0f} s"
    ]
    kinds = list(ChangeKind)
    header = ["target", "run", "prev", "tests", "failing"] + [k.value for k in kinds]
    if outcome.ledger:
        header.append("known")  # new failures the ledger knows (the "new failure" column leaves them out)
    rows = []
    for night in outcome.nights:
        cmp = night.comparison
        failing = sum(r.result.is_failure for r in night.results)
        rows.append(
            [
                night.target,
                str(night.run.id),
                str(cmp.previous_run_id or "-"),
                str(len(night.results)),
                str(failing),
            ]
            + [str(len(cmp.new_failures if k is ChangeKind.NEW_FAILURE else cmp.of(k))) for k in kinds]
            + ([str(len(cmp.known_failures))] if outcome.ledger else [])
        )
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(header)]
    lines.append(
        "  ".join(
            h.ljust(w) if i == 0 else h.rjust(w) for i, (h, w) in enumerate(zip(header, widths, strict=True))
        )
    )
    for row in rows:
        lines.append(
            "  ".join(
                c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths, strict=True))
            )
        )
    for night in outcome.nights:
        cmp = night.comparison
        if cmp.first_night:
            lines.append(
                f"{night.target}: first nightly run, nothing to compare with: every failure counts as new"
                + (" unless the ledger knows its root cause" if night.known is not None else "")
            )
        elif cmp.version_changes:
            lines.append(
                f"{night.target}: versions changed since run {cmp.previous_run_id}: {'; '.join(cmp.version_changes)}"
            )
        reproduction = night.reproduction_headline()
        if reproduction is not None:
            lines.append(f"{night.target}: {reproduction}")
        groups = group_changes(
            c
            for c in cmp.changes
            if c.kind in (ChangeKind.NEW_FAILURE, ChangeKind.FIXED, ChangeKind.CHANGED_SYMPTOM) and c.known is None
        )
        for group in groups[:_TEXT_GROUPS]:
            lines.append(
                f"  {group.kind.value}: {len(group.changes)} test(s) of {', '.join(group.apis[:3])}"
                f"{' ...' if len(group.apis) > 3 else ''}: {group.before} -> {group.after}"
            )
        if len(groups) > _TEXT_GROUPS:
            lines.append(f"  ... {len(groups) - _TEXT_GROUPS} more groups (see the HTML report)")
        lines += _known_lines(night)
        if night.rule_counts:
            failed = {r: c.get("inconsistent", 0) + c.get("crash", 0) for r, c in sorted(night.rule_counts.items())}
            lines.append(
                "  oracles: "
                + ", ".join(f"{r} {n} failing of {sum(night.rule_counts[r].values())}" for r, n in failed.items())
                + f"; {len(night.rule_bugs())} signature(s) from them"
            )
        for kind in (ChangeKind.NEWLY_UNSUPPORTED, ChangeKind.NOW_SUPPORTED):
            ops = cmp.operators(kind)
            if ops:
                lines.append(f"  {kind.value} operators: {', '.join(ops)}")
        if cmp.not_rerun_failures:
            lines.append(
                f"  {cmp.not_rerun_failures} test(s) failing in run {cmp.previous_run_id} were not run tonight "
                "(no longer in the corpus, or the budget ran out)"
            )
    lines.extend(outcome.notes)
    new = len(outcome.new_failures())
    known = len(outcome.known_failures())
    if outcome.interrupted:
        lines.append("interrupted")
    elif new:
        regressions = sum(len(n.comparison.regressions) for n in outcome.nights)
        lines.append(
            f"{new} new failure(s): {regressions} in tests that ran without failing last time, "
            f"{new - regressions} in tests not run last time (first night, new instances, or a longer reach)"
            + (f"; {known} known failure(s) in the ledger, not counted" if known else "")
        )
    else:
        lines.append("no new failures" + (f" ({known} known failure(s) in the ledger, not counted)" if known else ""))
    all_bugs = [b for n in outcome.nights for b in n.bugs]
    if len(outcome.nights) > 1 and any(b.reproducer for b in all_bugs):
        from opera.reproduce.verify import summarize

        lines.append(f"all targets: {summarize(all_bugs).headline()}")
    if outcome.junit:
        lines.append(f"JUnit: {outcome.junit}")
    if outcome.html:
        lines.append(f"HTML report: {outcome.html}")
    return "\n".join(lines)
