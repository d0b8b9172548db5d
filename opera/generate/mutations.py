"""Type-aware mutation operators (FreeFuzz / DocTer style), one family per value kind.

``mutation_choices`` lists what can be done to an instance: (parameter, kind) pairs, cheap to
enumerate, so that the validity learner can weigh them before anything is built. ``apply_mutation``
performs one choice and returns the mutated instance with a one-line description, or ``None``
when the choice does not apply after all (no other value to swap to, a tensor that would grow too
large).

Kinds, by value kind:

=================  ============================================================================
``int:-1/0/1``     an integer (or one integer of a list/tuple of integers, ``seq:...``) set to
``int:large``      that boundary value (large = ``LARGE_INT``)
``float:*``        ``0``, ``negative`` (minus the magnitude), ``tiny`` (1e-30), ``huge`` (1e30)
``bool:flip``      ``True`` <-> ``False``
``enum:swap``      str / dtype / enum / callable to another value seen for the same parameter
``tensor:rank``    to another rank in 0..6 (leading dimensions added or dropped); ``-all``: every
                   tensor of the instance with the same shape changes alike (elementwise partners)
``tensor:zero``    one dimension set to 0 (zero-size tensor); ``-all`` as above
``tensor:dtype``   to another dtype seen for the parameter, else one of ``DTYPE_POOL``
``tensor:dtype-new`` to a dtype of ``DTYPE_POOL`` never seen for the parameter (the validity gate
                   says whether the library supports it)
``tensor:values:*`` the same shape and dtype, values re-drawn from one class (``VALUE_CLASSES``):
                   ``zeros``, ``negative``, ``special`` (NaN, +-Inf, -0.0 mixed in; floats),
                   ``boundary`` (the dtype's min and max, and its smallest normal for floats),
                   ``ties`` (one value repeated), ``small`` (integers -2..2); stored exact, so only
                   for tensors of at most ``MAX_EXACT`` elements
``tensor:spatial`` the spatial dimensions (after batch and channel) set around a window size the
                   instance holds (kernel, stride, dilation: ``k - 1``, ``k``, ``k + 1`` or 1), where
                   shape-coupled bugs live (windows larger than the input, exact fits)
``optional:*``     ``absent``: drop an optional parameter (keyword removed, last positional
                   argument removed, ONNX optional input omitted); ``present``: give an absent or
                   ``None`` optional parameter a value seen for it
``borrow``         a value seen for the corresponding parameter of a related operator
                   (``torch.nn.Conv2d`` <-> ``torch.nn.functional.conv2d``), in a partition this
                   operator's own instances never used
=================  ============================================================================

Mutated tensors are stored as ``TensorSpec`` (shape, dtype, seed, value range of the original), so
the generated corpus stays small and integer tensors keep values in their original range (indices
stay mostly in bounds).
"""

from __future__ import annotations

import math
import random
from collections import Counter
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from opera.generate.profiles import ApiProfile, is_tensor, tensor_dtype
from opera.generate.related import corresponding_parameters
from opera.model import InstanceKind, OperatorInstance
from opera.prioritize.partitions import named_parameters, partition
from opera.values import CallableRef, DType, EnumValue, TensorSpec

__all__ = ["LARGE_INT", "MAX_ELEMENTS", "Choice", "Mutated", "apply_mutation", "mutation_choices"]

LARGE_INT = 65537  # past uint16, far past any harvested size or axis; not so large it exhausts memory
MAX_ELEMENTS = 1 << 16  # mutated tensors stay below this many elements
MAX_RANK = 6
INT_TARGETS: dict[str, int] = {"int:-1": -1, "int:0": 0, "int:1": 1, "int:large": LARGE_INT}
FLOAT_KINDS = ("float:0", "float:negative", "float:tiny", "float:huge")
DTYPE_POOL = (
    "float16", "float32", "float64", "bfloat16", "int8", "int16", "int32", "int64", "uint8", "uint16", "bool",
    "complex64",
)  # fmt: skip
VALUE_CLASSES = ("zeros", "negative", "special", "boundary", "ties", "small")
MAX_EXACT = 4096  # re-drawn values are stored exactly: at most this many elements
# Parameters whose integers are window sizes (torch, Keras, ONNX spellings).
WINDOW_PARAMETERS = ("kernel_size", "kernel_shape", "pool_size", "stride", "strides", "dilation", "dilations")


