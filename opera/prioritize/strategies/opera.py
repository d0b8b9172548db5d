"""Opera's strategy: operator score x parameter diversity, greedy (paper section III-B)."""

from __future__ import annotations

from collections.abc import Iterable

from opera.model import OperatorInstance
from opera.prioritize._greedy import diversity_order
from opera.prioritize.strategies import PrioritizeContext, Strategy, register_strategy


@register_strategy
class OperaStrategy(Strategy):
    name = "opera"
    description = (
        "operator score (Num_DLL/Num_DLC, or with a history the operator's bug rate on the target in "
        "earlier runs) x parameter-partition diversity, greedy"
    )

    def order(self, instances: Iterable[OperatorInstance], ctx: PrioritizeContext) -> list[str]:
        return diversity_order(
            instances,
            ctx.equipped,
            use_op_score=True,
            use_diversity=True,
            precover_equipped=ctx.precover_equipped,
            zero_case=ctx.zero_case,
            notes=ctx.notes,
            history=ctx.history,
        )
