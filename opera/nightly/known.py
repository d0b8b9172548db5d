"""The ledger of known bugs in the nightly (``opera nightly --ledger``, docs/reference.md).

Per target, tonight's failures are grouped into root causes (``opera.triage.root_causes``, the
passing tests of the same operators as contrast) and each is matched against the ledger
(``opera.triage.ledger``):

- a **new failure** whose root cause the ledger knows is marked with its entry
  (``Change.known``): listed as "known (URL)", it does not count toward exit code 1; only new
  failures of root causes the ledger does not know are new;
- **fixed upstream?**: an entry that matched a root cause of the previous nightly run, matches none
  tonight, whose failing tests of last night ran tonight and none of them fails, while the
  target's versions changed between the two runs (Opera's own version aside): the upgrade may
  have fixed it, and the ledger may want ``status = "fixed"``;
- an entry of the target that matched nothing tonight (and is not "fixed upstream?") is listed,
  one line each: a stale entry, or a test the budget did not reach.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from opera.model import OperatorInstance
from opera.nightly.compare import ChangeKind, TargetComparison
from opera.outcomes import Outcome, TestResult
from opera.triage.ledger import Entry, Ledger
from opera.triage.root_causes import find_root_causes

__all__ = ["FixedUpstream", "KnownTonight", "match_night"]


@dataclass(frozen=True)
class FixedUpstream:
    """A ledger entry whose root cause failed last night and no longer fails after an upgrade."""

    target: str
    entry: Entry
    cause_id: str  # the root cause of the previous run
    apis: tuple[str, ...]
    passing: int  # its failing tests of last night that ran tonight: all pass
    previous_run_id: int
    version_changes: tuple[str, ...]


@dataclass
class KnownTonight:
    """One target's night against the ledger."""

    known: int = 0  # tonight's root causes the ledger knows
    new: int = 0  # ... and does not know
    fixed_upstream: list[FixedUpstream] = field(default_factory=list)
    unmatched: list[Entry] = field(default_factory=list)  # of the target, matching nothing tonight


def _target_version_changes(cmp: TargetComparison) -> list[str]:
    """The target's compiler/library version changes; a new Opera alone is not an upgrade of it."""
    return [v for v in cmp.version_changes if not v.startswith("opera ")]


def match_night(
    ledger: Ledger,
    cmp: TargetComparison,
    tonight: Sequence[TestResult],
    previous: Sequence[TestResult],
    instances: Mapping[str, OperatorInstance],
) -> KnownTonight:
    """Mark ``cmp``'s new failures known where the ledger knows their root cause (in place), and
    find the entries fixed upstream or matching nothing. ``instances``: id -> instance for the
    tests of both runs (an instance that is gone makes its failures one root cause per signature)."""
    target = cmp.target
    causes = find_root_causes([r for r in tonight if r.target == target], instances)
    found = ledger.classify(causes, [target])
    entry_of = {i: entry for cause, entry in found.known for i in cause.instances}
    cmp.changes = [
        replace(c, known=entry_of[c.instance_id])
        if c.kind is ChangeKind.NEW_FAILURE and c.instance_id in entry_of
        else c
        for c in cmp.changes
    ]
    out = KnownTonight(len(found.known), len(found.new))
    upgraded = _target_version_changes(cmp)
    flagged: set[int] = set()
    if cmp.previous_run_id is not None and upgraded:
        matched_tonight = {entry.index for _, entry in found.known}
        now = {r.instance_id: r for r in tonight if r.target == target}
        before = find_root_causes([r for r in previous if r.target == target], instances)
        for cause, entry in ledger.classify(before, [target]).known:
            if entry.index in matched_tonight or entry.index in flagged:
                continue
            reran = [now[i] for i in cause.instances if i in now]
            if reran and all(r.outcome is Outcome.PASS for r in reran):
                flagged.add(entry.index)
                out.fixed_upstream.append(
                    FixedUpstream(
                        target,
                        entry,
                        cause.id,
                        tuple(cause.apis),
                        len(reran),
                        cmp.previous_run_id,
                        tuple(upgraded),
                    )
                )
    out.unmatched = [e for e in found.unmatched if e.index not in flagged]
    return out
