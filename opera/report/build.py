"""Assemble a report: load the run, order its instances with every strategy, evaluate the orders."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from opera.errors import OperaError
from opera.report.data import BUG_KEYS, RunData, TargetTests, key_bugs_by_root_cause, load_run
from opera.report.evaluate import Curve, Evaluation, average, evaluate
from opera.report.orders import (
    RANDOM,
    OrderSettings,
    Skipped,
    load_run_instances,
    run_order,
    strategy_orders,
)

__all__ = ["Report", "TargetReport", "build_report"]


@dataclass
class TargetReport:
    tests: TargetTests
    evaluations: list[Evaluation]  # strategies in table order, then the run's own order
    skipped: list[Skipped]

    @property
    def target(self) -> str:
        return self.tests.target

    @property
    def apfd_defined(self) -> bool:
        return len(self.tests.ids) > 0 and bool(self.tests.signatures)


@dataclass
class Report:
    data: RunData
    targets: dict[str, TargetReport]
    settings: OrderSettings
    seconds: float  # wall time of building the report
    notes: list[str] = field(default_factory=list)

    @property
    def run_id(self) -> int:
        return self.data.run.id

    @property
    def has_bugs(self) -> bool:
        return any(t.apfd_defined for t in self.targets.values())

    def table(self) -> Any:
        from opera.report.tables import apfd_frame

        return apfd_frame(self)

    def curves(self) -> dict[str, dict[str, Curve]]:
        """target -> strategy -> bugs-found-over-time curve (random: the mean over seeds)."""
        return {name: {e.strategy: list(e.curve) for e in t.evaluations} for name, t in self.targets.items()}


def build_report(
    store_path: str | Path,
    run_id: int | None = None,
    *,
    targets: Sequence[str] | None = None,
    strategies: Sequence[str] | None = None,
    equipped: Sequence[str] = (),
    coverage: Mapping[str, str] | None = None,
    random_seeds: int = 5,
    seed: int = 0,
    precover_equipped: bool = True,
    zero_case: str = "untested-first",
    allow_partial: bool = False,
    progress: bool = False,
    bugs: str = "signatures",
    history: str | Sequence[str] | None = None,
) -> Report:
    """Evaluate every strategy on one finished run of the store (default: its last run); ``bugs``:
    what one bug is, a unique signature or a root cause (``BUG_KEYS``)."""
    start = time.perf_counter()
    settings = OrderSettings(
        strategies=strategies,
        equipped=list(equipped),
        coverage=dict(coverage or {}),
        random_seeds=random_seeds,
        seed=seed,
        precover_equipped=precover_equipped,
        zero_case=zero_case,
        history=history,
    )
    data = load_run(store_path, run_id, targets=targets, allow_partial=allow_partial)
    instances = load_run_instances(data, progress=progress)
    if bugs == "root-causes":
        key_bugs_by_root_cause(data, instances)
    elif bugs != "signatures":
        raise OperaError(f"bugs = {bugs!r}: one of {', '.join(BUG_KEYS)}")
    orders = strategy_orders(data, instances, settings, progress=progress)
    reports: dict[str, TargetReport] = {}
    for name, tests in data.targets.items():
        target_orders, skipped = orders[name]
        grouped: dict[str, list[Evaluation]] = {}
        for order in target_orders:
            grouped.setdefault(order.strategy, []).append(evaluate(order, tests))
        evaluations = [average(group) for group in grouped.values()]
        evaluations.append(evaluate(run_order(data, name), tests))
        reports[name] = TargetReport(tests, evaluations, skipped)
    notes = list(data.notes)
    for name, t in reports.items():
        if not t.tests.ids:
            notes.append(f"{name}: no test of the run has a result on this target")
        elif not t.apfd_defined:
            notes.append(
                f"{name}: no test revealed a bug signature, so APFD and RAUC are undefined (no number is given)"
            )
    if RANDOM in {e.strategy for t in reports.values() for e in t.evaluations}:
        notes.append(
            f"random: the mean over {random_seeds} seeds (0..{random_seeds - 1}); ± is the standard deviation"
        )
    return Report(data, reports, settings, time.perf_counter() - start, notes)
