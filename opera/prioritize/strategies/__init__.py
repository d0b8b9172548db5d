"""Prioritization strategies, one module each behind one small interface (DESIGN.md section 9).

A strategy turns the (de-duplicated) instances of a corpus into an order of their ids. It registers
itself with ``@register_strategy``; adding a strategy is adding a module and naming it in
``STRATEGY_MODULES`` (or in the ``opera.strategies`` entry point group of a third-party package).
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any, ClassVar

from opera.errors import OperaError
from opera.model import OperatorInstance

__all__ = [
    "STRATEGY_MODULES",
    "PrioritizeContext",
    "Strategy",
    "UnknownStrategy",
    "get_strategy",
    "register_strategy",
    "strategy_names",
]

STRATEGY_MODULES: tuple[str, ...] = (
    "opera.prioritize.strategies.opera",
    "opera.prioritize.strategies.op_only",
    "opera.prioritize.strategies.param_only",
    "opera.prioritize.strategies.random",
    "opera.prioritize.strategies.fast",
    "opera.prioritize.strategies.total_cov",
    "opera.prioritize.strategies.add_cov",
)


class UnknownStrategy(OperaError):
    pass


@dataclass
class PrioritizeContext:
    """What a strategy may use besides the corpus itself.

    ``equipped``: instances from the compiler's own frontend tests (``Num_DLC`` and, when
    ``precover_equipped``, parameter partitions counted as covered before the first pick).
    ``coverage``: a coverage-data JSON file for the white-box baselines.
    """

    target: str | None = None
    library: str | None = None
    equipped: Sequence[OperatorInstance] = ()
    seed: int = 0
    coverage: Path | None = None
    precover_equipped: bool = True
    zero_case: str = "untested-first"  # operator score when Num_DLC = 0 (see _greedy.operator_scores)
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


_REGISTRY: dict[str, type[Strategy]] = {}
_loaded = False


def register_strategy(cls: type[Strategy]) -> type[Strategy]:
    if not cls.name:
        raise ValueError(f"{cls.__qualname__} has no name")
    if cls.name in _REGISTRY and _REGISTRY[cls.name] is not cls:
        raise ValueError(f"strategy {cls.name!r} registered twice")
    _REGISTRY[cls.name] = cls
    return cls


def _load() -> None:
    global _loaded
    if _loaded:
        return
    for module in STRATEGY_MODULES:
        importlib.import_module(module)
    for ep in entry_points(group="opera.strategies"):
        ep.load()
    _loaded = True


def strategy_names() -> list[str]:
    _load()
    return sorted(_REGISTRY)


def get_strategy(name: str) -> Strategy:
    _load()
    try:
        return _REGISTRY[name]()
    except KeyError:
        raise UnknownStrategy(f"unknown strategy {name!r} (known: {', '.join(sorted(_REGISTRY))})") from None
