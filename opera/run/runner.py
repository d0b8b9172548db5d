"""The runner (``opera run``): plan the tests, feed an executor, store every verdict (docs/design.md, Run).

A run is planned once: every corpus instance (in ``--order``, then the rest in corpus order, cut
at ``--limit``) times every requested target whose ``library`` matches it. The plan is written to
the store with the run, and each finished test is committed on its own, so ``--resume RUN`` after
a crash or a SIGKILL runs exactly the planned tests that have no result: nothing is lost and no
test gets two results (a test that was in flight when the run died has no result and runs again).

Instances the validity gate rejected (``valid is False``) or that are not migratable are recorded
as ``invalid`` by the runner itself, without a worker.

Order files are read by ``opera.prioritize.read_order`` (the format ``opera prioritize`` writes:
one instance id per line, ``#`` starts a comment); a malformed line or an id not in the corpus is
an error. Corpus instances the order does not name run *after* the ordered ones, in corpus order:
an order is a priority, not a filter (``--limit`` is the filter); the count is reported.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import sys
import time
from collections import Counter, deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any, TextIO

from opera import __version__
from opera.corpus import CorpusReader
from opera.errors import OperaError
from opera.model import OperatorInstance
from opera.outcomes import Outcome, TestResult
from opera.prioritize import read_order
from opera.progress import progress_bar
from opera.quiet import quiet_native_logs
from opera.run.execution import instance_size, invalid_result
from opera.run.executors import (
    Executor,
    ExecutorFactory,
    ExecutorRequest,
    TaskOutcome,
    TestTask,
    WorkerSettings,
    prepare_executor,
)
from opera.selection import Selection
from opera.store import RUN_BUDGET, RUN_COMPLETE, RUN_INTERRUPTED, ResultStore
from opera.verdict.signature import signature_digest

__all__ = [
    "RunConfig",
    "RunSettings",
    "RunSummary",
    "load_instances",
    "parse_duration",
    "plan_tests",
    "resume_run",
    "start_run",
]

_DURATION = re.compile(r"^(?:(\d+)h)?(?:(\d+)m)?(?:(\d+(?:\.\d+)?)s)?$")


def parse_duration(text: str) -> float:
    """``90s``, ``30m``, ``2h``, ``1h30m``, ``1h30m15s`` or plain seconds ``45`` -> seconds."""
    value = text.strip().lower()
    if re.fullmatch(r"\d+(\.\d+)?", value):
        seconds = float(value)
    else:
        match = _DURATION.fullmatch(value)
        if not value or match is None or not any(match.groups()):
            raise OperaError(f"bad duration {text!r}: use e.g. 90s, 30m, 2h or 1h30m")
        hours, minutes, secs = match.groups()
        seconds = int(hours or 0) * 3600 + int(minutes or 0) * 60 + float(secs or 0)
    if seconds <= 0:
        raise OperaError(f"bad duration {text!r}: must be positive")
    return seconds


@dataclass(kw_only=True)
class RunSettings:
    """How each test runs and where results go: the part of a run's config that ``opera run`` and
    ``opera nightly`` share (the same flags, ``opera.commands.run.add_run_settings_arguments``).
    ``RunConfig`` and ``NightlyConfig`` both extend it, so a setting is declared once."""

    store: str = "opera.db"
    seed: int = 0
    timeout_s: float = 60.0
    workers: int = 0  # 0: one per core
    max_rss_bytes: int | None = None  # None: default_max_rss_bytes(workers)
    oracle_config: str | None = None
    unsupported_config: str | None = None
    reproducers: bool = True
    # after the run, re-run each of its signatures' reproducers in a fresh process (opera.reproduce.verify)
    verify_reproducers: bool = True
    executor: str = "local"  # opera.run.executors.EXECUTORS
    address: str | None = None  # cluster executors: auto | HOST:PORT (None: start one here)
    # torch function instances: weights etc. as constants (a real model) or every tensor an input
    torch_tensor_args: str = "constants"
    # ONNX integer/bool data operands: runtime inputs (the kernel runs) or constants (may be folded)
    onnx_data_inputs: str = "runtime"
    # oracles beside the library's reference (opera.run.rules: optlevel, reload, batch, paths)
    rules: list[str] = field(default_factory=list)
    # batched compilation: up to this many tests of a batchable target compiled as one model
    # (opera.run.batch; the local executor); 1: every test alone; 0 (auto): AUTO_BATCH on the
    # targets whose batches pay on a random slice of the corpus (``Target.batch_pays``)
    batch: int = 0
    # which part of the corpus (--api, --test, --id, --sample): applied when the run is planned
    selection: Selection = field(default_factory=Selection)

    def run_settings(self) -> dict[str, Any]:
        """This config's ``RunSettings`` fields, as keyword arguments for another config."""
        return {f.name: getattr(self, f.name) for f in fields(RunSettings)}


