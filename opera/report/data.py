"""What a report evaluates: one run of the store, its tests per target and their recorded outcomes.

``load_run`` checks the run (exists, finished, known targets) and returns, for each target, the
run's tests in the order they were planned with their outcome, bug signature and measured duration.
A test "reveals" a bug when its outcome is a failure outcome with a signature (``FAILURE_OUTCOMES``:
crash, native-crash, timeout, inconsistent); tests sharing a signature reveal one unique bug.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from opera.errors import OperaError
from opera.model import OperatorInstance
from opera.outcomes import FAILURE_OUTCOMES
from opera.store import RUN_COMPLETE, ResultStore, RunRecord

__all__ = ["BUG_KEYS", "RunData", "TargetTests", "key_bugs_by_root_cause", "load_run"]

# What one "bug" of APFD is: a unique failure signature, or a root cause (``opera triage``: many
# signatures of one defect count once, and one signature holding several defects counts each).
BUG_KEYS = ("signatures", "root-causes")


@dataclass
class TargetTests:
    """The run's finished tests on one target, in the run's planned order."""

    target: str
    ids: list[str]  # instance ids, planned order, only tests with a result
    bug_of: dict[str, str | None]  # instance id -> bug signature (None: no bug)
    duration_of: dict[str, float]  # instance id -> measured seconds
    outcomes: dict[str, int]  # outcome -> count
    planned: int  # tests planned for this target (>= len(ids) for a partial run)

    @property
    def signatures(self) -> list[str]:
        return sorted({s for s in self.bug_of.values() if s is not None})


@dataclass
class RunData:
    run: RunRecord
    store: str
    targets: dict[str, TargetTests]
    partial: bool  # some planned tests have no result (only with allow_partial)
    notes: list[str] = field(default_factory=list)


def load_run(
    store_path: str | Path,
    run_id: int | None = None,
    *,
    targets: Sequence[str] | None = None,
    allow_partial: bool = False,
) -> RunData:
    """Read one run (default: the store's last) for a report; ``OperaError`` on bad input."""
    path = Path(store_path)
    if not path.exists():
        raise OperaError(f"store not found: {path}")
    with ResultStore(path) as store:
        if run_id is None:
            run_id = store.last_run_id()
            if run_id is None:
                raise OperaError(f"{path}: the store holds no run")
        known = [r.id for r in store.runs()]
        if run_id not in known:
            have = f"runs {known[0]}..{known[-1]}" if known else "no run"
            raise OperaError(f"{path}: no run {run_id} (the store holds {have})")
        run = store.get_run(run_id)
        planned = store.planned(run_id)
        ranked = store.results_in_plan_order(run_id)
    run_targets = list(dict.fromkeys(p.target for p in planned))
    wanted = list(dict.fromkeys(targets)) if targets else run_targets
    unknown = [t for t in wanted if t not in run_targets]
    if unknown:
        raise OperaError(
            f"run {run_id} has no test on target {', '.join(unknown)} (its targets: {', '.join(run_targets)})"
        )
    missing = len(planned) - len(ranked)
    notes: list[str] = []
    if missing > 0 or (run.status != RUN_COMPLETE and not ranked):
        if not allow_partial:
            raise OperaError(
                f"run {run_id} is not finished (status {run.status}, {missing} of {len(planned)} planned tests have "
                f"no result): finish it with `opera run --resume {run_id}` or pass --allow-partial to evaluate "
                f"the {len(ranked)} tests that ran"
            )
        notes.append(
            f"partial run: status {run.status}, {len(ranked)} of {len(planned)} planned tests have a result; "
            "every order is evaluated over the tests that ran"
        )
    planned_per_target: dict[str, int] = {}
    for p in planned:
        planned_per_target[p.target] = planned_per_target.get(p.target, 0) + 1
    per_target: dict[str, TargetTests] = {}
    for name in wanted:
        per_target[name] = TargetTests(
            target=name,
            ids=[],
            bug_of={},
            duration_of={},
            outcomes={},
            planned=planned_per_target.get(name, 0),
        )
    for item in ranked:
        r = item.result
        tests = per_target.get(r.target)
        if tests is None:
            continue
        tests.ids.append(r.instance_id)
        tests.bug_of[r.instance_id] = r.signature if (r.signature and r.outcome in FAILURE_OUTCOMES) else None
        tests.duration_of[r.instance_id] = float(r.duration)
        tests.outcomes[r.outcome.value] = tests.outcomes.get(r.outcome.value, 0) + 1
    return RunData(run=run, store=str(path), targets=per_target, partial=missing > 0, notes=notes)


def key_bugs_by_root_cause(data: RunData, instances: Mapping[str, OperatorInstance]) -> None:
    """Re-key every target's failing tests by root cause id (``opera.triage.root_causes``) instead
    of signature, in place; the root causes are found over the run's results, as ``opera triage``
    finds them."""
    from opera.commands.triage import latest_results
    from opera.triage.root_causes import find_root_causes

    with ResultStore(data.store) as store:
        results = latest_results(store.results(data.run.id))
    for name, tests in data.targets.items():
        mine = [r for r in results if r.target == name]
        cause_of = {iid: cause.id for cause in find_root_causes(mine, instances) for iid in cause.instances}
        tests.bug_of = {iid: (cause_of.get(iid, sig) if sig is not None else None) for iid, sig in tests.bug_of.items()}
