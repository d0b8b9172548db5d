"""Ablation Opera_op: operator score only (paper section V-B); ties in corpus order."""

from __future__ import annotations

from collections.abc import Iterable

from opera.model import OperatorInstance
from opera.prioritize._greedy import diversity_order
from opera.prioritize.strategies import PrioritizeContext, Strategy, register_strategy


@register_strategy
class OpOnlyStrategy(Strategy):
    name = "op-only"
    description = "operator score Num_DLL/Num_DLC only"

    def order(self, instances: Iterable[OperatorInstance], ctx: PrioritizeContext) -> list[str]:
        return diversity_order(
            instances,
            ctx.equipped,
            use_op_score=True,
            use_diversity=False,
            precover_equipped=False,
            zero_case=ctx.zero_case,
            notes=ctx.notes,
        )