@dataclass
class RunConfig(RunSettings):
    """Everything that defines a run; stored as JSON with the run (``--resume`` reads it back).
    The JSON is flat: the ``RunSettings`` fields sit beside these."""

    corpus: list[str]
    targets: list[str]
    limit: int | None = None
    order: str | None = None
    budget_s: float | None = None
    order_only: bool = False  # the order file is also the filter: instances it does not name do not run

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["selection"] = self.selection.to_json()
        return out

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> RunConfig:
        known = {f for f in cls.__dataclass_fields__}
        config = cls(**{k: v for k, v in obj.items() if k in known})
        config.selection = Selection.from_json(obj.get("selection"))
        return config

    def effective_workers(self) -> int:
        return self.workers if self.workers and self.workers > 0 else max(1, os.cpu_count() or 1)


def render_rule_counts(counts: dict[str, dict[str, dict[str, int]]]) -> list[str]:
    """The per-oracle outcome table (``opera run``, ``opera bugs``): one row per (target, rule)."""
    if not counts:
        return []
    from opera.run.rules import RULE_OUTCOMES

    rows = [(t, r, counts[t][r]) for t in sorted(counts) for r in sorted(counts[t])]
    width = max([len(f"{t} {r}") for t, r, _ in rows] + [len("target oracle")])
    lines = ["oracles beside the reference (per test):"]
    lines.append(" ".join([f"{'target oracle':<{width}}"] + [f"{o:>{max(len(o), 5)}}" for o in RULE_OUTCOMES]))
    for target, rule, row in rows:
        cells = [f"{row.get(o, 0):>{max(len(o), 5)}}" for o in RULE_OUTCOMES]
        lines.append(" ".join([f"{target + ' ' + rule:<{width}}", *cells]))
    return lines


@dataclass
class RunSummary:
    run_id: int
    status: str
    counts: dict[str, dict[str, int]]  # target -> outcome -> count (whole run)
    new_signatures: list[str]  # first seen in this run
    planned: int
    ran_now: int  # results added by this invocation
    elapsed_s: float
    notes: list[str] = field(default_factory=list)
    # the run's reproducers re-run on their own (VerificationSummary.to_json()); None: not verified
    reproduction: dict[str, Any] | None = None
    reproduction_lines: list[str] = field(default_factory=list)
    # target -> rule -> outcome -> count (the run's metamorphic/differential rules; empty: none)
    rule_counts: dict[str, dict[str, dict[str, int]]] = field(default_factory=dict)

    def render(self, store_path: str) -> str:
        lines = [
            f"run {self.run_id}: {self.status}, {self.ran_now} tests in {self.elapsed_s:.1f} s ({self.planned} planned)"
        ]
        outcomes = [o.value for o in Outcome]
        width = max([len(t) for t in self.counts] + [6])
        lines.append(" ".join([f"{'target':<{width}}"] + [f"{o:>{max(len(o), 5)}}" for o in outcomes]))
        for target in sorted(self.counts):
            row = self.counts[target]
            lines.append(
                " ".join([f"{target:<{width}}"] + [f"{row.get(o, 0):>{max(len(o), 5)}}" for o in outcomes])
            )
        lines.extend(render_rule_counts(self.rule_counts))
        if self.new_signatures:
            lines.append(f"new bug signatures ({len(self.new_signatures)}):")
            lines.extend(f"  {s}" for s in self.new_signatures)
        else:
            lines.append("no new bug signatures")
        lines.extend(self.reproduction_lines)
        lines.extend(self.notes)
        if self.status != RUN_COMPLETE:
            lines.append(f"resume with: opera run --store {store_path} --resume {self.run_id}")
        return "\n".join(lines)


