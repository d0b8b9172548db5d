"""Prioritization metrics: APFD, RAUC-k and bugs-found-over-time curves (docs/design.md, Report).

All functions take plain sequences so the report layer can feed them from the results store:
an order (instance ids, first run first), a per-test bug signature (``None`` = the test revealed no
bug; several tests may share one signature = one unique bug) and optionally per-test durations.

Definitions (paper section IV-C, Formula 1; RAUC-k after Guvenir & Kurtcephe [45]):

* ``p_i``: 1-based rank of the first test in the order that reveals unique bug ``i``.
* ``APFD = 1 - sum(p_i) / (n * m) + 1 / (2n)``, ``n`` tests, ``m`` unique bugs. Undefined when
  ``m == 0`` (or ``n == 0``): ``ApfdUndefined`` is raised, never a number.
* ``RAUC-k``: area under the bugs-found-vs-tests-executed step curve over the first ``k`` percent of
  the order, divided by the area under the ideal curve over the same prefix, where the ideal order
  reveals one new bug with each of its first ``m`` tests (``ideal(i) = min(i, m)``). Both areas are
  sums over test positions ``1..ceil(k*n)``. 1.0 = ideal; undefined when ``m == 0``.
* Time curve: the cumulative wall time after each test, starting at the prioritization time (a
  strategy's own cost is counted in, as in the paper's Figure 8), and the number of unique bugs found
  by then.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass

from opera.errors import OperaError

__all__ = [
    "ApfdUndefined",
    "BugCurve",
    "apfd",
    "apfd_from_outcomes",
    "bugs_over_time",
    "first_bug_positions",
    "rauc",
    "rauc_levels",
]

RAUC_LEVELS = (0.25, 0.5, 0.75, 1.0)


class ApfdUndefined(OperaError):
    """APFD/RAUC asked for an order that reveals no bug (m = 0) or holds no test (n = 0)."""


def first_bug_positions(order: Sequence[str], bug_of: Mapping[str, Hashable | None]) -> dict[Hashable, int]:
    """Unique bug signature -> 1-based rank of the first test in ``order`` revealing it.

    Tests missing from ``bug_of`` (or mapped to ``None``) revealed no bug.
    """
    first: dict[Hashable, int] = {}
    for rank, test in enumerate(order, 1):
        sig = bug_of.get(test)
        if sig is not None and sig not in first:
            first[sig] = rank
    return first


def _check(positions: Sequence[int], n_tests: int) -> None:
    if n_tests <= 0:
        raise ApfdUndefined("APFD is undefined for an empty order (n = 0)")
    if not positions:
        raise ApfdUndefined("APFD is undefined when no test reveals a bug (m = 0)")
    bad = [p for p in positions if not 1 <= p <= n_tests]
    if bad:
        raise ValueError(f"bug positions must lie in 1..{n_tests}, got {bad[:5]}")


def apfd(positions: Sequence[int], n_tests: int) -> float:
    """APFD from the 1-based first-revealing ranks of each unique bug (paper Formula 1)."""
    _check(positions, n_tests)
    m = len(positions)
    return 1.0 - sum(positions) / (n_tests * m) + 1.0 / (2 * n_tests)


def apfd_from_outcomes(order: Sequence[str], bug_of: Mapping[str, Hashable | None]) -> float:
    """APFD of ``order`` given each test's bug signature (``None`` = no bug)."""
    return apfd(list(first_bug_positions(order, bug_of).values()), len(order))


def rauc(positions: Sequence[int], n_tests: int, level: float = 1.0) -> float:
    """RAUC-k: area under the bugs-found curve over the first ``level`` share of tests / ideal area."""
    _check(positions, n_tests)
    if not 0.0 < level <= 1.0:
        raise ValueError(f"RAUC level must be in (0, 1], got {level}")
    cutoff = max(1, math.ceil(level * n_tests))
    m = len(positions)
    # sum over i=1..cutoff of #{p <= i} = sum over bugs with p <= cutoff of (cutoff - p + 1).
    actual = sum(cutoff - p + 1 for p in positions if p <= cutoff)
    # ideal(i) = min(i, m): sum_{i=1..cutoff} min(i, m).
    ideal = cutoff * (cutoff + 1) // 2 if cutoff <= m else m * (m + 1) // 2 + (cutoff - m) * m
    return actual / ideal


def rauc_levels(
    positions: Sequence[int], n_tests: int, levels: Sequence[float] = RAUC_LEVELS
) -> dict[float, float]:
    return {level: rauc(positions, n_tests, level) for level in levels}


@dataclass(frozen=True)
class BugCurve:
    """Bugs found over cumulative time: ``times[j]`` seconds after the start, ``bugs[j]`` found."""

    times: tuple[float, ...]
    bugs: tuple[int, ...]
    total_time: float

    def bugs_at(self, seconds: float) -> int:
        """Unique bugs found within a time budget."""
        found = 0
        for t, b in zip(self.times, self.bugs, strict=True):
            if t > seconds:
                break
            found = b
        return found

    def time_to_all(self) -> float | None:
        """Time until the last unique bug was found; None when none was."""
        return self.times[-1] if self.times else None


def bugs_over_time(
    order: Sequence[str],
    bug_of: Mapping[str, Hashable | None],
    duration_of: Mapping[str, float],
    prioritization_seconds: float = 0.0,
) -> BugCurve:
    """The step curve of unique bugs found vs. elapsed time, one point per newly found bug.

    A bug counts as found when its first revealing test ends. A test without a duration counts 0 s.
    """
    seen: set[Hashable] = set()
    elapsed = float(prioritization_seconds)
    times: list[float] = []
    bugs: list[int] = []
    for test in order:
        elapsed += float(duration_of.get(test, 0.0))
        sig = bug_of.get(test)
        if sig is not None and sig not in seen:
            seen.add(sig)
            times.append(elapsed)
            bugs.append(len(seen))
    return BugCurve(times=tuple(times), bugs=tuple(bugs), total_time=elapsed)
