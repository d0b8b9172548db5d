"""Prioritization reports over finished runs (`opera report`; docs/design.md, Report).

For a run of the results store and each of its targets: the order every strategy gives to that
run's own instances, evaluated offline against the run's recorded outcomes (APFD, RAUC at
25/50/75/100%, bugs found over time with measured durations and the prioritization time counted in),
next to the run's actual order.

Modules: ``data`` (read and check the run), ``orders`` (run the strategies), ``evaluate`` (score an
order), ``build`` (put it together), ``tables`` (pandas), ``plots`` (matplotlib), ``render``
(Markdown / HTML / JSON), ``write`` (the output directory).

Python API::

    from opera.report import apfd_table, bug_curves
    df = apfd_table("opera.db", 3, equipped=["tvm_equipped_onnx.txt"])   # target x strategy rows
    curves = bug_curves("opera.db", 3)   # target -> strategy -> [(seconds, bugs found), ...]
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from opera.report.build import Report, TargetReport, build_report
from opera.report.evaluate import Curve

__all__ = ["Curve", "Report", "TargetReport", "apfd_table", "bug_curves", "build_report", "write_report"]


def apfd_table(store_path: str | Path, run_id: int | None = None, **options: Any) -> Any:
    """One row per target x strategy (``opera.report.tables.APFD_COLUMNS``) as a pandas DataFrame.

    ``options`` are those of ``build_report`` (targets, strategies, equipped, coverage, random_seeds,
    allow_partial, ...). APFD/RAUC are NaN with status ``undefined`` where the run revealed no bug,
    and ``skipped`` rows name why a strategy could not run.
    """
    return build_report(store_path, run_id, **options).table()


def bug_curves(
    store_path: str | Path, run_id: int | None = None, **options: Any
) -> dict[str, dict[str, Curve]]:
    """target -> strategy -> bugs-found-over-time step curve ``[(seconds, bugs found), ...]``
    (random: the mean over its seeds; ``run``: the run's own order)."""
    return build_report(store_path, run_id, **options).curves()


def write_report(report: Report, out_dir: str | Path) -> list[Path]:
    from opera.report.write import write_report as _write

    return _write(report, out_dir)
