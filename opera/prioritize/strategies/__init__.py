"""Prioritization strategies, one module each behind one small interface (docs/design.md, Strategies).

A strategy turns the (de-duplicated) instances of a corpus into an order of their ids. It registers
itself with ``@register_strategy``; adding a strategy is adding a module to this package (every
module here is imported to find them; see ``opera.registry``), or naming a module of a third-party
package in the ``opera.strategies`` entry point group.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from opera.errors import OperaError
from opera.model import OperatorInstance
from opera.registry import Registry

if TYPE_CHECKING:
    from opera.prioritize.history import OperatorHistory

__all__ = [
    "STRATEGIES",
    "PrioritizeContext",
    "Strategy",
    "UnknownStrategy",
    "get_strategy",
    "register_strategy",
    "strategy_names",
]

class UnknownStrategy(OperaError):
    pass


@dataclass
class PrioritizeContext:
    """What a strategy may use besides the corpus itself.

    ``equipped``: instances from the compiler's own frontend tests (``Num_DLC`` and, when
    ``precover_equipped``, parameter partitions counted as covered before the first pick).
    ``coverage``: a coverage-data JSON file for the white-box baselines. ``history``: what earlier
    runs said of each operator on the target (the ``opera`` strategy's operator score when given).
    """

    target: str | None = None
    library: str | None = None
    equipped: Sequence[OperatorInstance] = ()
    seed: int = 0
    coverage: Path | None = None
    precover_equipped: bool = True
    zero_case: str = "untested-first"  # operator score when Num_DLC = 0 (see _greedy.operator_scores)
    # earlier runs on the target (opera.prioritize.history): the opera strategy's operator score
    history: OperatorHistory | None = None
    notes: dict[str, Any] = field(default_factory=dict)  # strategies report figures here


class Strategy:
    name: ClassVar[str] = ""
    description: ClassVar[str] = ""
    uses_seed: ClassVar[bool] = False

    def check(self, ctx: PrioritizeContext) -> None:
        """Raise OperaError when the strategy cannot run with this context (before reading a corpus)."""

    def order(self, instances: Iterable[OperatorInstance], ctx: PrioritizeContext) -> list[str]:
        """The ids of ``instances`` (unique, in corpus order), highest priority first."""
        raise NotImplementedError


STRATEGIES: Registry[type[Strategy]] = Registry(
    "strategy", __name__, group="opera.strategies", error=UnknownStrategy
)


def register_strategy(cls: type[Strategy]) -> type[Strategy]:
    if not cls.name:
        raise ValueError(f"{cls.__qualname__} has no name")
    return STRATEGIES.add(cls.name, cls)


def strategy_names() -> list[str]:
    return STRATEGIES.names()


def get_strategy(name: str) -> Strategy:
    return STRATEGIES.get(name)()
