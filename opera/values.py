"""Library-neutral tagged value encoding for operator-instance parameters (docs/design.md, Tagged values).

Harvest hooks turn library objects (torch tensors, keras tensors, ONNX attributes) into the neutral
Python values defined here; the corpus stores them as JSON with tagged objects; templates turn the
neutral values back into library objects. Keeping the neutral layer in between means the corpus
format does not depend on any DL library being importable.

Neutral value kinds and their JSON form:

======================  ===================================================================
``None/bool/int/str``   JSON as is
``float``               JSON number; NaN/Inf as ``{"$float": "nan"|"inf"|"-inf"}``
``complex``             ``{"$complex": [re, im]}``
``bytes``               ``{"$bytes": base64}``
``list``                JSON array
``tuple``               ``{"$tuple": [...]}``
``dict``                ``{"$dict": [[key, value], ...]}`` (keys may be any value)
``slice``               ``{"$slice": [start, stop, step]}``
``Ellipsis``            ``{"$ellipsis": true}``
``DType``               ``{"$dtype": "float32"}``
``EnumValue``           ``{"$enum": {"type": "torch.memory_format", "name": "channels_last"}}``
``CallableRef``         ``{"$callable": "torch.nn.functional.relu"}``
``ObjectSpec``          ``{"$object": {"api": ..., "args": [...], "kwargs": {...}}}``
                        (a library object rebuilt from its constructor call, e.g. a submodule)
``Opaque``              ``{"$opaque": {"type": ..., "reason": ...}}`` (cannot be rebuilt)
``numpy.ndarray``       ``{"$tensor": {"dtype", "shape", "b64"}}``: exact little-endian bytes
                        (``"data": [...]`` list form for int/bool is accepted on read)
``TensorSpec``          ``{"$tensor": {"dtype", "shape", "seed", "low", "high"}}``: a large
                        float tensor stored as shape + dtype + seed + value range
``numpy scalar``        ``{"$scalar": {"dtype", "value"}}``
======================  ===================================================================
"""

from __future__ import annotations

import base64
import math
from dataclasses import dataclass, field
from typing import Any

import ml_dtypes
import numpy as np

__all__ = [
    "DTYPES",
    "CallableRef",
    "DType",
    "EnumValue",
    "ObjectSpec",
    "Opaque",
    "TensorSpec",
    "ValueEncodingError",
    "contains_opaque",
    "decode_value",
    "encode_value",
    "numpy_dtype",
]


class ValueEncodingError(ValueError):
    """A JSON value that is not a valid encoding, or a Python value with no encoding."""


# Every tensor dtype the libraries use that the corpus can hold exactly.
DTYPES: dict[str, np.dtype] = {
    "bool": np.dtype(np.bool_),
    "int8": np.dtype(np.int8),
    "int16": np.dtype(np.int16),
    "int32": np.dtype(np.int32),
    "int64": np.dtype(np.int64),
    "uint8": np.dtype(np.uint8),
    "uint16": np.dtype(np.uint16),
    "uint32": np.dtype(np.uint32),
    "uint64": np.dtype(np.uint64),
    "float16": np.dtype(np.float16),
    "bfloat16": np.dtype(ml_dtypes.bfloat16),
    "float32": np.dtype(np.float32),
    "float64": np.dtype(np.float64),
    "complex64": np.dtype(np.complex64),
    "complex128": np.dtype(np.complex128),
    "float8_e4m3fn": np.dtype(ml_dtypes.float8_e4m3fn),
    "float8_e5m2": np.dtype(ml_dtypes.float8_e5m2),
}
_NAME_OF_DTYPE = {dt: name for name, dt in DTYPES.items()}


def numpy_dtype(name: str) -> np.dtype:
    try:
        return DTYPES[name]
    except KeyError:
        raise ValueEncodingError(f"unknown tensor dtype {name!r}") from None


def dtype_name(dtype: np.dtype) -> str:
    dt = np.dtype(dtype)
    if dt.byteorder == ">":
        dt = dt.newbyteorder("<")
    try:
        return _NAME_OF_DTYPE[dt]
    except KeyError:
        raise ValueEncodingError(f"tensor dtype {dtype} has no corpus encoding") from None


@dataclass(frozen=True)
class DType:
    """A dtype passed as a parameter (``torch.float16``, ``"int32"`` in keras, ONNX ``to=``)."""

    name: str


@dataclass(frozen=True)
class EnumValue:
    """A library enum member or singleton, e.g. ``torch.channels_last``, ``torch.strided``."""

    type: str
    name: str


@dataclass(frozen=True)
class CallableRef:
    """A public library callable passed as a value (``activation=torch.nn.functional.relu``)."""

    qualname: str