@dataclass(frozen=True)
class Choice:
    """One applicable mutation: which parameter, which kind."""

    parameter: str
    kind: str


@dataclass(frozen=True)
class Mutated:
    instance: OperatorInstance
    description: str


# ---- parameter access -------------------------------------------------------------------------
_MISSING = object()


def get_parameter(inst: OperatorInstance, name: str) -> Any:
    if name.startswith("kw:"):
        return inst.kwargs.get(name[3:], _MISSING)
    seq = inst.inputs if name.startswith("in") else inst.args
    index = int(name[2:] if name.startswith("in") else name[3:])
    return seq[index] if index < len(seq) else _MISSING


def set_parameter(inst: OperatorInstance, name: str, value: Any) -> OperatorInstance:
    if name.startswith("kw:"):
        return replace(inst, kwargs={**inst.kwargs, name[3:]: value})
    if name.startswith("in"):
        i = int(name[2:])
        return replace(inst, inputs=(*inst.inputs[:i], value, *inst.inputs[i + 1 :]))
    i = int(name[3:])
    return replace(inst, args=(*inst.args[:i], value, *inst.args[i + 1 :]))


def drop_parameter(inst: OperatorInstance, name: str) -> OperatorInstance | None:
    if name.startswith("kw:"):
        return replace(inst, kwargs={k: v for k, v in inst.kwargs.items() if k != name[3:]})
    if name.startswith("in"):
        if inst.kind is not InstanceKind.ONNX_NODE:
            return None
        return set_parameter(inst, name, None)  # an omitted optional ONNX input
    i = int(name[3:])
    return replace(inst, args=inst.args[:i]) if i == len(inst.args) - 1 else None


# ---- what can be done ------------------------------------------------------------------------
def _is_int(value: Any) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def _is_float(value: Any) -> bool:
    return isinstance(value, (float, np.floating))


def _int_sequence(value: Any) -> bool:
    return isinstance(value, (list, tuple)) and 0 < len(value) <= 8 and all(_is_int(v) for v in value)


def _value_kinds(value: Any, can_swap: bool, shared_shape: bool = False) -> list[str]:
    if isinstance(value, (bool, np.bool_)):
        return ["bool:flip"]
    if _is_int(value):
        return [k for k, t in INT_TARGETS.items() if t != int(value)]
    if _is_float(value):
        return list(FLOAT_KINDS)
    if isinstance(value, (str, DType, EnumValue, CallableRef)):
        return ["enum:swap"] if can_swap else []
    if _int_sequence(value):
        return ["seq:" + k for k in INT_TARGETS]
    if is_tensor(value):
        kinds = ["tensor:rank", "tensor:dtype"]
        if len(value.shape) > 0:
            kinds.append("tensor:zero")
        kinds += [k + "-all" for k in kinds if shared_shape and k != "tensor:dtype"]
        kinds.append("tensor:dtype-new")
        if 0 < math.prod(2 if d is None else d for d in value.shape) <= MAX_EXACT:
            kinds += [f"tensor:values:{c}" for c in _value_classes(tensor_dtype(value))]
        return kinds
    return []


def _value_classes(dtype: str) -> list[str]:
    if dtype == "bool":
        return ["zeros", "ties"]
    if dtype.startswith(("uint",)):
        return [c for c in VALUE_CLASSES if c not in ("negative", "special")]
    if dtype.startswith(("int",)):
        return [c for c in VALUE_CLASSES if c != "special"]
    if dtype.startswith("complex"):
        return ["zeros", "ties"]
    return list(VALUE_CLASSES)


