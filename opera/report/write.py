"""Write a report's files into a directory: report.md, report.html, apfd.csv, outcomes.csv,
report.json and bugs_over_time_<target>.png/.svg."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import TYPE_CHECKING

from opera.errors import OperaError
from opera.report.plots import plot_bugs_over_time, svg_bugs_over_time
from opera.report.render import render_html, render_json, render_markdown
from opera.report.tables import apfd_frame, outcome_frame

if TYPE_CHECKING:
    from opera.report.build import Report

__all__ = ["plot_name", "write_report"]


def plot_name(target: str, suffix: str) -> str:
    return "bugs_over_time_" + re.sub(r"[^A-Za-z0-9_.-]", "_", target) + suffix


def _label(strategy: str, seeds: int) -> str:
    if strategy == "random" and seeds > 1:
        return f"random (mean of {seeds} seeds)"
    if strategy == "run":
        return "run (as executed)"
    return strategy


def _title(report: Report, target: str) -> str:
    t = report.targets[target]
    return f"{target}, run {report.run_id}: {len(t.tests.signatures)} unique bugs in {len(t.tests.ids)} tests"


def write_report(report: Report, out_dir: str | os.PathLike[str]) -> list[Path]:
    """Write every output file; returns their paths."""
    out = Path(out_dir)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OperaError(f"cannot create the output directory {out}: {exc}") from None
    written: list[Path] = []
    plots: dict[str, list[str]] = {}
    svgs: dict[str, str] = {}
    curves = report.curves()
    seeds = report.settings.random_seeds
    for target in report.targets:
        title = _title(report, target)
        labelled = {_label(name, seeds): curve for name, curve in curves[target].items()}
        names = [plot_name(target, ".png"), plot_name(target, ".svg")]
        for name in names:
            written.append(plot_bugs_over_time(labelled, out / name, title=title))
        plots[target] = names
        svgs[target] = svg_bugs_over_time(labelled, title=title)
    files = {
        "report.md": render_markdown(report, plots),
        "report.html": render_html(report, svgs),
        "report.json": render_json(report),
    }
    for name, text in files.items():
        (out / name).write_text(text, encoding="utf-8")
        written.append(out / name)
    apfd_frame(report).to_csv(out / "apfd.csv", index=False, float_format="%.6g")
    outcome_frame(report).to_csv(out / "outcomes.csv", index=False)
    written += [out / "apfd.csv", out / "outcomes.csv"]
    return written
