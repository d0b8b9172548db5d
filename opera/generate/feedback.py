"""The validity-feedback learner: prefer mutations the library keeps accepting.

For every (operator, parameter, mutation kind) the learner counts how many mutants the validity
gate accepted and rejected. A choice's weight is its estimated acceptance rate, squared so that
reliable mutations clearly win: ``p = (accepted + 2 * prior) / (tried + 2)`` where ``prior`` is the
acceptance rate of the same kind over all parameters of the same operator (``(accepted + 1) /
(tried + 2)``), so a kind that failed on one parameter (``int:large`` on a size) starts lower on
the operator's other parameters. A floor keeps every choice possible: a mutation rejected ten times
may still be tried, rarely.

Why the prior stops at the operator and is not library-wide: some verdicts differ between two runs
(onnxruntime's NonMaxSuppression gives run-to-run different outputs, and sometimes dies, on
mutants with zero-size scalar inputs; a mutant near the memory limit), and a library-wide prior carries such a flip
into every later operator's choices, so one flip changed hundreds of generated instances. With
per-operator learning a flip stays inside its operator; generation is deterministic for a seed
everywhere the library itself is. The learner holds no randomness of its own: ``choose`` draws from
the caller's seeded ``Random``.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from opera.generate.mutations import Choice

__all__ = ["ValidityLearner"]

FLOOR = 0.02


@dataclass
class ValidityLearner:
    tried: Counter[tuple[str, str, str]] = field(default_factory=Counter)  # (api, parameter, kind)
    accepted: Counter[tuple[str, str, str]] = field(default_factory=Counter)
    kind_tried: Counter[tuple[str, str]] = field(default_factory=Counter)  # (api, kind)
    kind_accepted: Counter[tuple[str, str]] = field(default_factory=Counter)

    def record(self, library: str, api: str, choice: Choice, valid: bool) -> None:
        key = (api, choice.parameter, choice.kind)
        self.tried[key] += 1
        self.kind_tried[(api, choice.kind)] += 1
        if valid:
            self.accepted[key] += 1
            self.kind_accepted[(api, choice.kind)] += 1

    def acceptance(self, library: str, api: str, choice: Choice) -> float:
        """Estimated share of mutants of this choice that the library accepts."""
        kind = (api, choice.kind)
        prior = (self.kind_accepted[kind] + 1) / (self.kind_tried[kind] + 2)
        key = (api, choice.parameter, choice.kind)
        return (self.accepted[key] + 2 * prior) / (self.tried[key] + 2)

    def weight(self, library: str, api: str, choice: Choice) -> float:
        return max(FLOOR, self.acceptance(library, api, choice) ** 2)

    def choose(self, rng: random.Random, choices: Sequence[Choice], library: str, api: str) -> Choice:
        weights = [self.weight(library, api, c) for c in choices]
        return rng.choices(list(choices), weights=weights, k=1)[0]
