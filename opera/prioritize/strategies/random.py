"""Baseline: a seeded random permutation (Opera_random in the paper)."""

from __future__ import annotations

import random as _random
from collections.abc import Iterable

from opera.model import OperatorInstance
from opera.prioritize.strategies import PrioritizeContext, Strategy, register_strategy


@register_strategy
class RandomStrategy(Strategy):
    name = "random"
    description = "seeded random permutation"
    uses_seed = True

    def order(self, instances: Iterable[OperatorInstance], ctx: PrioritizeContext) -> list[str]:
        ids = list(dict.fromkeys(inst.id for inst in instances))
        _random.Random(ctx.seed).shuffle(ids)
        return ids
