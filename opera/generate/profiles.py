"""Per-parameter value profiles learned from harvested instances (what the mutators draw from).

A parameter is named as the prioritizer names it (``opera.prioritize.partitions``): positional
arguments ``arg<i>``, keyword arguments ``kw:<name>``, runtime inputs ``in<i>`` (ONNX: attributes
by name, inputs by position). For each operator and parameter the profile keeps the distinct values
seen (at most ``MAX_VALUES_PER_PARAMETER``, first seen first, so learning is deterministic), the
tensor dtypes seen, and in how many instances the parameter was present, which tells an optional
parameter (present in some instances, absent or ``None`` in others) from a required one.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from opera.model import OperatorInstance
from opera.prioritize.partitions import named_parameters, operator_key, partition
from opera.values import TensorSpec

__all__ = ["MAX_VALUES_PER_PARAMETER", "ApiProfile", "ParameterProfile", "is_tensor", "learn_profiles"]

MAX_VALUES_PER_PARAMETER = 32


def is_tensor(value: Any) -> bool:
    return isinstance(value, (np.ndarray, TensorSpec))


def tensor_dtype(value: np.ndarray | TensorSpec) -> str:
    return value.dtype if isinstance(value, TensorSpec) else str(np.asarray(value).dtype)


@dataclass
class ParameterProfile:
    """What one parameter of one operator looked like across its harvested instances."""

    name: str
    present: int = 0  # instances holding the parameter with a non-None value
    none: int = 0  # instances holding it as None
    values: list[Any] = field(default_factory=list)  # distinct values, one per partition
    partitions: set[Hashable] = field(default_factory=set)
    dtypes: list[str] = field(default_factory=list)  # tensor dtypes seen, first seen first

    def add(self, value: Any) -> None:
        if value is None:
            self.none += 1
            return
        self.present += 1
        if is_tensor(value):
            dtype = tensor_dtype(value)
            if dtype not in self.dtypes:
                self.dtypes.append(dtype)
        try:
            key = partition(value)
            hash(key)
        except TypeError:
            return
        if key not in self.partitions and len(self.values) < MAX_VALUES_PER_PARAMETER:
            self.partitions.add(key)
            self.values.append(value)

    def other_values(self, current: Any) -> list[Any]:
        """Seen values in another partition than ``current`` (the enum/string swap's choices)."""
        here = partition(current)
        return [v for v in self.values if partition(v) != here]


@dataclass
class ApiProfile:
    """One operator: its parents (valid, migratable harvested instances) and parameter profiles."""

    library: str
    api: str
    parents: list[OperatorInstance] = field(default_factory=list)
    parameters: dict[str, ParameterProfile] = field(default_factory=dict)

    def parameter(self, name: str) -> ParameterProfile | None:
        return self.parameters.get(name)

    def add(self, inst: OperatorInstance) -> None:
        self.parents.append(inst)
        for name, value in named_parameters(inst):
            self.parameters.setdefault(name, ParameterProfile(name)).add(value)

    def absent_in_some(self, name: str) -> bool:
        """True when some parent lacks the parameter or holds None: it is optional."""
        prof = self.parameters.get(name)
        return prof is not None and (prof.none > 0 or prof.present < len(self.parents))


def learn_profiles(instances: Iterable[OperatorInstance]) -> dict[str, ApiProfile]:
    """operator (``operator_key``) -> profile over the valid, migratable instances (invalid ones teach nothing usable)."""
    profiles: dict[str, ApiProfile] = {}
    for inst in instances:
        if inst.valid is False or not inst.migratable:
            continue
        key = operator_key(inst)
        prof = profiles.get(key)
        if prof is None:
            prof = profiles[key] = ApiProfile(inst.library, key)
        prof.add(inst)
    return profiles