def _window_sizes(inst: OperatorInstance) -> list[int]:
    """The window sizes (kernel, stride, dilation integers) the instance holds."""
    sizes: list[int] = []
    for name, value in named_parameters(inst):
        if not any(name.split(":")[-1] == w or name.endswith(w) for w in WINDOW_PARAMETERS):
            continue
        items = value if isinstance(value, (list, tuple)) else [value]
        sizes += [int(v) for v in items if _is_int(v) and 0 < int(v) <= 64]
    return sorted(set(sizes))


def mutation_choices(
    inst: OperatorInstance, profile: ApiProfile, related: list[ApiProfile] | None = None
) -> list[Choice]:
    """Every (parameter, kind) that could apply to ``inst``, in a fixed order."""
    choices: list[Choice] = []
    present = dict(named_parameters(inst))
    shapes = Counter(tuple(v.shape) for v in present.values() if is_tensor(v))
    for name, value in present.items():
        prof = profile.parameter(name)
        if value is None:
            if prof is not None and prof.values:
                choices.append(Choice(name, "optional:present"))
            continue
        can_swap = prof is not None and bool(prof.other_values(value))
        shared = is_tensor(value) and shapes[tuple(value.shape)] > 1
        choices.extend(Choice(name, kind) for kind in _value_kinds(value, can_swap, shared))
        if profile.absent_in_some(name) and drop_parameter(inst, name) is not None:
            choices.append(Choice(name, "optional:absent"))
        if related and _borrowable(name, value, profile, related):
            choices.append(Choice(name, "borrow"))
    for name in sorted(profile.parameters):
        if name.startswith("kw:") and name not in present and profile.parameters[name].values:
            choices.append(Choice(name, "optional:present"))
    if _window_sizes(inst):
        choices.extend(
            Choice(name, "tensor:spatial") for name, value in present.items() if is_tensor(value) and len(value.shape) >= 3
        )
    return choices


def _borrowable(name: str, value: Any, profile: ApiProfile, related: list[ApiProfile]) -> list[Any]:
    own = profile.parameter(name)
    own_partitions = own.partitions if own is not None else set()
    tensor = is_tensor(value)
    found: list[Any] = []
    for other in related:
        for other_name in corresponding_parameters(name):
            prof = other.parameter(other_name)
            if prof is None:
                continue
            for v in prof.values:
                if is_tensor(v) != tensor or partition(v) in own_partitions:
                    continue
                found.append(v)
            break
    return found


# ---- doing it --------------------------------------------------------------------------------
def _float_target(kind: str, value: float) -> float:
    if kind == "float:0":
        return 0.0
    if kind == "float:negative":
        return -abs(float(value)) if value and math.isfinite(value) else -1.5
    if kind == "float:tiny":
        return 1e-30
    return 1e30


def _same_type(template: Any, value: Any) -> Any:
    """Keep a numpy scalar a numpy scalar of its dtype (an ONNX FLOAT attribute stays a float)."""
    if isinstance(template, np.generic):
        with np.errstate(over="ignore"):
            return np.array(value).astype(template.dtype)[()]
    return value


def _value_range(value: np.ndarray | TensorSpec) -> tuple[float, float]:
    if isinstance(value, TensorSpec):
        return value.low, value.high
    arr = np.asarray(value)
    if arr.size == 0 or arr.dtype.kind not in "iub":
        return -1.0, 1.0
    return float(arr.min()), float(arr.max())


def new_tensor(
    old: np.ndarray | TensorSpec, shape: tuple[Any, ...], dtype: str, rng: random.Random
) -> TensorSpec | None:
    """A tensor like ``old`` with another shape or dtype; None when it would be too large."""
    concrete = [2 if d is None else d for d in shape]
    if math.prod(concrete) > MAX_ELEMENTS:
        return None
    low, high = _value_range(old)
    if dtype == "bool":
        low, high = 0.0, 1.0
    elif dtype.startswith("uint"):
        low, high = max(low, 0.0), max(high, 1.0)
    return TensorSpec(dtype=dtype, shape=tuple(shape), seed=rng.randrange(1 << 31), low=low, high=high)