# ---- planning -------------------------------------------------------------------------------


def load_instances(corpus: Iterable[str]) -> dict[str, OperatorInstance]:
    """id -> instance, in corpus order (the first of duplicate ids wins)."""
    instances: dict[str, OperatorInstance] = {}
    for inst in CorpusReader(list(corpus)):
        instances.setdefault(inst.id, inst)
    return instances


def plan_tests(
    instances: dict[str, OperatorInstance],
    target_libraries: dict[str, str],
    *,
    order: list[str] | None = None,
    limit: int | None = None,
    notes: list[str] | None = None,
    selection: Selection | None = None,
    order_only: bool = False,
) -> list[tuple[str, str]]:
    """(instance id, target) pairs, instance-major, in priority order. ``selection`` keeps part of
    the corpus (an order naming instances it leaves out is fine); ``order_only``: the order is the
    plan, already selected (``opera nightly``): only what it names runs, the selection is not drawn again."""
    notes = notes if notes is not None else []
    if order is not None:
        unknown = [i for i in order if i not in instances]
        if unknown:
            raise OperaError(
                f"order file names {len(unknown)} id(s) not in the corpus, e.g. {', '.join(unknown[:3])}"
            )
    if selection and not order_only:
        total = len(instances)
        instances = {inst.id: inst for inst in selection.apply(instances.values())}
        notes.append(f"note: {len(instances)} of {total} corpus instance(s) selected ({selection.describe()})")
        if order is not None:
            order = [i for i in order if i in instances]
    ids = list(instances)
    if order is not None:
        ordered = list(dict.fromkeys(order))
        named = set(ordered)
        rest = [] if order_only else [i for i in ids if i not in named]
        if rest:
            notes.append(
                f"note: {len(rest)} corpus instance(s) not in the order file run after the ordered ones"
            )
        ids = ordered + rest
    libraries = set(target_libraries.values())
    matching = [i for i in ids if instances[i].library in libraries]
    skipped = len(ids) - len(matching)
    if skipped:
        notes.append(f"note: {skipped} instance(s) of libraries no requested target consumes were skipped")
    if limit is not None:
        matching = matching[:limit]
    planned = [
        (iid, t) for iid in matching for t, lib in target_libraries.items() if lib == instances[iid].library
    ]
    if not planned:
        raise OperaError(
            f"nothing to run: no corpus instance of the libraries {', '.join(sorted(libraries))} "
            f"consumed by the target(s) {', '.join(target_libraries)}"
        )
    return planned


def _runnable_reason(inst: OperatorInstance) -> str | None:
    if inst.valid is False:
        return f"rejected by the validity gate: {inst.invalid_reason or 'no reason recorded'}"
    reason = inst.opaque_reason
    if reason is not None:
        return f"not migratable: {reason}"
    return None


# ---- running --------------------------------------------------------------------------------


def _resolve_targets(names: list[str], check_here: bool = True) -> dict[str, Any]:
    """Targets by name; ``check_here``: each must be usable on this machine (a cluster executor
    checks them on its nodes instead)."""
    from opera.run.targets import get_target

    if not names:
        raise OperaError("no target given: use --target NAME (see `opera targets`)")
    targets = {}
    for name in dict.fromkeys(names):
        target = get_target(name)
        with quiet_native_logs():  # probing imports TensorFlow, whose C++ start-up lines no one asked for
            reason = target.availability() if check_here else None
        if reason is not None:
            raise OperaError(f"target {name} is not available here: {reason}")
        targets[name] = target
    return targets


