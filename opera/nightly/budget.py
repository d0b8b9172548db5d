"""Splitting a nightly time budget across targets.

Targets run one after another, each as its own ``opera run`` with its own budget. Each target is
offered an equal share of what is left; a target that finishes its whole plan early hands the rest
on to the targets after it, so the order is smallest plan first (the cheap targets finish and
give their time to the big ones). The budget counts from the start of the nightly, prioritization
included: a CI job cares about wall time.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from opera.errors import OperaError

__all__ = ["MIN_SHARE_S", "BudgetClock", "check_budget", "run_order"]

# Below this a target's workers may not even finish importing its compiler: nothing would run.
MIN_SHARE_S = 10.0


def check_budget(budget_s: float, targets: Sequence[str], *, spent_s: float = 0.0) -> None:
    """Refuse a budget that leaves less than ``MIN_SHARE_S`` per target (one clear message)."""
    left = budget_s - spent_s
    need = MIN_SHARE_S * len(targets)
    if left < need:
        spent = f" ({spent_s:.0f} s of it went to prioritization)" if spent_s >= 1 else ""
        raise OperaError(
            f"budget {_fmt(budget_s)} is too small to run anything{spent}: {len(targets)} target(s) need "
            f"at least {_fmt(need + spent_s)} ({MIN_SHARE_S:.0f} s each); "
            f"use a larger --budget or fewer --target"
        )


def run_order(planned: Mapping[str, int]) -> list[str]:
    """Targets in the order they run: smallest plan first, then by name (deterministic)."""
    return sorted(planned, key=lambda t: (planned[t], t))


@dataclass
class BudgetClock:
    """Hands out each target's share of what is left of the budget when its turn comes."""

    budget_s: float
    started: float = field(default_factory=time.monotonic)

    def remaining(self) -> float:
        return max(0.0, self.budget_s - (time.monotonic() - self.started))

    def share(self, target: str, targets_left: int) -> float:
        """The budget of ``target`` when ``targets_left`` targets (itself included) have yet to run."""
        return max(MIN_SHARE_S, self.remaining() / max(1, targets_left))


def _fmt(seconds: float) -> str:
    seconds = round(seconds)
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return "".join(f"{v}{u}" for v, u in ((h, "h"), (m, "m"), (s, "s")) if v) or "0s"