def _reshaped(shape: tuple[Any, ...], kind: str, rng: random.Random) -> tuple[tuple[Any, ...], str] | None:
    if kind.startswith("tensor:rank"):
        rank = rng.choice([r for r in range(MAX_RANK + 1) if r != len(shape)])
        if rank > len(shape):
            lead = tuple(rng.choice((1, 2)) for _ in range(rank - len(shape)))
            return lead + shape, f"rank {len(shape)} -> {rank}"
        return shape[len(shape) - rank :], f"rank {len(shape)} -> {rank}"
    dims = [i for i, d in enumerate(shape) if d != 0]
    if not dims:
        return None
    i = rng.choice(dims)
    return shape[:i] + (0,) + shape[i + 1 :], f"dim {i} -> 0"


def apply_mutation(
    inst: OperatorInstance,
    choice: Choice,
    profile: ApiProfile,
    rng: random.Random,
    related: list[ApiProfile] | None = None,
) -> Mutated | None:
    """Perform ``choice`` on ``inst``; the result is unchecked (the validity gate judges it)."""
    name, kind = choice.parameter, choice.kind
    value = get_parameter(inst, name)
    prof = profile.parameter(name)
    if kind == "optional:absent":
        dropped = drop_parameter(inst, name)
        return None if dropped is None else Mutated(dropped, f"{name} {kind}")
    if kind == "optional:present":
        if prof is None or not prof.values:
            return None
        new = rng.choice(prof.values)
        return Mutated(set_parameter(inst, name, new), f"{name} {kind} = {_short(new)}")
    if value is _MISSING:
        return None
    if kind == "borrow":
        options = _borrowable(name, value, profile, related or [])
        if not options:
            return None
        new = rng.choice(options)
        return Mutated(
            set_parameter(inst, name, new), f"{name} {kind} from a related operator: {_short(new)}"
        )
    if kind == "bool:flip":
        return Mutated(set_parameter(inst, name, _same_type(value, not bool(value))), f"{name} {kind}")
    if kind in INT_TARGETS:
        target = _same_type(value, INT_TARGETS[kind])
        return Mutated(set_parameter(inst, name, target), f"{name} {kind} ({value} -> {target})")
    if kind in FLOAT_KINDS:
        target = _same_type(value, _float_target(kind, float(value)))
        return Mutated(set_parameter(inst, name, target), f"{name} {kind} ({value} -> {target})")
    if kind == "enum:swap":
        if prof is None:
            return None
        others = prof.other_values(value)
        if not others:
            return None
        new = rng.choice(others)
        return Mutated(set_parameter(inst, name, new), f"{name} {kind} ({_short(value)} -> {_short(new)})")
    if kind.startswith("seq:"):
        i = rng.randrange(len(value))
        items = list(value)
        items[i] = _same_type(items[i], INT_TARGETS[kind[4:]])
        new = type(value)(items)
        return Mutated(set_parameter(inst, name, new), f"{name}[{i}] {kind}")
    if kind.startswith("tensor:values:"):
        return _redraw_values(inst, name, value, kind[len("tensor:values:") :], rng)
    if kind == "tensor:spatial":
        return _spatial(inst, name, value, rng)
    if kind.startswith("tensor:"):
        return _mutate_tensor(inst, name, value, kind, prof, rng)
    return None


