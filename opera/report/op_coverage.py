"""Operator-level coverage of a corpus (the criteria of ``../shared/papers/004_*``, section III-B).

The paper measures how much of an inference engine's logic a set of test models exercises by the
operators they use and how: operator type (OTC), input degree (IDC), output degree (ODC), single
edges (SEC) and distinct shape-and-parameter vectors (SPC), averaged into OLC. Opera's models have
one operator each, so:

- OTC: operators present / operators of the block corpus (the union of the corpora compared);
- IDC, ODC per operator: distinct input degrees (tensor operands) / output degrees (recorded
  outputs) present / those in the block corpus; averaged over the block corpus's operators;
- SEC is 0-weighted: a single-operator model has no edges between operators (the paper sets a
  criterion's weight to 0 where it cannot vary);
- SPC per operator: distinct (input shapes and dtypes, parameter values) vectors / ``n_maxspc``
  (200, the paper's setting), capped at 1;
- OLC: the mean of OTC, IDC, ODC and SPC (weights 1).

``opera stats --op-coverage`` prints it per origin (human-written, tool-generated, both).
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from dataclasses import dataclass, field
from typing import Any

from opera.model import OperatorInstance
from opera.prioritize.partitions import named_parameters
from opera.values import TensorSpec

__all__ = ["N_MAXSPC", "CoverageSets", "OperatorLevelCoverage", "coverage_sets", "operator_level_coverage"]

N_MAXSPC = 200


def _is_tensor(value: Any) -> bool:
    return isinstance(value, TensorSpec) or (hasattr(value, "shape") and hasattr(value, "dtype"))


def _tensor_key(value: Any) -> tuple[str, tuple[Any, ...]]:
    dtype = value.dtype if isinstance(value, TensorSpec) else str(value.dtype)
    return str(dtype), tuple(value.shape)


def _hashable(value: Any) -> Hashable:
    if _is_tensor(value):
        return ("tensor", *_tensor_key(value))
    if isinstance(value, (list, tuple)):
        return tuple(_hashable(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((str(k), _hashable(v)) for k, v in value.items()))
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return f"{type(value).__name__}:{repr(value)[:300]}"  # objects may hold arrays: compare their text


@dataclass
class CoverageSets:
    """What one corpus covers, per operator."""

    input_degrees: dict[str, set[int]] = field(default_factory=dict)
    output_degrees: dict[str, set[int]] = field(default_factory=dict)
    vectors: dict[str, set[Hashable]] = field(default_factory=dict)

    def add(self, inst: OperatorInstance) -> None:
        op = inst.api
        params = named_parameters(inst)
        tensors = [v for _, v in params if _is_tensor(v)]
        self.input_degrees.setdefault(op, set()).add(len(tensors))
        if inst.outputs is not None:
            self.output_degrees.setdefault(op, set()).add(len(inst.outputs))
        else:
            self.output_degrees.setdefault(op, set())
        self.vectors.setdefault(op, set()).add(tuple((name, _hashable(v)) for name, v in params))

    @property
    def operators(self) -> set[str]:
        return set(self.input_degrees)


def coverage_sets(instances: Iterable[OperatorInstance]) -> CoverageSets:
    """Valid instances only: an instance the library rejects exercises no operator."""
    sets = CoverageSets()
    for inst in instances:
        if inst.valid is not False:
            sets.add(inst)
    return sets


@dataclass
class OperatorLevelCoverage:
    operators: int  # in the corpus measured
    block_corpus_operators: int
    otc: float
    idc: float
    odc: float
    spc: float

    @property
    def olc(self) -> float:
        return (self.otc + self.idc + self.odc + self.spc) / 4

    def to_json(self) -> dict[str, Any]:
        return {
            "operators": self.operators,
            "block_corpus_operators": self.block_corpus_operators,
            **{k: round(getattr(self, k), 4) for k in ("otc", "idc", "odc", "spc", "olc")},
        }


def operator_level_coverage(measured: CoverageSets, block: CoverageSets, n_maxspc: int = N_MAXSPC) -> OperatorLevelCoverage:
    """OTC, IDC, ODC, SPC and OLC of ``measured`` against the block corpus ``block`` (which should
    contain it: the union of everything compared)."""
    ops = sorted(block.operators)
    if not ops:
        return OperatorLevelCoverage(0, 0, 0.0, 0.0, 0.0, 0.0)

    def ratio(have: set[Any], of: set[Any]) -> float:
        return len(have & of) / len(of) if of else 1.0

    idc = sum(ratio(measured.input_degrees.get(op, set()), block.input_degrees[op]) for op in ops) / len(ops)
    odc = sum(ratio(measured.output_degrees.get(op, set()), block.output_degrees.get(op, set())) for op in ops) / len(ops)
    spc = sum(min(len(measured.vectors.get(op, ())), n_maxspc) / n_maxspc for op in ops) / len(ops)
    present = len(measured.operators & set(ops))
    return OperatorLevelCoverage(len(measured.operators), len(ops), present / len(ops), idc, odc, spc)