def _store_dir(store_path: str) -> Path:
    return Path(f"{store_path}.d")


def _settings(config: RunConfig, run_id: int) -> WorkerSettings:
    from opera.run.executors.local import default_max_rss_bytes

    base = _store_dir(config.store)
    workers = config.effective_workers()
    return WorkerSettings(
        seed=config.seed,
        timeout_s=config.timeout_s,
        warmup_timeout_s=max(300.0, config.timeout_s),
        max_rss_bytes=config.max_rss_bytes or default_max_rss_bytes(workers),
        oracle_config=config.oracle_config,
        unsupported_config=config.unsupported_config,
        reproducer_dir=str(base / "repro") if config.reproducers else None,
        log_dir=str(base / "logs" / f"run-{run_id}"),
        torch_tensor_args=config.torch_tensor_args,
        onnx_data_inputs=config.onnx_data_inputs,
        rules=tuple(config.rules),
        batch=config.batch or AUTO_BATCH,
        batch_targets=_batch_targets(config),
    )


def known_failing_operators(
    store: ResultStore, run_id: int, targets: Sequence[str]
) -> tuple[tuple[str, str], ...]:
    """(target, operator) pairs with a test that did not pass in the store's runs before
    ``run_id`` (the previous nights of a nightly store): a batch holding one would most likely
    fail as a whole and be bisected, so those tests run alone from the start (not for a gap the
    target's batches decide, ``Target.batch_gap_message``). Verdicts do not depend on it; only
    which tests are tried in a batch does."""
    from opera.run.batch import operator_name
    from opera.run.targets import TARGETS

    gaps = {t: str(getattr(TARGETS.get(t), "batch_gap_message", "")) for t in targets}
    found = {(target, operator_name(api)) for target, api in store.apis_not_passing_before(run_id, targets, gaps)}
    return tuple(sorted(found))


def _batch_targets(config: RunConfig) -> tuple[str, ...]:
    """The run's targets whose tests are compiled in batches: with ``--batch K`` every
    ``Target.batchable`` one; by default (auto) those whose batches pay (``Target.batch_pays``)."""
    if config.batch == 1 or config.executor != "local":
        return ()
    from opera.run.targets import TARGETS

    wanted = "batch_pays" if config.batch == 0 else "batchable"
    return tuple(t for t in config.targets if getattr(TARGETS.get(t), wanted, False))


AUTO_BATCH = 16  # the batch size measured in docs/results.md (batched compilation)


def _prepare_executor(
    config: RunConfig, targets: dict[str, Any], factory: ExecutorFactory | None
) -> ExecutorFactory:
    """Connect to / check the executor before the run is touched (bad input: one clear error)."""
    if factory is not None:
        return factory
    request = ExecutorRequest(
        targets=targets, address=config.address, workers=config.workers, max_rss_bytes=config.max_rss_bytes
    )
    return prepare_executor(config.executor, request)


def _check_configs(config: RunConfig) -> None:
    """Load both configs once in the parent so a bad file is one clear error, not N worker crashes."""
    from opera.verdict.oracles import load_oracle_config
    from opera.verdict.unsupported import load_unsupported

    load_oracle_config(config.oracle_config)
    load_unsupported(config.unsupported_config)


def start_run(
    config: RunConfig,
    *,
    show_progress: bool = True,
    executor_factory: Callable[[int, WorkerSettings], Executor] | None = None,
    out: TextIO | None = None,
) -> RunSummary:
    """Plan, record and execute a new run."""
    _check_configs(config)
    if config.budget_s is not None and config.budget_s <= 0:
        raise OperaError("budget must be positive")
    targets = _resolve_targets(config.targets, check_here=config.executor == "local")
    notes: list[str] = []
    order = read_order(config.order)[0] if config.order else None
    instances = load_instances(config.corpus)
    planned = plan_tests(
        instances,
        {n: t.library for n, t in targets.items()},
        order=order,
        limit=config.limit,
        notes=notes,
        selection=config.selection,
        order_only=config.order_only,
    )
    config.corpus = [str(Path(p).resolve()) for p in config.corpus]
    executor_factory = _prepare_executor(config, targets, executor_factory)
    versions = {name: _safe_versions(t) for name, t in targets.items()}
    with ResultStore(config.store) as store:
        run_id = store.create_run(
            config.to_json(),
            tool_version=__version__,
            versions=versions,
            corpus=config.corpus,
            planned=planned,
        )
        for note in notes:
            print(note, file=out or sys.stderr)
        summary = _execute(store, run_id, config, instances, show_progress, executor_factory, [])
        _verify_reproducers(store, config, summary, show_progress)
        return summary


