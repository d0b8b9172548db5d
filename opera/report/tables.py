"""pandas tables of a report: the APFD table (one row per target x strategy) and the outcomes."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import pandas as pd

from opera.report.apfd import RAUC_LEVELS
from opera.report.orders import RUN_ORDER, STRATEGY_ORDER

if TYPE_CHECKING:
    from opera.report.build import Report

__all__ = ["APFD_COLUMNS", "OK", "SKIPPED", "UNDEFINED", "apfd_frame", "outcome_frame"]

OK, UNDEFINED, SKIPPED = "ok", "undefined", "skipped"

APFD_COLUMNS = [
    "target",
    "strategy",
    "status",  # ok | undefined (no bug signature: APFD has no value) | skipped (see note)
    "tests",
    "bugs",
    "seeds",
    "apfd",
    "apfd_std",
    *(f"rauc_{round(level * 100)}" for level in RAUC_LEVELS),
    "prioritization_s",
    "time_to_all_bugs_s",
    "total_time_s",
    "note",
]


def _rank(strategy: str) -> tuple[int, str]:
    if strategy == RUN_ORDER:
        return (len(STRATEGY_ORDER) + 1, strategy)
    return (STRATEGY_ORDER.index(strategy) if strategy in STRATEGY_ORDER else len(STRATEGY_ORDER), strategy)


def _num(value: float | None) -> float:
    return math.nan if value is None else float(value)


def apfd_frame(report: Report) -> pd.DataFrame:
    rows: list[dict[str, Any]] = []
    for name, target in report.targets.items():
        first = len(rows)
        for e in target.evaluations:
            note = ""
            if e.strategy == RUN_ORDER:
                note = "the run's own order" + (
                    f" ({e.notes['order_strategy']} order file)" if "order_strategy" in e.notes else ""
                )
            elif "tests_without_coverage" in e.notes and e.notes["tests_without_coverage"]:
                note = f"{e.notes['tests_without_coverage']} test(s) without coverage data"
            rows.append(
                {
                    "target": name,
                    "strategy": e.strategy,
                    "status": OK if e.apfd is not None else UNDEFINED,
                    "tests": e.n_tests,
                    "bugs": e.n_bugs,
                    "seeds": len(e.seeds) if e.seeds else 0,
                    "apfd": _num(e.apfd),
                    "apfd_std": _num(e.apfd_std),
                    **{f"rauc_{round(level * 100)}": _num(e.rauc.get(level)) for level in RAUC_LEVELS},
                    "prioritization_s": e.prioritization_s,
                    "time_to_all_bugs_s": _num(e.time_to_all_bugs_s),
                    "total_time_s": e.total_time_s,
                    "note": note,
                }
            )
        for s in target.skipped:
            rows.append(
                {
                    "target": name,
                    "strategy": s.strategy,
                    "status": SKIPPED,
                    "tests": len(target.tests.ids),
                    "bugs": len(target.tests.signatures),
                    "seeds": 0,
                    **{c: math.nan for c in APFD_COLUMNS if c.startswith(("apfd", "rauc_"))},
                    "prioritization_s": math.nan,
                    "time_to_all_bugs_s": math.nan,
                    "total_time_s": math.nan,
                    "note": s.reason,
                }
            )
        rows[first:] = sorted(rows[first:], key=lambda row: _rank(row["strategy"]))
    return pd.DataFrame(rows, columns=APFD_COLUMNS)


def outcome_frame(report: Report) -> pd.DataFrame:
    """target -> counts per outcome, planned tests and unique bug signatures."""
    outcomes = sorted({o for t in report.targets.values() for o in t.tests.outcomes})
    rows = []
    for name, t in report.targets.items():
        rows.append(
            {
                "target": name,
                "planned": t.tests.planned,
                "ran": len(t.tests.ids),
                **{o: t.tests.outcomes.get(o, 0) for o in outcomes},
                "bug_signatures": len(t.tests.signatures),
            }
        )
    return pd.DataFrame(rows, columns=["target", "planned", "ran", *outcomes, "bug_signatures"])