@dataclass(frozen=True)
class ObjectSpec:
    """A library object rebuilt by calling ``api(*args, **kwargs)`` (a submodule, a keras layer)."""

    api: str
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)

    def __hash__(self) -> int:
        return hash((self.api, len(self.args), tuple(sorted(self.kwargs))))


@dataclass(frozen=True)
class Opaque:
    """A value that cannot be rebuilt; the instance holding it is marked not migratable."""

    type: str
    reason: str


@dataclass(frozen=True)
class TensorSpec:
    """A tensor kept as shape, dtype, value range and seed instead of exact values.

    Used for large float tensors, where exact values carry little meaning and would bloat the
    corpus; ``materialize`` rebuilds the same values for the same spec on every machine.
    A ``None`` dimension is unknown (a symbolic batch dimension, e.g. a Keras functional input).
    """

    dtype: str
    shape: tuple[int | None, ...]
    seed: int = 0
    low: float = -1.0
    high: float = 1.0

    def materialize(self, unknown_dim: int = 2) -> np.ndarray:
        shape = tuple(unknown_dim if d is None else d for d in self.shape)
        rng = np.random.default_rng(self.seed)
        dt = numpy_dtype(self.dtype)
        if dt == np.bool_:
            return rng.integers(0, 2, size=shape).astype(np.bool_)
        if np.issubdtype(dt, np.integer):
            lo, hi = math.floor(self.low), math.floor(self.high)
            return rng.integers(lo, hi + 1, size=shape, dtype=np.int64).astype(dt)
        if np.issubdtype(dt, np.complexfloating):
            re = rng.uniform(self.low, self.high, size=shape)
            im = rng.uniform(self.low, self.high, size=shape)
            return (re + 1j * im).astype(dt)
        return rng.uniform(self.low, self.high, size=shape).astype(dt)


def _encode_float(x: float) -> Any:
    if math.isnan(x):
        return {"$float": "nan"}
    if math.isinf(x):
        return {"$float": "inf" if x > 0 else "-inf"}
    return x


def _encode_array(arr: np.ndarray) -> dict[str, Any]:
    name = dtype_name(arr.dtype)
    shape = list(arr.shape)  # np.ascontiguousarray would turn a rank-0 tensor into rank 1
    arr = np.array(arr, order="C", copy=True)
    if arr.dtype.byteorder == ">":
        arr = arr.astype(arr.dtype.newbyteorder("<"))
    return {"$tensor": {"dtype": name, "shape": shape, "b64": base64.b64encode(arr.tobytes()).decode()}}


def encode_value(value: Any) -> Any:
    """Neutral Python value -> JSON-compatible structure. Raises ValueEncodingError."""
    # numpy scalars first: np.float64 and np.complex128 subclass Python float/complex.
    if isinstance(value, np.generic):
        item = value.item()
        name = dtype_name(value.dtype)
        if isinstance(item, float):
            item = _encode_float(item)
        elif isinstance(item, complex):
            item = [_encode_float(item.real), _encode_float(item.imag)]
        elif name in ("bfloat16", "float8_e4m3fn", "float8_e5m2"):
            item = _encode_float(float(value))
        return {"$scalar": {"dtype": name, "value": item}}
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return _encode_float(value)
    if isinstance(value, complex):
        return {"$complex": [_encode_float(value.real), _encode_float(value.imag)]}
    if isinstance(value, bytes):
        return {"$bytes": base64.b64encode(value).decode()}
    if isinstance(value, list):
        return [encode_value(v) for v in value]
    if isinstance(value, tuple):
        return {"$tuple": [encode_value(v) for v in value]}
    if isinstance(value, dict):
        return {"$dict": [[encode_value(k), encode_value(v)] for k, v in value.items()]}
    if isinstance(value, slice):
        return {"$slice": [encode_value(value.start), encode_value(value.stop), encode_value(value.step)]}
    if value is Ellipsis:
        return {"$ellipsis": True}
    if isinstance(value, DType):
        return {"$dtype": value.name}
    if isinstance(value, EnumValue):
        return {"$enum": {"type": value.type, "name": value.name}}
    if isinstance(value, CallableRef):
        return {"$callable": value.qualname}
    if isinstance(value, ObjectSpec):
        return {
            "$object": {
                "api": value.api,
                "args": [encode_value(a) for a in value.args],
                "kwargs": {k: encode_value(v) for k, v in value.kwargs.items()},
            }
        }
    if isinstance(value, Opaque):
        return {"$opaque": {"type": value.type, "reason": value.reason}}
    if isinstance(value, TensorSpec):
        return {
            "$tensor": {
                "dtype": value.dtype,
                "shape": list(value.shape),
                "seed": value.seed,
                "low": _encode_float(value.low),
                "high": _encode_float(value.high),
            }
        }
    if isinstance(value, np.ndarray):
        return _encode_array(value)
    raise ValueEncodingError(f"no encoding for a value of type {type(value).__module__}.{type(value).__qualname__}")