def resume_run(
    store_path: str,
    run_id: int,
    *,
    workers: int | None = None,
    timeout_s: float | None = None,
    budget_s: float | None = None,
    show_progress: bool = True,
    executor_factory: Callable[[int, WorkerSettings], Executor] | None = None,
    executor: str | None = None,
    address: str | None = None,
    verify_reproducers: bool | None = None,
    max_rss_bytes: int | None = None,
    reproducers: bool | None = None,
) -> RunSummary:
    """Finish a run: the planned tests with no result yet. Corpus, targets, order, limit, seed and
    the oracle/unsupported configs come from the stored run (the verdicts of one run are judged
    alike); worker count, timeout, memory limit and whether reproducers are written may be changed. The run's original budget
    is not applied again (resuming means finishing); pass ``budget_s`` to bound the resumption.
    ``executor``/``address`` replace the stored ones (a run started on a cluster may be finished
    here, or on another cluster)."""
    if not Path(store_path).exists():
        raise OperaError(f"store not found: {store_path}")
    with ResultStore(store_path) as store:
        record = store.get_run(run_id)
        config = RunConfig.from_json(record.config)
        config.store = store_path
        if workers is not None:
            config.workers = workers
        if timeout_s is not None:
            config.timeout_s = timeout_s
        if executor is not None:
            config.executor, config.address = executor, address
        if verify_reproducers is not None:
            config.verify_reproducers = verify_reproducers
        if max_rss_bytes is not None:
            config.max_rss_bytes = max_rss_bytes
        if reproducers is not None:
            config.reproducers = reproducers
        config.budget_s = budget_s  # resuming means finishing: the stored budget is not re-applied
        _check_configs(config)
        targets = _resolve_targets(config.targets, check_here=config.executor == "local")
        executor_factory = _prepare_executor(config, targets, executor_factory)
        store.claim_run(run_id)
        instances = load_instances(config.corpus)
        missing = [p.instance_id for p in store.pending(run_id) if p.instance_id not in instances]
        if missing:
            raise OperaError(
                f"run {run_id}: {len(missing)} planned instance(s) are no longer in its corpus files, e.g. {missing[0]}"
            )
        summary = _execute(store, run_id, config, instances, show_progress, executor_factory, [])
        _verify_reproducers(store, config, summary, show_progress)
        return summary


def _safe_versions(target: Any) -> dict[str, str]:
    try:
        return dict(target.versions())
    except Exception as exc:
        return {"error": f"{type(exc).__name__}: {exc}"}


class _Progress:
    def __init__(self, total: int, done: int, run_id: int, show: bool) -> None:
        self.bar = progress_bar(
            total=total, desc=f"run {run_id}", unit="test", disable=not show, initial=done
        )
        self.counts: Counter[str] = Counter()

    def update(self, result: TestResult) -> None:
        self.counts[result.outcome.value] += 1
        self.bar.set_postfix_str(" ".join(f"{k}={v}" for k, v in sorted(self.counts.items())), refresh=False)
        self.bar.update(1)

    def close(self) -> None:
        self.bar.close()


