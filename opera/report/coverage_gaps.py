"""Coverage gaps: what a frontend does not implement, told apart from its bugs (issue 11, class 9).

An ``unsupported`` result is a gap, not a bug. Users still want the list: which operators a
frontend lacks entirely, and for the operators it has, which feature (dtype, attribute, opset) it
lacks. The feature is found by contrast with the same target's other results for the operator:

* ``operator``: no test of the operator on this target got past the frontend's refusal;
* ``dtype:<name>``: the gap instance has a tensor dtype that no accepted instance of the operator has;
* ``attribute:<name>``: it sets an argument that no accepted instance sets, or
  ``attribute:<name>=<value>`` a value of it that none uses (ONNX Cast's ``to``);
* ``opset:<n>``: (ONNX) its opset differs from every accepted instance's;
* otherwise ``other``, with the frontend's own words as the evidence.

Each row keeps an example instance and the message as evidence.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from opera.model import OperatorInstance
from opera.outcomes import Outcome, TestResult
from opera.values import TensorSpec
from opera.verdict.signature import normalize_message

__all__ = ["CoverageGap", "coverage_gaps", "gap_table_lines"]

# results that show the frontend accepted the operator (it produced outputs or failed after loading)
_ACCEPTED = frozenset(
    {
        Outcome.PASS,
        Outcome.INCONSISTENT,
        Outcome.UNDEFINED,
        Outcome.NONDETERMINISTIC,
        Outcome.UNSTABLE_REFERENCE,
    }
)


@dataclass
class CoverageGap:
    target: str
    api: str
    feature: str  # operator | dtype:<x> | attribute:<x> | opset:<n> | other
    example_instance: str
    evidence: str  # the frontend's words: the line of its message that says what is missing
    instances: list[str] = field(default_factory=list)

    @property
    def tests(self) -> int:
        return len(self.instances)

    def to_json(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "api": self.api,
            "feature": self.feature,
            "tests": self.tests,
            "example_instance": self.example_instance,
            "evidence": self.evidence,
        }


def _tensor_dtypes(inst: OperatorInstance) -> set[str]:
    found: set[str] = set()

    def walk(value: Any) -> None:
        if isinstance(value, np.ndarray):
            found.add(value.dtype.name)
        elif isinstance(value, TensorSpec):
            found.add(str(value.dtype))
        elif isinstance(value, (list, tuple)):
            for v in value:
                walk(v)
        elif isinstance(value, dict):
            for v in value.values():
                walk(v)

    walk(list(inst.args))
    walk(list(inst.inputs))
    walk(dict(inst.kwargs))
    return found


def _plain(value: Any) -> str | None:
    """A short text of a scalar/enum argument value; None for tensors and long values."""
    if isinstance(value, (np.ndarray, TensorSpec)):
        return None
    text = repr(value.item() if isinstance(value, np.generic) else value)
    return text if len(text) <= 40 else None


def _opset(inst: OperatorInstance) -> str | None:
    value = inst.extra.get("opset")
    return None if value is None else str(value)


def _feature(gap: OperatorInstance | None, accepted: list[OperatorInstance], any_accepted: bool) -> str:
    if not any_accepted:
        return "operator"
    if gap is None or not accepted:
        return "other"
    seen_dtypes = set().union(*(_tensor_dtypes(a) for a in accepted))
    new_dtypes = sorted(_tensor_dtypes(gap) - seen_dtypes)
    if new_dtypes:
        return "dtype:" + ",".join(new_dtypes)
    seen_args = set().union(*(set(a.kwargs) for a in accepted))
    new_args = sorted(set(gap.kwargs) - seen_args)
    if new_args:
        return "attribute:" + ",".join(new_args)
    for key in sorted(gap.kwargs):  # a value of an argument no accepted instance used (Cast's `to`)
        value = _plain(gap.kwargs[key])
        if value is not None and value not in {_plain(a.kwargs.get(key)) for a in accepted}:
            return f"attribute:{key}={value}"
    opset = _opset(gap)
    if opset is not None and opset not in {_opset(a) for a in accepted}:
        return f"opset:{opset}"
    return "other"


def coverage_gaps(
    results: Iterable[TestResult], instances: Mapping[str, OperatorInstance] | None = None
) -> list[CoverageGap]:
    """One row per (target, operator, feature) over the ``unsupported`` results, most tests first.

    ``instances`` (id -> instance, e.g. the run's corpus) lets dtypes and attributes be named;
    without it a gap is ``operator`` or ``other``.
    """
    results = list(results)
    instances = instances or {}
    accepted: dict[tuple[str, str], list[OperatorInstance]] = {}
    any_accepted: set[tuple[str, str]] = set()
    for r in results:
        if r.outcome in _ACCEPTED or (r.outcome is Outcome.CRASH and r.stage.value in ("compile", "run")):
            any_accepted.add((r.target, r.api))
            inst = instances.get(r.instance_id)
            if inst is not None:
                accepted.setdefault((r.target, r.api), []).append(inst)
    rows: dict[tuple[str, str, str], CoverageGap] = {}
    for r in results:
        if r.outcome is not Outcome.UNSUPPORTED:
            continue
        key = (r.target, r.api)
        feature = _feature(instances.get(r.instance_id), accepted.get(key, []), key in any_accepted)
        row = rows.get((r.target, r.api, feature))
        if row is None:
            evidence = normalize_message(_missing_line(r.message), limit=200)
            rows[(r.target, r.api, feature)] = CoverageGap(r.target, r.api, feature, r.instance_id, evidence, [r.instance_id])
        else:
            row.instances.append(r.instance_id)
    return sorted(rows.values(), key=lambda g: (g.target, -g.tests, g.api, g.feature))


def _missing_line(message: str) -> str:
    """The line of a frontend message that says what is missing (the last non-empty one that names
    it, e.g. "-- No conversion rule found for operations: Optional-28")."""
    lines = [line.strip() for line in message.strip().splitlines() if line.strip()]
    for line in reversed(lines):
        lower = line.lower()
        if "not supported" in lower or "no conversion rule" in lower or "unsupported" in lower or "not implemented" in lower:
            return line
    return lines[0] if lines else ""


def gap_table_lines(gaps: list[CoverageGap]) -> list[str]:
    """The per-target table (operator x feature) as text lines, for `opera bugs` and logs."""
    if not gaps:
        return ["coverage gaps: none"]
    lines = [f"coverage gaps ({len(gaps)} operator x feature rows; not bugs: the frontend does not implement these)"]
    width_api = max(len(g.api) for g in gaps)
    width_feature = max(len(g.feature) for g in gaps)
    target = None
    for g in gaps:
        if g.target != target:
            target = g.target
            lines.append(f"  {target}:")
        lines.append(f"    {g.api:<{width_api}}  {g.feature:<{width_feature}}  {g.tests:>4}  {g.evidence}")
    return lines