def _decode_float(x: Any) -> float:
    if isinstance(x, dict) and "$float" in x:
        try:
            return {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}[x["$float"]]
        except KeyError:
            raise ValueEncodingError(f"bad $float value {x['$float']!r}") from None
    if isinstance(x, (int, float)) and not isinstance(x, bool):
        return float(x)
    raise ValueEncodingError(f"expected a number, got {x!r}")


def _decode_tensor(body: Any) -> np.ndarray | TensorSpec:
    if not isinstance(body, dict) or "dtype" not in body or "shape" not in body:
        raise ValueEncodingError("$tensor needs 'dtype' and 'shape'")
    shape = tuple(None if d is None else int(d) for d in body["shape"])
    if "b64" in body or "data" in body:
        dt = numpy_dtype(body["dtype"])
        if None in shape:
            raise ValueEncodingError("a tensor with exact values cannot have unknown dimensions")
        if "b64" in body:
            raw = base64.b64decode(body["b64"])
            arr = np.frombuffer(raw, dtype=dt.newbyteorder("<") if dt.itemsize > 1 else dt)
        else:
            arr = np.asarray(body["data"]).astype(dt)
        count = math.prod(shape)  # type: ignore[arg-type]
        if arr.size != count:
            raise ValueEncodingError(f"$tensor holds {arr.size} values for shape {list(shape)}")
        return arr.astype(dt, copy=True).reshape(shape)  # type: ignore[arg-type]
    numpy_dtype(body["dtype"])
    return TensorSpec(
        dtype=body["dtype"],
        shape=shape,
        seed=int(body.get("seed", 0)),
        low=_decode_float(body.get("low", -1.0)),
        high=_decode_float(body.get("high", 1.0)),
    )


def decode_value(obj: Any) -> Any:
    """JSON-compatible structure -> neutral Python value. Raises ValueEncodingError."""
    if obj is None or isinstance(obj, (bool, str, int, float)):
        return obj
    if isinstance(obj, list):
        return [decode_value(v) for v in obj]
    if not isinstance(obj, dict):
        raise ValueEncodingError(f"unexpected JSON value of type {type(obj).__name__}")
    if len(obj) != 1:
        raise ValueEncodingError(f"a tagged value has exactly one '$tag' key, got {sorted(obj)}")
    ((tag, body),) = obj.items()
    try:
        if tag == "$float":
            return _decode_float(obj)
        if tag == "$complex":
            return complex(_decode_float(body[0]), _decode_float(body[1]))
        if tag == "$bytes":
            return base64.b64decode(body)
        if tag == "$tuple":
            return tuple(decode_value(v) for v in body)
        if tag == "$dict":
            return {_hashable(decode_value(k)): decode_value(v) for k, v in body}
        if tag == "$slice":
            start, stop, step = (decode_value(v) for v in body)
            return slice(start, stop, step)
        if tag == "$ellipsis":
            return Ellipsis
        if tag == "$dtype":
            numpy_dtype(body) if body in DTYPES else None
            return DType(str(body))
        if tag == "$enum":
            return EnumValue(type=str(body["type"]), name=str(body["name"]))
        if tag == "$callable":
            return CallableRef(str(body))
        if tag == "$object":
            return ObjectSpec(
                api=str(body["api"]),
                args=tuple(decode_value(a) for a in body.get("args", [])),
                kwargs={str(k): decode_value(v) for k, v in body.get("kwargs", {}).items()},
            )
        if tag == "$opaque":
            return Opaque(type=str(body["type"]), reason=str(body["reason"]))
        if tag == "$tensor":
            return _decode_tensor(body)
        if tag == "$scalar":
            dt = numpy_dtype(body["dtype"])
            value = body["value"]
            if isinstance(value, list):
                value = complex(_decode_float(value[0]), _decode_float(value[1]))
            elif isinstance(value, dict):
                value = _decode_float(value)
            return np.array(value).astype(dt)[()]
    except ValueEncodingError:
        raise
    except (KeyError, TypeError, ValueError, IndexError) as exc:
        raise ValueEncodingError(f"malformed {tag}: {exc}") from None
    raise ValueEncodingError(f"unknown tag {tag!r}")


def _hashable(value: Any) -> Any:
    if isinstance(value, list):
        return tuple(_hashable(v) for v in value)
    return value


def contains_opaque(value: Any) -> Opaque | None:
    """The first Opaque inside a neutral value, or None."""
    if isinstance(value, Opaque):
        return value
    if isinstance(value, (list, tuple)):
        items: Any = value
    elif isinstance(value, dict):
        items = list(value.keys()) + list(value.values())
    elif isinstance(value, ObjectSpec):
        items = list(value.args) + list(value.kwargs.values())
    else:
        return None
    for item in items:
        found = contains_opaque(item)
        if found is not None:
            return found
    return None