def _execute(
    store: ResultStore,
    run_id: int,
    config: RunConfig,
    instances: dict[str, OperatorInstance],
    show_progress: bool,
    executor_factory: Callable[[int, WorkerSettings], Executor] | None,
    notes: list[str],
) -> RunSummary:
    started = time.monotonic()
    planned_count = len(store.planned(run_id))
    pending = deque(store.pending(run_id))
    settings = _settings(config, run_id)
    if settings.batch_targets:
        settings = replace(
            settings, batch_known_failing=known_failing_operators(store, run_id, settings.batch_targets)
        )
    repro_dir = Path(settings.reproducer_dir) if settings.reproducer_dir else None
    progress = _Progress(planned_count, planned_count - len(pending), run_id, show_progress)
    ran_now = 0
    status = RUN_COMPLETE
    executor: Executor | None = None

    def record(result: TestResult, inst: OperatorInstance, temp_reproducer: str | None) -> None:
        nonlocal ran_now
        size = instance_size(inst)
        if temp_reproducer is not None:
            result.reproducer = _adopt(store, repro_dir, result.signature, size, temp_reproducer)
        for rule in (result.extra.get("rules") or {}).values():
            temp = rule.pop("reproducer_temp", None)
            kept = _adopt(store, repro_dir, rule.get("signature"), size, temp) if temp else None
            if kept is not None:
                rule["reproducer"] = kept
        store.add_result(run_id, result, instance_size=size)
        ran_now += 1
        progress.update(result)
        if (
            executor is not None
            and result.is_failure
            and result.reproducer is None
            and temp_reproducer is None
            and repro_dir is not None
            and result.signature
            and store.wants_reproducer(result.signature, size)
        ):
            # the worker died or hung: ask a fresh one to write the script (no compiler call)
            executor.submit(TestTask(-1, inst, result.target, kind="reproduce", failed=result))

    try:
        if pending:
            factory = executor_factory or _local_executor
            executor = factory(config.effective_workers(), settings)
        while pending or (executor is not None and executor.in_flight()):
            over_budget = config.budget_s is not None and time.monotonic() - started >= config.budget_s
            if over_budget:  # stop starting tests: those not submitted, and those queued unstarted
                dropped = executor.drop_queued() if executor is not None else 0
                if pending or dropped:
                    status = RUN_BUDGET
                    pending.clear()
            while pending and executor is not None and executor.free_slots() > 0:
                test = pending.popleft()
                inst = instances[test.instance_id]
                reason = _runnable_reason(inst)
                if reason is not None:
                    record(invalid_result(inst, test.target, reason), inst, None)
                    continue
                executor.submit(TestTask(test.seq, inst, test.target))
            if executor is None:
                break
            for outcome in executor.poll(0.25):
                _handle(outcome, store, run_id, repro_dir, record)
    except KeyboardInterrupt:
        status = RUN_INTERRUPTED
    except BaseException:  # e.g. workers that cannot start: the run stays resumable
        status = RUN_INTERRUPTED
        raise
    finally:
        if executor is not None:
            executor.close()
            batched = int(getattr(executor, "batched", 0))
            if settings.batch_targets:
                notes.append(
                    f"{batched} test(s) decided in batches of up to {settings.batch} "
                    f"({', '.join(settings.batch_targets)}); every other test ran alone"
                )
        progress.close()
        store.set_run_status(run_id, status)
    new_signatures = [b.signature for b in store.bugs(run_id) if b.first_run == run_id]
    return RunSummary(
        run_id=run_id,
        status=status,
        counts=store.outcome_counts(run_id),
        rule_counts=store.rule_counts(run_id),
        new_signatures=new_signatures,
        planned=planned_count,
        ran_now=ran_now,
        elapsed_s=time.monotonic() - started,
        notes=notes,
    )


