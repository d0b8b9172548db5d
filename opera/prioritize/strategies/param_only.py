"""Ablation Opera_para: parameter diversity only, every operator scored alike (paper section V-B)."""

from __future__ import annotations

from collections.abc import Iterable

from opera.model import OperatorInstance
from opera.prioritize._greedy import diversity_order
from opera.prioritize.strategies import PrioritizeContext, Strategy, register_strategy


@register_strategy
class ParamOnlyStrategy(Strategy):
    name = "param-only"
    description = "parameter-partition diversity only"

    def order(self, instances: Iterable[OperatorInstance], ctx: PrioritizeContext) -> list[str]:
        return diversity_order(
            instances,
            ctx.equipped,
            use_op_score=False,
            use_diversity=True,
            precover_equipped=ctx.precover_equipped,
            notes=ctx.notes,
        )
