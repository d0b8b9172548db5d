"""Evaluate an order offline against a run's recorded outcomes (opera.report.apfd does the arithmetic).

For one order of a target's tests: APFD over the target's unique bug signatures, RAUC at 25/50/75/100%
and the bugs-found-over-time curve from the measured test durations, the strategy's own
prioritization time counted in at the start. ``random`` is evaluated per seed and averaged: APFD and
RAUC as means (with the standard deviation), the curve as the mean number of bugs found by each time.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from opera.report.apfd import RAUC_LEVELS, apfd, bugs_over_time, first_bug_positions, rauc_levels
from opera.report.data import TargetTests
from opera.report.orders import StrategyOrder

__all__ = ["Curve", "Evaluation", "average", "evaluate"]

Curve = list[tuple[float, float]]  # (seconds since start, unique bugs found), a right-continuous step curve


@dataclass
class Evaluation:
    strategy: str
    n_tests: int
    n_bugs: int
    apfd: float | None  # None: undefined (no bug signature among the tests)
    rauc: dict[float, float | None]
    prioritization_s: float
    total_time_s: float  # prioritization + every test's measured duration
    time_to_all_bugs_s: float | None
    curve: Curve
    seeds: list[int] = field(default_factory=list)
    apfd_std: float | None = None
    apfd_per_seed: list[float] = field(default_factory=list)
    notes: dict[str, Any] = field(default_factory=dict)


def evaluate(order: StrategyOrder, tests: TargetTests) -> Evaluation:
    if sorted(order.ids) != sorted(tests.ids):
        raise RuntimeError(f"order of {order.strategy} is not a permutation of the {tests.target} tests")
    n = len(order.ids)
    positions = list(first_bug_positions(order.ids, tests.bug_of).values())
    m = len(positions)
    curve_data = bugs_over_time(order.ids, tests.bug_of, tests.duration_of, order.seconds)
    curve: Curve = [(order.seconds, 0)]
    curve.extend(zip(curve_data.times, curve_data.bugs, strict=True))
    curve.append((curve_data.total_time, m))
    defined = n > 0 and m > 0
    return Evaluation(
        strategy=order.strategy,
        n_tests=n,
        n_bugs=m,
        apfd=apfd(positions, n) if defined else None,
        rauc=dict(rauc_levels(positions, n)) if defined else dict.fromkeys(RAUC_LEVELS),
        prioritization_s=order.seconds,
        total_time_s=curve_data.total_time,
        time_to_all_bugs_s=curve_data.time_to_all(),
        curve=curve,
        seeds=[order.seed] if order.seed is not None else [],
        apfd_per_seed=[],
        notes=dict(order.notes),
    )


def average(evaluations: Sequence[Evaluation]) -> Evaluation:
    """Mean of one strategy's evaluations over seeds (APFD, RAUC, times, the curve)."""
    if len(evaluations) == 1:
        return evaluations[0]
    first = evaluations[0]
    apfds = [e.apfd for e in evaluations]
    defined = all(a is not None for a in apfds)
    values = [a for a in apfds if a is not None]
    rauc: dict[float, float | None] = {}
    for level in first.rauc:
        levels = [e.rauc[level] for e in evaluations]
        rauc[level] = statistics.fmean(v for v in levels if v is not None) if defined else None
    times = [e.time_to_all_bugs_s for e in evaluations]
    return Evaluation(
        strategy=first.strategy,
        n_tests=first.n_tests,
        n_bugs=first.n_bugs,
        apfd=statistics.fmean(values) if defined else None,
        rauc=rauc,
        prioritization_s=statistics.fmean(e.prioritization_s for e in evaluations),
        total_time_s=statistics.fmean(e.total_time_s for e in evaluations),
        time_to_all_bugs_s=statistics.fmean(t for t in times if t is not None)
        if all(t is not None for t in times)
        else None,
        curve=mean_curve([e.curve for e in evaluations]),
        seeds=[s for e in evaluations for s in e.seeds],
        apfd_std=statistics.stdev(values) if defined else None,
        apfd_per_seed=values,
        notes={},
    )


def _value_at(curve: Curve, t: float) -> float:
    found = 0.0
    for when, bugs in curve:
        if when > t:
            break
        found = bugs
    return found


def mean_curve(curves: Sequence[Curve]) -> Curve:
    """Pointwise mean of step curves, one point at every time any of them steps."""
    times = sorted({t for curve in curves for t, _ in curve})
    return [(t, statistics.fmean(_value_at(c, t) for c in curves)) for t in times]