def _redraw_values(inst: OperatorInstance, name: str, value: Any, cls: str, rng: random.Random) -> Mutated | None:
    """``value``'s shape and dtype with values of class ``cls`` (exact: the class is the point)."""
    from opera.values import numpy_dtype

    dtype = tensor_dtype(value)
    shape = tuple(2 if d is None else d for d in value.shape)
    size = math.prod(shape)
    if size == 0 or size > MAX_EXACT:
        return None
    try:
        dt = numpy_dtype(dtype)
    except Exception:
        return None
    gen = np.random.default_rng(rng.randrange(1 << 31))
    low, high = _value_range(value)
    floating = dtype.startswith(("float", "bfloat"))
    if cls == "zeros":
        arr = np.zeros(shape, dt)
    elif cls == "ties":
        base = np.asarray(value.materialize() if isinstance(value, TensorSpec) else value).reshape(-1)
        arr = np.full(shape, base[0] if base.size else 1, dt)
    elif cls == "small":
        arr = gen.integers(-2 if dt.kind != "u" else 0, 3, size=shape).astype(dt)
    elif cls == "negative":
        magnitude = max(abs(low), abs(high), 1.0)
        arr = (-gen.uniform(0.0, magnitude, size=shape)).astype(dt) if floating else -gen.integers(1, 4, size=shape).astype(dt)
    elif cls == "special":
        pool = np.array([np.nan, np.inf, -np.inf, -0.0, 1.0, -1.0], np.float64)
        arr = pool[gen.integers(0, len(pool), size=shape)].astype(dt)
    elif cls == "boundary":
        if floating:
            import ml_dtypes

            finfo = ml_dtypes.finfo(dt)  # numpy's finfo does not know bfloat16 and the float8 types
            picks: list[Any] = [finfo.min, finfo.max, finfo.tiny, -finfo.tiny]
        else:
            iinfo = np.iinfo(dt)
            picks = [iinfo.min, iinfo.max, 0]
        arr = np.array(picks, dtype=np.float64 if floating else dt).astype(dt)[gen.integers(0, len(picks), size=shape)]
    else:
        return None
    # np.asarray, not np.ascontiguousarray: that one makes a 0-d tensor (Clip's min) 1-d
    return Mutated(set_parameter(inst, name, np.asarray(arr, order="C")), f"{name} tensor:values:{cls} ({dtype}{list(shape)})")


def _spatial(inst: OperatorInstance, name: str, value: Any, rng: random.Random) -> Mutated | None:
    """The spatial dimensions of ``value`` set to one size around one of the instance's windows."""
    sizes = _window_sizes(inst)
    shape = tuple(value.shape)
    if not sizes or len(shape) < 3:
        return None
    window = rng.choice(sizes)
    size = rng.choice(sorted({max(window - 1, 1), window, window + 1, 1}))
    new_shape = shape[:2] + (size,) * (len(shape) - 2)
    if new_shape == shape:
        return None
    new = new_tensor(value, new_shape, tensor_dtype(value), rng)
    if new is None:
        return None
    return Mutated(set_parameter(inst, name, new), f"{name} tensor:spatial (window {window}: {list(shape)} -> {list(new_shape)})")


def _mutate_tensor(
    inst: OperatorInstance, name: str, value: Any, kind: str, prof: Any, rng: random.Random
) -> Mutated | None:
    dtype = tensor_dtype(value)
    shape = tuple(value.shape)
    if kind in ("tensor:dtype", "tensor:dtype-new"):
        known = set(prof.dtypes) if prof is not None else set()
        seen = [d for d in known if d != dtype]
        unseen = [d for d in DTYPE_POOL if d != dtype and d not in known]
        pool = (seen or [d for d in DTYPE_POOL if d != dtype]) if kind == "tensor:dtype" else unseen
        if not pool:
            return None
        new_dtype = rng.choice(pool)
        new = new_tensor(value, shape, new_dtype, rng)
        if new is None:
            return None
        return Mutated(set_parameter(inst, name, new), f"{name} {kind} ({dtype} -> {new_dtype})")
    reshaped = _reshaped(shape, kind, rng)
    if reshaped is None:
        return None
    new_shape, what = reshaped
    targets = [name]
    if kind.endswith("-all"):
        targets = [n for n, v in named_parameters(inst) if is_tensor(v) and tuple(v.shape) == shape]
    out = inst
    for target in targets:
        old = get_parameter(inst, target)
        new = new_tensor(old, new_shape, tensor_dtype(old), rng)
        if new is None:
            return None
        out = set_parameter(out, target, new)
    return Mutated(out, f"{','.join(targets)} {kind} ({what})")


def _short(value: Any) -> str:
    if is_tensor(value):
        return f"{tensor_dtype(value)}{list(value.shape)}"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
