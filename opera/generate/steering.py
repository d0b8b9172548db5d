"""Steering generation toward operator-level coverage the corpus lacks (``opera generate --steer coverage``).

The coverage is paper 004's operator-level coverage, measured by ``opera.report.op_coverage``: per
operator, the input degrees, output degrees and shape-and-parameter (SPC) vectors covered. The
steering keeps those sets, starting from what the input corpus covers, and adds every valid mutant
to them. Three things change in the generator when it is on:

* a mutant whose SPC vector is already covered, or was already sent through the gate, is not sent
  (it cannot add an input degree or a vector, and the same vector gives the same outputs): it costs
  no attempt, and counts as a miss of its own (``SKIPS_PER_VALID`` per wanted mutant);
* only a valid mutant that adds a coverage element is written and counts toward ``--per-api``
  (after the skip above every valid mutant does: its vector is new), so the same budget of gate
  calls buys more coverage;
* the choice of mutation multiplies the validity learner's weight by the squared share of the
  choice's mutants that added coverage (of those skipped or valid: the learner already counts
  rejections). Like the learner, this bandit is per (operator, parameter, kind), with the
  (operator, kind) share as its prior, so kinds that keep adding coverage for an operator are
  picked more for it. A re-draw of tensor values keeps the vector (the criterion does not see
  values): under steering such mutants are skipped, and the bandit soon stops picking them.

Everything is per operator and draws from the caller's seeded ``Random``: the same seed gives the
same corpus. The element counts are of distinct set elements; the report caps SPC at ``N_MAXSPC``
vectors per operator, which steering does not model (no ONNX operator of the corpus is near it).
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Hashable, Iterable, Sequence
from typing import TypeVar

from opera.generate.feedback import FLOOR, ValidityLearner
from opera.generate.mutations import Choice
from opera.model import OperatorInstance
from opera.report.op_coverage import CoverageSets, coverage_sets

__all__ = ["SKIPS_PER_VALID", "STEER_MODES", "CoverageTracker", "CoverageBandit"]

T = TypeVar("T")

STEER_MODES = ("coverage",)
SKIPS_PER_VALID = 20  # mutants not gated (nothing new possible) allowed per wanted valid mutant


def _own_sets(inst: OperatorInstance) -> CoverageSets:
    """The coverage sets of one instance, keyed as the report keys them."""
    one = CoverageSets()
    one.add(inst)
    return one


class CoverageTracker:
    """The operator-level coverage sets reached so far: the input corpus's, plus every valid mutant."""

    def __init__(self, instances: Iterable[OperatorInstance]) -> None:
        self.covered = coverage_sets(instances)
        self._gated: dict[str, set[Hashable]] = {}  # vectors sent through the gate, valid or not

    def promising(self, inst: OperatorInstance) -> bool:
        """Whether ``inst`` can add an element: its vector is neither covered nor already gated."""
        op = inst.api
        (vector,) = _own_sets(inst).vectors[op]
        return vector not in self.covered.vectors.get(op, set()) and vector not in self._gated.get(op, set())

    def gated(self, inst: OperatorInstance) -> None:
        op = inst.api
        self._gated.setdefault(op, set()).update(_own_sets(inst).vectors[op])

    def add(self, inst: OperatorInstance) -> int:
        """Add a valid instance; the number of elements (input degree, output degree, vector) it added."""
        one, cov = _own_sets(inst), self.covered
        return (
            _merge(cov.input_degrees, one.input_degrees, inst.api)
            + _merge(cov.output_degrees, one.output_degrees, inst.api)
            + _merge(cov.vectors, one.vectors, inst.api)
        )


def _merge(have: dict[str, set[T]], new: dict[str, set[T]], op: str) -> int:
    """Add ``new[op]`` to ``have[op]``; how many were not there."""
    known = have.setdefault(op, set())
    added = len(new[op] - known)
    known.update(new[op])
    return added


class CoverageBandit:
    """Per operator, how often each choice added coverage; weighs the validity learner's choice."""

    def __init__(self) -> None:
        self.tried: Counter[tuple[str, str, str]] = Counter()  # (api, parameter, kind): mutants built
        self.gained: Counter[tuple[str, str, str]] = Counter()  # ... that added coverage
        self.kind_tried: Counter[tuple[str, str]] = Counter()
        self.kind_gained: Counter[tuple[str, str]] = Counter()

    def record(self, api: str, choice: Choice, gained: bool) -> None:
        self.tried[(api, choice.parameter, choice.kind)] += 1
        self.kind_tried[(api, choice.kind)] += 1
        if gained:
            self.gained[(api, choice.parameter, choice.kind)] += 1
            self.kind_gained[(api, choice.kind)] += 1

    def gain_rate(self, api: str, choice: Choice) -> float:
        """Estimated share of this choice's skipped or valid mutants that add coverage (the learner's
        estimator, with the kind's share over the operator's other parameters as the prior)."""
        kind = (api, choice.kind)
        prior = (self.kind_gained[kind] + 1) / (self.kind_tried[kind] + 2)
        key = (api, choice.parameter, choice.kind)
        return (self.gained[key] + 2 * prior) / (self.tried[key] + 2)

    def choose(
        self, rng: random.Random, choices: Sequence[Choice], learner: ValidityLearner, library: str, api: str
    ) -> Choice:
        weights = [max(FLOOR, learner.weight(library, api, c) * self.gain_rate(api, c) ** 2) for c in choices]
        return rng.choices(list(choices), weights=weights, k=1)[0]
