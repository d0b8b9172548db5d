"""Tonight's verdicts against the previous nightly run of the same target.

Per test (instance x target), over the tests both runs executed:

- **new failure**: not failing before (pass, unsupported, invalid, ...), failing now;
- **fixed**: failing before, now pass;
- **still failing**: failing before and now, same outcome and signature;
- **changed symptom**: failing before and now, another outcome (crash -> inconsistent) or signature;
- **newly unsupported** / **now supported**: the frontend started / stopped refusing the operator.

A failing test the previous run did not execute (a new corpus instance, or one its budget did not
reach) is *still failing* when its bug signature was already known (seen in the previous run, or
in any earlier run of the store: ``known_signatures``), and a *new failure* otherwise: a longer
reach tonight must not turn the job red for a known bug, but a bug found for the first time is
news. On a first night every failure is new. Each change carries the target's compiler/library version changes
between the two runs, so a verdict change can be tied to an upgrade.

With a ledger of known bugs (``opera.nightly.known``), a new failure whose root cause the ledger
knows carries its entry (``Change.known``): it is listed as known and does not count toward the
exit code (``TargetComparison.new_failures`` are the unknown ones).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from opera.outcomes import FAILURE_OUTCOMES, Outcome, Stage, TestResult

if TYPE_CHECKING:
    from opera.triage.ledger import Entry

__all__ = [
    "Change",
    "ChangeGroup",
    "ChangeKind",
    "TargetComparison",
    "Verdict",
    "compare_results",
    "group_changes",
    "version_changes",
]


class ChangeKind(StrEnum):
    NEW_FAILURE = "new failure"
    FIXED = "fixed"
    STILL_FAILING = "still failing"
    CHANGED_SYMPTOM = "changed symptom"
    NEWLY_UNSUPPORTED = "newly unsupported"
    NOW_SUPPORTED = "now supported"


@dataclass(frozen=True)
class Verdict:
    outcome: Outcome
    stage: Stage
    signature: str | None
    reproducer: str | None
    message: str

    @classmethod
    def of(cls, result: TestResult) -> Verdict:
        return cls(result.outcome, result.stage, result.signature, result.reproducer, result.message)

    @property
    def is_failure(self) -> bool:
        return self.outcome in FAILURE_OUTCOMES

    def describe(self) -> str:
        return f"{self.outcome.value} ({self.signature})" if self.signature else self.outcome.value


@dataclass(frozen=True)
class Change:
    kind: ChangeKind
    target: str
    instance_id: str
    api: str
    before: Verdict | None  # None: the previous run did not execute this test (or first night)
    after: Verdict
    version_changes: tuple[str, ...] = ()  # e.g. "openvino 2026.3.0 -> 2026.4.1"; () when none
    known: Entry | None = None  # a new failure whose root cause the ledger knows


@dataclass
class TargetComparison:
    target: str
    run_id: int
    previous_run_id: int | None  # None: first night for this target
    version_changes: list[str] = field(default_factory=list)
    changes: list[Change] = field(default_factory=list)
    compared: int = 0  # tests both runs executed
    only_tonight: int = 0
    not_rerun: int = 0  # tests the previous run executed and tonight did not
    not_rerun_failures: int = 0  # ... of which were failing then (their status is unknown tonight)

    @property
    def first_night(self) -> bool:
        return self.previous_run_id is None

    def of(self, kind: ChangeKind) -> list[Change]:
        return [c for c in self.changes if c.kind is kind]

    @property
    def new_failures(self) -> list[Change]:
        """New failures the ledger does not know: what makes the nightly exit 1."""
        return [c for c in self.of(ChangeKind.NEW_FAILURE) if c.known is None]

    @property
    def known_failures(self) -> list[Change]:
        """New failures whose root cause the ledger knows (listed as known, not counted)."""
        return [c for c in self.of(ChangeKind.NEW_FAILURE) if c.known is not None]

    @property
    def regressions(self) -> list[Change]:
        """New failures of tests the previous run executed (and that did not fail then), unknown
        to the ledger."""
        return [c for c in self.new_failures if c.before is not None]

    def operators(self, kind: ChangeKind) -> dict[str, int]:
        """api -> number of tests with this kind of change (newly unsupported / now supported operators)."""
        return dict(sorted(Counter(c.api for c in self.of(kind)).items()))


@dataclass
class ChangeGroup:
    """Changes of one kind on one target with the same verdicts before and after (one bug
    signature, usually): what a person reads; the per-test list is in the JUnit file."""

    kind: ChangeKind
    target: str
    before: str  # Verdict.describe(), or "not run"
    after: str
    changes: list[Change] = field(default_factory=list)

    @property
    def apis(self) -> list[str]:
        return list(dict.fromkeys(c.api for c in self.changes))

    @property
    def reproducer(self) -> str | None:
        for c in self.changes:
            for verdict in (c.after, c.before):
                if verdict is not None and verdict.reproducer:
                    return verdict.reproducer
        return None

    @property
    def version_changes(self) -> tuple[str, ...]:
        return self.changes[0].version_changes if self.changes else ()


def group_changes(changes: Iterable[Change]) -> list[ChangeGroup]:
    """Group by (kind, target, verdict before, verdict after); largest groups first."""
    groups: dict[tuple[ChangeKind, str, str, str], ChangeGroup] = {}
    for c in changes:
        before = c.before.describe() if c.before else "not run"
        key = (c.kind, c.target, before, c.after.describe())
        groups.setdefault(key, ChangeGroup(c.kind, c.target, before, c.after.describe())).changes.append(c)
    order = list(ChangeKind)
    return sorted(
        groups.values(), key=lambda g: (order.index(g.kind), g.target, -len(g.changes), g.before, g.after)
    )


def version_changes(before: Mapping[str, Any], after: Mapping[str, Any]) -> list[str]:
    """``name old -> new`` for every package whose recorded version differs (added/removed too)."""
    out = []
    for name in sorted(set(before) | set(after)):
        old, new = before.get(name), after.get(name)
        if old != new:
            out.append(
                f"{name} {old if old is not None else '(none)'} -> {new if new is not None else '(none)'}"
            )
    return out


def compare_results(
    target: str,
    run_id: int,
    results: Iterable[TestResult],
    *,
    previous_run_id: int | None = None,
    previous: Iterable[TestResult] = (),
    versions: Mapping[str, Any] | None = None,
    previous_versions: Mapping[str, Any] | None = None,
    known_signatures: Iterable[str] = (),
) -> TargetComparison:
    """Compare one target's results of tonight with those of its previous nightly run."""
    now = {r.instance_id: r for r in results if r.target == target}
    before = {r.instance_id: r for r in previous if r.target == target}
    changed_versions = (
        version_changes(previous_versions or {}, versions or {}) if previous_run_id is not None else []
    )
    tied = tuple(changed_versions)
    cmp = TargetComparison(target, run_id, previous_run_id, changed_versions)
    known = {r.signature for r in before.values() if r.is_failure and r.signature}
    if previous_run_id is not None:
        known.update(known_signatures)
    for iid, result in now.items():
        after = Verdict.of(result)
        prev = before.get(iid)
        kind: ChangeKind | None
        if prev is None:
            cmp.only_tonight += 1
            if not after.is_failure:
                continue
            kind = ChangeKind.STILL_FAILING if after.signature in known else ChangeKind.NEW_FAILURE
            cmp.changes.append(Change(kind, target, iid, result.api, None, after, tied))
            continue
        cmp.compared += 1
        was = Verdict.of(prev)
        for kind in _kinds(was, after):
            cmp.changes.append(Change(kind, target, iid, result.api, was, after, tied))
    gone = [r for iid, r in before.items() if iid not in now]
    cmp.not_rerun = len(gone)
    cmp.not_rerun_failures = sum(r.is_failure for r in gone)
    order = list(ChangeKind)
    cmp.changes.sort(key=lambda c: (order.index(c.kind), c.api, c.instance_id))
    return cmp


def _kinds(was: Verdict, now: Verdict) -> Sequence[ChangeKind]:
    kinds: list[ChangeKind] = []
    if was.is_failure and now.is_failure:
        same = was.outcome is now.outcome and was.signature == now.signature
        kinds.append(ChangeKind.STILL_FAILING if same else ChangeKind.CHANGED_SYMPTOM)
    elif now.is_failure:
        kinds.append(ChangeKind.NEW_FAILURE)
    elif was.is_failure and now.outcome is Outcome.PASS:
        kinds.append(ChangeKind.FIXED)
    unsupported = Outcome.UNSUPPORTED
    if now.outcome is unsupported and was.outcome not in (unsupported, Outcome.INVALID):
        kinds.append(ChangeKind.NEWLY_UNSUPPORTED)
    elif was.outcome is unsupported and now.outcome not in (unsupported, Outcome.INVALID):
        kinds.append(ChangeKind.NOW_SUPPORTED)
    return kinds
