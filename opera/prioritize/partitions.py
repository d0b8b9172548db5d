"""Value-space partitions of operator parameters (paper section III-B2; docs/design.md, Prioritize).

Each parameter value falls into one partition (an equivalence class of values expected to test the
frontend alike):

* finite sets (bool, str, bytes, dtype, enum, callable, None, library objects): each value;
* integers: ``(-inf, -2]``, ``-1``, ``0``, ``1``, ``[2, inf)``;
* floats: ``< 0``, ``0``, ``> 0`` (NaN its own class);
* tensors (``TensorSpec`` and exact numpy arrays alike): dtype x rank ``{0, 1, 2, 3, 4, 5, >=6}`` x
  the integer partition of each dimension (an unknown dimension is its own class);
* lists/tuples (shapes, kernel sizes, pads): container kind x length class x the partition of each
  element (lists longer than 6 elements: the set of element partitions);
* numpy scalars: dtype x the partition of the value.

A *parameter* is named by where it sits (positional args by position, kwargs by name, inputs by
position; ONNX: inputs by position, attributes by name). An instance's *elements* are its
(parameter, partition) singles and all pairs of singles; an instance without parameters has one
element, so a first use of a parameterless operator still counts as new.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Hashable
from itertools import combinations
from typing import Any

import numpy as np

from opera.model import InstanceKind, OperatorInstance
from opera.values import CallableRef, DType, EnumValue, ObjectSpec, Opaque, TensorSpec

__all__ = [
    "MAX_LIST_ELEMENTS",
    "RANK_CAP",
    "float_partition",
    "instance_elements",
    "instance_singles",
    "int_partition",
    "named_parameters",
    "operator_key",
    "partition",
]

RANK_CAP = 6  # ranks >= 6 share one class
MAX_LIST_ELEMENTS = 6
NO_PARAMETERS: tuple[str] = ("<no-parameters>",)


def int_partition(x: int) -> int:
    """``(-inf,-2] -> -2``, ``-1``, ``0``, ``1``, ``[2,inf) -> 2``."""
    if x <= -2:
        return -2
    if x >= 2:
        return 2
    return int(x)


def float_partition(x: float) -> str:
    if math.isnan(x):
        return "nan"
    if x < 0:
        return "<0"
    if x > 0:
        return ">0"
    return "0"


def _dim_partition(d: Any) -> int | str:
    return "?" if d is None else int_partition(int(d))


_TENSOR_CACHE: dict[tuple[str, tuple[Any, ...]], tuple[Hashable, ...]] = {}
_TENSOR_CACHE_MAX = 200_000


def tensor_partition(dtype: str, shape: tuple[Any, ...]) -> tuple[Hashable, ...]:
    key = (dtype, shape)
    cached = _TENSOR_CACHE.get(key)
    if cached is not None:
        return cached
    dims = tuple("?" if d is None else (d if -1 <= d <= 1 else (2 if d > 1 else -2)) for d in shape)
    result = ("tensor", dtype, min(len(shape), RANK_CAP), dims)
    if len(_TENSOR_CACHE) >= _TENSOR_CACHE_MAX:
        _TENSOR_CACHE.clear()
    _TENSOR_CACHE[key] = result
    return result


def _short(b: bytes) -> str:
    return b.decode("latin-1") if len(b) <= 32 else "sha1:" + hashlib.sha1(b).hexdigest()


def _sequence(value: list[Any] | tuple[Any, ...]) -> Hashable:
    kind = "list" if isinstance(value, list) else "tuple"
    if len(value) > MAX_LIST_ELEMENTS:
        parts = sorted({partition(v) for v in value}, key=repr)
        return (kind, ">6", tuple(parts))
    return (kind, len(value), tuple(partition(v) for v in value))


def _numpy_scalar(value: np.generic) -> Hashable:
    item = value.item()
    name = str(value.dtype)
    if isinstance(item, bool):
        return ("scalar", name, item)
    if isinstance(item, int):
        return ("scalar", name, int_partition(item))
    if isinstance(item, float):
        return ("scalar", name, float_partition(item))
    return ("scalar", name)


_INT_PARTS = {x: ("int", x) for x in (-2, -1, 0, 1, 2)}  # one shared key per integer partition


def _int(v: int) -> Hashable:
    return _INT_PARTS[int_partition(v)]


def _tensor_spec(v: TensorSpec) -> Hashable:
    cached = _TENSOR_CACHE.get((v.dtype, v.shape))
    return cached if cached is not None else tensor_partition(v.dtype, v.shape)


# Exact-type dispatch for the common value types (the hot path of prioritizing a large corpus);
# everything else, subclasses included, goes through the isinstance chain in ``_partition_slow``.
_DISPATCH: dict[type, Any] = {
    type(None): lambda v: ("none",),
    bool: lambda v: ("bool", v),
    int: _int,
    float: lambda v: ("float", float_partition(v)),
    str: lambda v: ("str", v),
    TensorSpec: _tensor_spec,
    np.ndarray: lambda v: tensor_partition(str(v.dtype), v.shape),
    list: _sequence,
    tuple: _sequence,
}


def partition(value: Any) -> Hashable:
    """The partition (a hashable key) a neutral value falls into."""
    return _DISPATCH.get(type(value), _partition_slow)(value)


def _partition_slow(value: Any) -> Hashable:
    if value is None:
        return ("none",)
    if isinstance(value, (bool, np.bool_)):
        return ("bool", bool(value))
    if isinstance(value, np.generic):
        return _numpy_scalar(value)
    if isinstance(value, int):
        return ("int", int_partition(value))
    if isinstance(value, float):
        return ("float", float_partition(value))
    if isinstance(value, str):
        return ("str", value)
    if isinstance(value, TensorSpec):
        return tensor_partition(value.dtype, value.shape)
    if isinstance(value, np.ndarray):
        return tensor_partition(str(value.dtype), value.shape)
    if isinstance(value, (list, tuple)):
        return _sequence(value)
    if isinstance(value, complex):
        return ("complex", float_partition(value.real), float_partition(value.imag))
    if isinstance(value, bytes):
        return ("bytes", _short(value))
    if isinstance(value, DType):
        return ("dtype", value.name)
    if isinstance(value, EnumValue):
        return ("enum", value.type, value.name)
    if isinstance(value, CallableRef):
        return ("callable", value.qualname)
    if isinstance(value, ObjectSpec):
        return ("object", value.api)
    if isinstance(value, Opaque):
        return ("opaque", value.type)
    if isinstance(value, dict):
        return ("dict", len(value))
    if isinstance(value, slice):
        return ("slice", partition(value.start), partition(value.stop), partition(value.step))
    if value is Ellipsis:
        return ("ellipsis",)
    return ("other", type(value).__name__)


def operator_key(inst: OperatorInstance) -> str:
    """The operator an instance exercises: its api, plus the ONNX domain when not the default one
    (``onnx::Attention`` of ai.onnx and of com.microsoft are different operators)."""
    domain = inst.extra.get("domain") if inst.extra else None
    return f"{inst.api}@{domain}" if domain and domain != "ai.onnx" else inst.api


def named_parameters(inst: OperatorInstance) -> list[tuple[str, Any]]:
    """(parameter name, value) pairs: positional args by position, kwargs by name, inputs by position."""
    params: list[tuple[str, Any]] = []
    if inst.kind is not InstanceKind.ONNX_NODE:
        params.extend((f"arg{i}", v) for i, v in enumerate(inst.args))
    params.extend((f"kw:{k}", inst.kwargs[k]) for k in sorted(inst.kwargs))
    params.extend((f"in{i}", v) for i, v in enumerate(inst.inputs))
    return params


_ARG_NAMES = tuple(f"arg{i}" for i in range(64))
_IN_NAMES = tuple(f"in{i}" for i in range(64))
_KW_NAMES: dict[str, str] = {}


def instance_singles(inst: OperatorInstance) -> list[Hashable]:
    """The instance's (parameter name, partition) singles (``named_parameters``, inlined: hot path;
    the parameter names are built once, not per instance)."""
    singles: list[Hashable] = []
    args, inputs = inst.args, inst.inputs
    if args and inst.kind is not InstanceKind.ONNX_NODE:
        if len(args) <= len(_ARG_NAMES):
            singles.extend(zip(_ARG_NAMES, map(partition, args), strict=False))
        else:
            singles.extend((f"arg{i}", partition(v)) for i, v in enumerate(args))
    kwargs = inst.kwargs
    if kwargs:
        names = _KW_NAMES
        for k in sorted(kwargs):
            name = names.get(k)
            if name is None:
                name = names[k] = f"kw:{k}"
            singles.append((name, partition(kwargs[k])))
    if inputs:
        if len(inputs) <= len(_IN_NAMES):
            singles.extend(zip(_IN_NAMES, map(partition, inputs), strict=False))
        else:
            singles.extend((f"in{i}", partition(v)) for i, v in enumerate(inputs))
    return singles or [NO_PARAMETERS]


def instance_elements(inst: OperatorInstance) -> tuple[list[Hashable], list[tuple[Hashable, Hashable]]]:
    """The instance's (parameter, partition) singles and their pairs, without the operator."""
    singles = instance_singles(inst)
    return singles, list(combinations(singles, 2))
