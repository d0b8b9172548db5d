"""The research artifact's variant of Opera's prioritization, rule for rule (``opera.prioritize.artifact``).

Operator rate ``1 - prod(compiler count / all count)`` over the operator's parameter partitions and
partition pairs (1 for operators the compiler's tests never use) x the instance's distance to the
operator's selected values; operators with nothing new at the start, and everything left once an
operator's key reaches 0, are appended in a shuffle seeded with 1, as the artifact does. On the
artifact's own data it reproduces its published orders (docs/results.md, Fidelity to the
artifact's prioritization).
"""

from __future__ import annotations

from collections.abc import Iterable

from opera.model import OperatorInstance
from opera.prioritize.artifact import order_instances
from opera.prioritize.strategies import PrioritizeContext, Strategy, register_strategy


@register_strategy
class OperaArtifactStrategy(Strategy):
    name = "opera-artifact"
    description = (
        "the OPERA artifact's code: rate 1 - prod(equipped/all partition counts) x max distance, "
        "distance-0 operators last in a seeded shuffle"
    )

    def order(self, instances: Iterable[OperatorInstance], ctx: PrioritizeContext) -> list[str]:
        return order_instances(instances, ctx.equipped, notes=ctx.notes)
