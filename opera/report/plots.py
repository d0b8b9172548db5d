"""Bugs-found-over-time plots (matplotlib's object API on the Agg canvas: no display, no pyplot
global state, so importing this module does not change the backend of a notebook that imports it).

``plot_bugs_over_time(curves, path, title=...)`` draws one step curve per strategy, x = seconds
since the start (the strategy's own prioritization time, then each test's measured duration),
y = unique bugs found, and writes ``path`` in the format its suffix names (.png, .svg, .pdf).
``opera report`` and ``opera nightly`` both use it.
"""

from __future__ import annotations

import io
import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

__all__ = ["figure_bugs_over_time", "plot_bugs_over_time", "svg_bugs_over_time"]

# Fixed colours/styles so a strategy looks the same in every plot.
_STYLE: dict[str, tuple[str, str]] = {
    "opera": ("#d62728", "-"),
    "op-only": ("#ff7f0e", "--"),
    "param-only": ("#bcbd22", "--"),
    "random": ("#7f7f7f", "-"),
    "fast": ("#1f77b4", "-"),
    "total-cov": ("#2ca02c", "-."),
    "add-cov": ("#17becf", "-."),
    "run": ("#000000", ":"),
}


def figure_bugs_over_time(
    curves: Mapping[str, Sequence[tuple[float, float]]], title: str = "Bugs found over time"
) -> Figure:
    fig = Figure(figsize=(7.0, 4.2), dpi=110)
    FigureCanvasAgg(fig)
    ax = fig.subplots()
    for k, (name, curve) in enumerate(curves.items()):
        if not curve:
            continue
        xs = [float(t) for t, _ in curve]
        ys = [float(b) for _, b in curve]
        color, style = _STYLE.get(name.split(" ")[0], (f"C{k % 10}", "-"))
        ax.step(xs, ys, where="post", label=name, color=color, linestyle=style, linewidth=1.6)
    ax.set_xlabel("time (s): prioritization + measured test durations")
    ax.set_ylabel("unique bugs found")
    ax.set_title(title)
    ax.set_ylim(bottom=0)
    ax.set_xlim(left=0)
    ax.grid(True, alpha=0.3)
    if curves:
        ax.legend(loc="lower right", fontsize="small")
    fig.tight_layout()
    return fig


def plot_bugs_over_time(
    curves: Mapping[str, Sequence[tuple[float, float]]],
    path: str | os.PathLike[str],
    title: str = "Bugs found over time",
) -> Path:
    """Write the step curves ``{strategy: [(seconds, bugs found), ...]}`` to ``path``."""
    out = Path(path)
    fig = figure_bugs_over_time(curves, title)
    fig.savefig(out, metadata={"Date": None} if out.suffix == ".svg" else None)
    return out


def svg_bugs_over_time(
    curves: Mapping[str, Sequence[tuple[float, float]]], title: str = "Bugs found over time"
) -> str:
    """The same plot as an inline ``<svg>`` element (for the HTML report)."""
    fig = figure_bugs_over_time(curves, title)
    buf = io.StringIO()
    fig.savefig(buf, format="svg", metadata={"Date": None})
    text = buf.getvalue()
    return text[text.index("<svg") :]