def _verify_reproducers(store: ResultStore, config: RunConfig, summary: RunSummary, show: bool) -> None:
    """Re-run the run's signatures' reproducers in fresh processes and store whether each shows
    its failure (those not verified yet, or verified with other compiler versions); then put the
    verdicts of all the run's signatures in the summary. Never fails the run: a run interrupted
    or killed here keeps its results, ``opera bugs --verify-pending`` finishes the verification."""
    from opera.reproduce.verify import needs_verification, summarize, verify_bugs

    run_id = summary.run_id
    if not config.reproducers:
        return
    versions = store.get_run(run_id).versions
    bugs = store.bugs(run_id)
    todo = [b for b in bugs if needs_verification(b, versions.get(b.target))]
    skipped = ""
    if not config.verify_reproducers:
        skipped = "not verified (--no-verify)"
    elif summary.status == RUN_INTERRUPTED:
        skipped = "not verified (the run was interrupted)"
    elif todo and config.executor != "local":  # the scripts run here: the compilers must be here
        here = {t for t in {b.target for b in todo} if _available_here(t)}
        gone = sorted({b.target for b in todo} - here)
        if gone:
            summary.notes.append(f"note: reproducers of {', '.join(gone)} not verified: not installed here")
        todo = [b for b in todo if b.target in here]
    interrupted = False
    done = 0
    if todo and not skipped:
        from opera.run.executors.local import default_max_rss_bytes

        done, interrupted = verify_bugs(
            store,
            todo,
            timeout_s=config.timeout_s,
            workers=config.effective_workers(),
            max_rss_bytes=config.max_rss_bytes or default_max_rss_bytes(config.effective_workers()),
            versions=versions.get,
            show_progress=show,
            desc=f"verify run {run_id}",
        )
    result = summarize(store.bugs(run_id))
    result.verified_now = done
    result.interrupted = interrupted
    result.skipped_reason = skipped
    summary.reproduction = result.to_json()
    if result.verified + result.unverified == 0:
        return
    lines = [result.headline() + (f", {skipped}" if skipped and result.unverified else "")]
    for bug in result.failing[:20]:
        lines.append(f"  {bug.repro_status}: {bug.signature}: {bug.repro_detail[:200]}")
    if len(result.failing) > 20:
        lines.append(f"  ... {len(result.failing) - 20} more (opera bugs --run {run_id})")
    if result.unverified:
        why = "interrupted; " if interrupted else ""
        lines.append(
            f"  {why}verify them with: opera bugs --store {config.store} --run {run_id} --verify-pending"
        )
    summary.reproduction_lines = lines


def _available_here(target: str) -> bool:
    from opera.run.targets import get_target

    try:
        with quiet_native_logs():
            return get_target(target).availability() is None
    except Exception:
        return False


def _local_executor(workers: int, settings: WorkerSettings) -> Executor:
    from opera.run.executors.local import LocalExecutor

    return LocalExecutor(workers, settings)


def _handle(
    outcome: TaskOutcome,
    store: ResultStore,
    run_id: int,
    repro_dir: Path | None,
    record: Callable[[TestResult, OperatorInstance, str | None], None],
) -> None:
    task = outcome.task
    if task.kind == "test":
        assert outcome.result is not None
        record(outcome.result, task.instance, outcome.reproducer)
        return
    # a reproducer written after a worker died on the test
    failed = task.failed
    if outcome.reproducer is None or failed is None or failed.signature is None:
        return
    size = instance_size(task.instance)
    path = _adopt(store, repro_dir, failed.signature, size, outcome.reproducer)
    if path is not None:
        store.set_reproducer(
            run_id, task.instance.id, task.target, failed.signature, path, size, api=task.instance.api
        )


def _adopt(
    store: ResultStore, repro_dir: Path | None, signature: str | None, size: int, temp_path: str
) -> str | None:
    """Keep a worker's temporary reproducer as ``repro/<signature-hash>.py`` when it is the
    signature's smallest instance so far; delete it otherwise."""
    if repro_dir is None or signature is None or not store.wants_reproducer(signature, size):
        with contextlib.suppress(OSError):
            os.unlink(temp_path)
        return None
    final = repro_dir / f"{signature_digest(signature)}.py"
    final.parent.mkdir(parents=True, exist_ok=True)
    shutil.move(temp_path, final)
    return str(final)


def summary_json(summary: RunSummary) -> str:
    return json.dumps(asdict(summary), indent=2, sort_keys=True)
