"""Does a generated instance cover a parameter partition (or partition pair) the human corpus does not?

Measured with the prioritizer's own partition function (``instance_elements``, paper section
III-B2): an instance is *new* when one of its (parameter, partition) singles or pairs of singles
is absent from every human-written instance of the same operator.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

from opera.model import OperatorInstance
from opera.prioritize.partitions import instance_elements, operator_key

__all__ = ["NoveltyMeter"]


class NoveltyMeter:
    def __init__(self) -> None:
        self._covered: dict[str, set[Hashable]] = {}

    @staticmethod
    def _elements(inst: OperatorInstance) -> list[Any]:
        singles, pairs = instance_elements(inst)
        return [*singles, *pairs]

    def cover(self, inst: OperatorInstance) -> None:
        """Count ``inst`` (a human-written instance) as covered."""
        self._covered.setdefault(operator_key(inst), set()).update(self._elements(inst))

    def is_new(self, inst: OperatorInstance) -> bool:
        covered = self._covered.get(operator_key(inst), set())
        return any(e not in covered for e in self._elements(inst))
