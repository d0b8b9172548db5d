"""Per-operator heat map of a nightly's outcomes (matplotlib object API on the Agg canvas).

Rows are ``target · operator``, columns the outcomes, a cell the share of that operator's tests
with that outcome (annotated with the count). Each target shows its operators with the most
failures first (then the most tests), ``per_target`` of them, so the map stays readable on a
corpus of hundreds of operators.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from opera.outcomes import FAILURE_OUTCOMES, Outcome

__all__ = ["operator_outcomes", "plot_outcome_heatmap"]


def operator_outcomes(
    results: Mapping[str, Sequence[tuple[str, Outcome]]], per_target: int = 15
) -> list[tuple[str, str, Counter[Outcome]]]:
    """(target, api, outcome counts) rows from ``{target: [(api, outcome), ...]}``."""
    rows = []
    for target, pairs in results.items():
        by_api: dict[str, Counter[Outcome]] = {}
        for api, outcome in pairs:
            by_api.setdefault(api, Counter())[outcome] += 1

        def rank(api: str, counts: dict[str, Counter[Outcome]] = by_api) -> tuple[int, int, str]:
            c = counts[api]
            return (-sum(c[o] for o in FAILURE_OUTCOMES), -sum(c.values()), api)

        rows += [(target, api, by_api[api]) for api in sorted(by_api, key=rank)[:per_target]]
    return rows


def plot_outcome_heatmap(
    results: Mapping[str, Sequence[tuple[str, Outcome]]], path: str | Path, per_target: int = 15
) -> Path:
    rows = operator_outcomes(results, per_target)
    outcomes = list(Outcome)
    height = 1.2 + 0.28 * max(1, len(rows))
    fig = Figure(figsize=(8.5, height), dpi=100)
    FigureCanvasAgg(fig)
    ax = fig.subplots()
    if rows:
        shares = [[c[o] / max(1, sum(c.values())) for o in outcomes] for _, _, c in rows]
        image = ax.imshow(shares, aspect="auto", cmap="YlOrRd", vmin=0.0, vmax=1.0)
        for i, (_, _, counts) in enumerate(rows):
            for j, outcome in enumerate(outcomes):
                if counts[outcome]:
                    color = "white" if shares[i][j] > 0.6 else "black"
                    ax.text(j, i, str(counts[outcome]), ha="center", va="center", fontsize=7, color=color)
        ax.set_yticks(range(len(rows)), [f"{t} · {api}" for t, api, _ in rows], fontsize=7)
        fig.colorbar(image, ax=ax, fraction=0.03, pad=0.02, label="share of the operator's tests")
    else:
        ax.set_yticks([])
        ax.text(0.5, 0.5, "no results", ha="center", va="center", transform=ax.transAxes)
    ax.set_xticks(range(len(outcomes)), [o.value for o in outcomes], rotation=30, ha="right", fontsize=8)
    ax.set_title("Outcomes per operator", fontsize=10)
    fig.tight_layout()
    out = Path(path)
    fig.savefig(out)
    return out
