"""Output values an operator's specification leaves undefined (issue 11, defect class 6).

A compiler that returns other numbers than the library where the specification says the values are
arbitrary (``keras.ops.empty_like``), where the input is outside the operator's domain (an ONNX
``Cast`` of a float too large for the integer type: "fixed point: undefined if OOR"), or where NaN
propagation is left open (ONNX ``Max``/``Min``) has not deviated from the semantics: such a test is
``undefined``, its own outcome, never ``inconsistent`` and never silently ``pass``.

The rules are data (``[[undefined]]`` tables in ``opera/verdict/oracles.toml``): APIs by regex, a named
condition, and the specification text that makes the values undefined. A condition looks at the
instance, its inputs and the reference outputs and returns, for each output, which positions are
undefined (a boolean mask, or ``True`` for the whole output), or ``None`` when it does not hold.
Adding a condition means adding one function to ``CONDITIONS``.

A rule with ``domain = true`` says more: the instance lies outside the operator's defined domain (a
per-axis quantization scale at an opset that defines only a scalar one, a NaN clip bound, a mode
name the opset does not have), so nothing a compiler does with it is a deviation, a rejection or a
crash included. Such a test is ``undefined`` before the compiler runs (``outside_domain``). Any rule
may be limited to the ONNX opsets where the text holds: ``opsets = [first, last]``.

A rule with ``library = true`` records a known defect of the library's references themselves
(onnxruntime and ``onnx.reference`` agreeing with each other against the specification's text, so a
second reference cannot see it): a compiler that differs there is ``unstable-reference``, the
library being no judge, with the rule's reason (the upstream issue).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from opera.values import TensorSpec

__all__ = ["CONDITIONS", "SignFreeVectors", "UndefinedRule", "Undefinedness", "find_undefined", "mask_undefined", "outside_domain"]

# One entry per output: True (all values undefined), False (all defined) or a boolean mask.
OutputMasks = list[Any]


@dataclass(frozen=True)
class UndefinedRule:
    apis: tuple[re.Pattern[str], ...]
    when: str
    reason: str
    options: dict[str, Any] = field(default_factory=dict)

    @property
    def kind(self) -> str:
        """``domain``: the condition puts the instance outside the operator's domain; ``library``:
        the library's references are known to be wrong there; ``values``: some values are undefined."""
        if self.options.get("domain") is True:
            return "domain"
        return "library" if self.options.get("library") is True else "values"

    def applies_to(self, api: str, opset: int | None = None) -> bool:
        opsets = self.options.get("opsets")
        if opsets is not None and (opset is None or not opsets[0] <= opset <= opsets[1]):
            return False
        return any(p.search(api) for p in self.apis)

    def arguments_match(self, kwargs: dict[str, Any], args: Sequence[Any]) -> bool:
        """``only_if = {name = [values]}``: the rule holds only where each named argument (a
        keyword, or the positional slot ``positions`` gives it) is one of the values, e.g. a norm's
        ``ord`` of +-inf (TOML writes ``inf``). No ``only_if``: always."""
        for name, allowed in dict(self.options.get("only_if", {})).items():
            value = named_argument(name, kwargs, args, self.options)
            if value is _ABSENT or isinstance(value, bool) or not any(_same(value, a) for a in allowed):
                return False
        # ``unless = {name = [values]}``: not where a named argument is one of the values (a loss's
        # reduction="sum" of an empty input is a defined 0; its default, "mean", is not)
        for name, excluded in dict(self.options.get("unless", {})).items():
            value = named_argument(name, kwargs, args, self.options)
            if value is not _ABSENT and any(_same(value, e) for e in excluded):
                return False
        return True



_ABSENT = object()


def named_argument(name: str, kwargs: dict[str, Any], args: Sequence[Any], options: dict[str, Any]) -> Any:
    """A call's argument by name: its keyword, else the positional slot the rule's ``positions``
    gives it; ``_ABSENT`` when it was not passed."""
    if name in kwargs:
        return kwargs[name]
    position = dict(options.get("positions", {})).get(name)
    if position is None or position >= len(args):
        return _ABSENT
    return args[position]


def _same(value: Any, allowed: Any) -> bool:
    try:
        return bool(value == allowed)
    except Exception:  # an array compared with a number
        return False


@dataclass(frozen=True)
class Undefinedness:
    """What a rule found for one test: the masks and the rule's reason."""

    masks: OutputMasks
    reason: str
    whole: bool  # every value of every output is undefined (only count, shapes, dtypes are defined)


@dataclass(frozen=True)
class _Case:
    api: str
    kwargs: dict[str, Any]
    inputs: dict[str, np.ndarray]  # runtime inputs by name, in order
    reference: Sequence[np.ndarray]
    opset: int | None = None  # an ONNX instance's opset
    args: tuple[Any, ...] = ()  # a call's positional arguments (torch: tensors held as constants too)


Condition = Callable[[_Case, dict[str, Any]], OutputMasks | None]


def _always(case: _Case, options: dict[str, Any]) -> OutputMasks | None:
    return [True for _ in case.reference]


def _float_arrays(case: _Case, names: Sequence[str] | None = None) -> list[np.ndarray]:
    out = []
    for name, value in case.inputs.items():
        if names is not None and name not in names:
            continue
        arr = np.asarray(value)
        if arr.dtype.kind == "f" or arr.dtype.name in ("bfloat16", "float16"):
            out.append(arr.astype(np.float64))
    return out


def _union(masks: list[np.ndarray], shape: tuple[int, ...]) -> Any:
    """The union of per-input masks over an output of ``shape``: an elementwise mask where every
    mask broadcasts to it, else ``True`` (the op is not elementwise: one undefined element spoils
    the whole output) when any position is set, else ``False``."""
    out = np.zeros(shape, dtype=bool)
    for mask in masks:
        try:
            out = out | np.broadcast_to(mask, shape)
        except ValueError:
            if mask.any():
                return True
    return out if out.any() else False


def _integer_info(dtype: np.dtype) -> Any:
    """The integer range of ``dtype`` (numpy's integers and ml_dtypes' int4/uint4/int2/...), or None
    for a dtype that is not an integer."""
    if dtype.kind in "iu":
        return np.iinfo(dtype)
    if dtype.kind == "V" and dtype.name.startswith(("int", "uint")):
        try:
            import ml_dtypes

            return ml_dtypes.iinfo(dtype)
        except (ImportError, ValueError, TypeError):
            return None
    return None


def _float_to_int_out_of_range(case: _Case, options: dict[str, Any]) -> OutputMasks | None:
    """A float converted to an integer type it does not fit (NaN and +-Inf included)."""
    floats = _float_arrays(case)
    if not floats:
        return None
    masks: OutputMasks = []
    for ref in case.reference:
        ref = np.asarray(ref)
        info = _integer_info(ref.dtype)
        if info is None:
            masks.append(False)
            continue
        # the conversion truncates toward zero: (min - 1, max + 1) fits
        bad = [~np.isfinite(x) | (x <= float(info.min) - 1.0) | (x >= float(info.max) + 1.0) for x in floats]
        masks.append(_union(bad, ref.shape))
    return masks if any(m is not False for m in masks) else None


def _nan_input(case: _Case, options: dict[str, Any]) -> OutputMasks | None:
    """A NaN in a float input (of those named by ``inputs``, default all), where the specification
    does not say how NaN propagates."""
    nans = [np.isnan(x) for x in _float_arrays(case, options.get("inputs"))]
    if not any(m.any() for m in nans):
        return None
    return [_union(nans, np.shape(ref)) for ref in case.reference]


def _outside_value_range(case: _Case, options: dict[str, Any]) -> OutputMasks | None:
    """An input value outside the layer's declared ``value_range`` (Keras preprocessing layers), or
    outside a documented domain given as ``range = [low, high]`` in the rule."""
    bounds = options.get("range") or case.kwargs.get(options.get("kwarg", "value_range"))
    if not isinstance(bounds, (list, tuple)) or len(bounds) != 2:
        return None
    low, high = float(bounds[0]), float(bounds[1])
    outside = any(((x < low) | (x > high)).any() for x in _float_arrays(case))
    if not outside:
        for value in case.inputs.values():
            arr = np.asarray(value)
            if arr.dtype.kind in "iu" and arr.size and (arr.min() < low or arr.max() > high):
                outside = True
    return [True for _ in case.reference] if outside else None


def _input_true(case: _Case, options: dict[str, Any]) -> OutputMasks | None:
    """A boolean input (named by ``input``) that is true: e.g. ONNX Dropout's ``training_mode``."""
    value = case.inputs.get(str(options.get("input", "")))
    if value is None or not np.asarray(value).size or not bool(np.asarray(value).all()):
        return None
    outputs = options.get("outputs")
    return [bool(outputs is None or k in outputs) for k in range(len(case.reference))]


def _input_rank(case: _Case, options: dict[str, Any]) -> OutputMasks | None:
    """An input (named by ``input``, or any of ``inputs``) whose rank is not one of ``ranks``: e.g.
    a 1-D quantization scale where the opset defines a scalar one."""
    names = [str(n) for n in options.get("inputs", [])] or [str(options.get("input", ""))]
    ranks = options.get("ranks", ())
    if not any(case.inputs.get(n) is not None and np.ndim(case.inputs[n]) not in ranks for n in names):
        return None
    return [True for _ in case.reference]


def _empty_reduction(case: _Case, options: dict[str, Any]) -> OutputMasks | None:
    """A reduction whose data input (the first) is empty while its output is not: every output
    value then reduces an empty set (the zero-size dimension can only be a reduced one)."""
    data = next(iter(case.inputs.values()), None)
    if data is None or np.asarray(data).size:
        return None
    masks: OutputMasks = [bool(np.asarray(ref).size) for ref in case.reference]
    return masks if any(masks) else None


def _attribute_not_in(case: _Case, options: dict[str, Any]) -> OutputMasks | None:
    """An attribute (``attribute``) set to a value outside ``values``: e.g. a mode name that a later
    opset introduced. An attribute left out takes its default, which is in the domain."""
    name = str(options.get("attribute", ""))
    if name not in case.kwargs:
        return None
    value = case.kwargs[name]
    value = value.decode() if isinstance(value, bytes) else value
    return None if value in options.get("values", ()) else [True for _ in case.reference]


def _kwarg_not_integer(case: _Case, options: dict[str, Any]) -> OutputMasks | None:
    """A keyword argument (``kwarg``) documented as an int given a non-integral number: e.g.
    ``torch.std``'s ``correction``."""
    value = case.kwargs.get(str(options.get("kwarg", "")))
    if isinstance(value, bool) or not isinstance(value, (int, float)) or float(value).is_integer():
        return None
    return [True for _ in case.reference]


def _ranks_differ(case: _Case, options: dict[str, Any]) -> OutputMasks | None:
    """Two tensor arguments whose ranks differ where the operator requires them equal: each named
    by a positional index or a keyword (``tensors = [0, "index"]``, the keyword also looked up at
    ``positions``), e.g. torch.gather's input and index."""
    ranks = []
    for which in options.get("tensors", []):
        value = case.kwargs.get(which) if isinstance(which, str) else None
        if value is None and isinstance(which, str) and which in options.get("positions", {}):
            position = options["positions"][which]
            value = case.args[position] if position < len(case.args) else None
        elif isinstance(which, int):
            value = case.args[which] if which < len(case.args) else None
        if value is None or not hasattr(value, "shape"):
            return None
        ranks.append(len(value.shape))
    if len(ranks) < 2 or len(set(ranks)) == 1:
        return None
    return [True for _ in case.reference]


def _repeated_axes(case: _Case, options: dict[str, Any]) -> OutputMasks | None:
    """An axes list (the positional argument at ``position``, or the ``attribute``) naming one axis
    twice, negative axes counted modulo the rank of the argument at ``rank_of`` (default 0): ONNX
    Pad, Slice, Resize, CenterCropPad "Behavior is undefined if an axis is repeated"."""
    if "attribute" in options:
        axes = case.kwargs.get(str(options["attribute"]))
    else:
        position = int(options.get("position", -1))
        axes = case.args[position] if 0 <= position < len(case.args) else None
    if axes is None or isinstance(axes, (str, bytes)):
        return None
    try:
        values = [int(a) for a in np.asarray(axes).reshape(-1)]
    except (TypeError, ValueError):
        return None
    at = int(options.get("rank_of", 0))
    data = case.args[at] if at < len(case.args) else next(iter(case.inputs.values()), None)
    rank = np.ndim(data) if data is not None else 0
    if rank:
        values = [a % rank for a in values]
    if len(set(values)) == len(values):
        return None
    return [True for _ in case.reference]


def _tied_indices(case: _Case, options: dict[str, Any]) -> OutputMasks | None:
    """The index output (``indices_output``) where the value it points at (the same position of
    ``values_output``) occurs more than once in the data input (the first runtime input): which of
    the tied elements is named is not specified. Lenient: ties are looked for in the whole input,
    not only along the sorted dimension. ``unless_kwarg``: a keyword that, set to True, makes the
    order defined (``stable=True``). ``values_from = "data"``: an operator with no values output
    (``argsort``), whose indices are read along ``dim`` (keyword ``dim``, or the second positional
    argument; default -1) of the data input."""
    unless = options.get("unless_kwarg")
    if unless and case.kwargs.get(str(unless)) is True:
        return None
    values_at, indices_at = int(options.get("values_output", 0)), int(options.get("indices_output", 1))
    data = next(iter(case.inputs.values()), None)
    if data is None and case.args and isinstance(case.args[0], np.ndarray):
        data = case.args[0]  # the tensor held as a constant
    if data is None or len(case.reference) <= indices_at:
        return None
    data = np.asarray(data)
    if options.get("values_from") == "data":
        values = _values_at_indices(case, data, np.asarray(case.reference[indices_at]))
        if values is None:
            return None
    elif len(case.reference) <= values_at:
        return None
    else:
        values = np.asarray(case.reference[values_at])
    if not data.size or not values.size or values.shape != np.asarray(case.reference[indices_at]).shape:
        return None
    found, counts = np.unique(data, return_counts=True)
    tied = np.isin(values, found[counts > 1])
    if not tied.any():
        return None
    masks: OutputMasks = [False for _ in case.reference]
    masks[indices_at] = tied
    return masks


def _values_at_indices(case: _Case, data: np.ndarray, indices: np.ndarray) -> np.ndarray | None:
    """The data's values that an index output names along its ``dim`` (None: not of that form)."""
    dim = case.kwargs.get("dim", case.args[1] if len(case.args) > 1 and isinstance(case.args[1], int) else -1)
    if not isinstance(dim, int) or data.ndim == 0 or indices.shape != data.shape or indices.dtype.kind not in "iu":
        return None
    try:
        return np.take_along_axis(data, indices.astype(np.int64), axis=dim)
    except (IndexError, ValueError):
        return None


@dataclass(frozen=True)
class SignFreeVectors:
    """An output of vectors each defined only up to its sign (singular vectors, eigenvectors, the
    columns of Q): ``axis`` is the one the vector's entries run along (-2: columns, -1: rows);
    ``undefined`` marks, per vector (the output's shape without ``axis``), those with no defined
    direction at all; ``follows``: the output whose sign flips these share (a singular pair
    u_k, v_k flips together), None for the output that decides them."""

    axis: int
    undefined: np.ndarray
    follows: int | None = None


def _vectors_up_to_sign(case: _Case, options: dict[str, Any]) -> OutputMasks | None:
    """Outputs of vectors that the specification defines only up to sign (``vectors = [[output,
    axis], ...]``, the first deciding the flips the others follow). Vectors past the input's
    min(m, n) (a full_matrices / complete completion: any basis) are undefined, and so are those
    whose value (``values_output``) is repeated, or zero with ``zero_undefined`` (any basis of
    that subspace). Real outputs only (a complex vector's phase is another freedom)."""
    data = next(iter(case.inputs.values()), None)
    if data is None and case.args and hasattr(case.args[0], "shape"):
        data = case.args[0]
    if data is None or np.ndim(data) < 2:
        return None
    k = min(np.shape(data)[-2:])
    values = None
    if options.get("values_output") is not None and int(options["values_output"]) < len(case.reference):
        values = np.asarray(case.reference[int(options["values_output"])], dtype=np.float64)
    masks: OutputMasks = [False for _ in case.reference]
    first: int | None = None
    for output, axis in options.get("vectors", []):
        if output >= len(case.reference):
            return None
        ref = np.asarray(case.reference[output])
        if ref.dtype.kind not in "f" or ref.ndim < 2:
            return None
        axis = int(axis)
        count = ref.shape[-1] if axis == -2 else ref.shape[-2]
        undefined = np.zeros(ref.shape[:-2] + (count,), dtype=bool)
        undefined[..., k:] = True
        if values is not None and values.shape[:-1] == ref.shape[:-2]:
            scale = np.max(np.abs(values), axis=-1, keepdims=True) if values.size else values
            tol = 1e-4 * scale + np.finfo(ref.dtype).eps * max(np.shape(data)[-2:]) * scale
            gaps = np.abs(values[..., :, None] - values[..., None, :]) <= tol[..., None]
            repeated = gaps.sum(axis=-1) > 1
            if options.get("zero_undefined"):
                repeated = repeated | (np.abs(values) <= tol)
            n = min(count, repeated.shape[-1])
            undefined[..., :n] |= repeated[..., :n]
        masks[output] = SignFreeVectors(axis, undefined, first)
        first = output if first is None else first
    return masks if first is not None else None


def _python_int(value: Any) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


def _operand_value(value: Any) -> np.ndarray | None:
    if isinstance(value, TensorSpec):
        return value.materialize()  # what the templates build from it: the same values every time
    if isinstance(value, np.ndarray) or _python_int(value):
        return np.asarray(value)
    return None


def _binary_operands(case: _Case, swap: bool = False) -> tuple[np.ndarray, np.ndarray] | None:
    """The two operands of a binary operator: its first two runtime inputs, else its first two
    positional arguments (a tensor held as a constant, a Python integer); ``swap`` for the
    reflected forms (``x.__rpow__(y)`` is ``y ** x``)."""
    arrays = [np.asarray(v) for v in case.inputs.values()]
    first: np.ndarray | None
    second: np.ndarray | None
    if len(arrays) >= 2:
        first, second = arrays[0], arrays[1]
    elif len(case.args) >= 2:
        runtime = iter(arrays)  # an argument with no value of its own is the runtime input
        values = [_operand_value(a) for a in case.args[:2]]
        first, second = (v if v is not None else next(runtime, None) for v in values)
    else:
        return None
    if first is None or second is None:
        return None
    return (second, first) if swap else (first, second)


def _shift_count_out_of_range(case: _Case, options: dict[str, Any]) -> OutputMasks | None:
    """A bit shift by a negative count or by the shifted operand's width in bits or more, where the
    operation is the C shift whose result there is undefined or implementation-defined. Masks the
    positions."""
    operands = _binary_operands(case)
    if operands is None:
        return None
    x, count = operands
    if x.dtype.kind not in "iu" or count.dtype.kind not in "iu" or not count.size:
        return None
    bits = x.dtype.itemsize * 8
    wide = count.astype(np.int64) if count.dtype != np.uint64 else np.minimum(count, bits).astype(np.int64)
    bad = (wide < 0) | (wide >= bits)
    if not bad.any():
        return None
    return [_union([bad], np.shape(ref)) for ref in case.reference]


def _integer_zero_to_negative_power(case: _Case, options: dict[str, Any]) -> OutputMasks | None:
    """An integer power of base 0 to a negative exponent (1 / 0 in integers). Masks the positions."""
    operands = _binary_operands(case, swap=bool(options.get("swap")))
    if operands is None:
        return None
    base, exponent = operands
    if base.dtype.kind not in "iu" or exponent.dtype.kind != "i":
        return None
    bad = np.asarray((base == 0) & (exponent < 0))
    if not bad.any():
        return None
    return [_union([bad], np.shape(ref)) for ref in case.reference]


def _argument_not_positive(case: _Case, options: dict[str, Any]) -> OutputMasks | None:
    """A size argument (``argument``: a keyword, or the positional slot ``positions`` gives it) that
    is, or holds, an integer of 0 or less: e.g. a pooling ``kernel_size`` of (-1, 0), which eager
    fractional_max_pool accepts unchecked and returns -inf for."""
    value = named_argument(str(options.get("argument", "")), case.kwargs, case.args, options)
    items = value if isinstance(value, (list, tuple)) else [value]
    if not any(_python_int(v) and int(v) <= 0 for v in items):
        return None
    return [True for _ in case.reference]


CONDITIONS: dict[str, Condition] = {
    "always": _always,
    "float-to-int-out-of-range": _float_to_int_out_of_range,
    "nan-input": _nan_input,
    "outside-value-range": _outside_value_range,
    "input-true": _input_true,
    "input-rank": _input_rank,
    "attribute-not-in": _attribute_not_in,
    "empty-reduction": _empty_reduction,
    "kwarg-not-integer": _kwarg_not_integer,
    "tied-indices": _tied_indices,
    "ranks-differ": _ranks_differ,
    "repeated-axes": _repeated_axes,
    "vectors-up-to-sign": _vectors_up_to_sign,
    "shift-count-out-of-range": _shift_count_out_of_range,
    "integer-zero-to-negative-power": _integer_zero_to_negative_power,
    "argument-not-positive": _argument_not_positive,
}


def find_undefined(
    rules: Sequence[UndefinedRule],
    api: str,
    kwargs: dict[str, Any],
    inputs: dict[str, np.ndarray],
    reference: Sequence[np.ndarray],
    opset: int | None = None,
    kind: str = "values",
    args: tuple[Any, ...] = (),
) -> Undefinedness | None:
    """The first rule of ``kind`` (``UndefinedRule.kind``) for ``api`` whose condition holds on
    this test, as masks; None if none does."""
    case = _Case(api, kwargs, inputs, reference, opset, tuple(args))
    for rule in rules:
        if rule.kind != kind or not rule.applies_to(api, opset) or not rule.arguments_match(kwargs, case.args):
            continue
        masks = CONDITIONS[rule.when](case, rule.options)
        if masks is not None:
            whole = all(m is True for m in masks)
            return Undefinedness(masks, rule.reason, whole)
    return None


def outside_domain(
    rules: Sequence[UndefinedRule],
    api: str,
    kwargs: dict[str, Any],
    inputs: dict[str, np.ndarray],
    reference: Sequence[np.ndarray],
    opset: int | None = None,
    args: tuple[Any, ...] = (),
) -> str | None:
    """The reason an instance lies outside its operator's defined domain (a ``domain = true`` rule
    holds), or None."""
    found = find_undefined(rules, api, kwargs, inputs, reference, opset, kind="domain", args=args)
    return found.reason if found is not None else None


def mask_undefined(
    reference: Sequence[np.ndarray], actual: Sequence[np.ndarray], found: Undefinedness
) -> list[np.ndarray]:
    """``actual`` with its undefined positions replaced by the reference's values (so a comparison
    judges only the defined ones). Outputs whose shapes differ are left alone (a shape is defined)."""
    out = []
    flips: dict[int, np.ndarray] = {}
    for index, (ref, act, mask) in enumerate(zip(reference, actual, found.masks, strict=False)):
        ref_arr, act_arr = np.asarray(ref), np.asarray(act)
        if mask is False or ref_arr.shape != act_arr.shape:
            out.append(act_arr)
        elif isinstance(mask, SignFreeVectors):
            out.append(_aligned(ref_arr, act_arr, mask, index, flips))
        elif mask is True:
            out.append(ref_arr.astype(act_arr.dtype, copy=True) if ref_arr.dtype != act_arr.dtype else ref_arr.copy())
        else:
            merged = act_arr.copy()
            merged[mask] = ref_arr.astype(act_arr.dtype)[mask]
            out.append(merged)
    out.extend(np.asarray(a) for a in actual[len(out) :])
    return out


def _aligned(ref: np.ndarray, act: np.ndarray, mask: SignFreeVectors, index: int, flips: dict[int, np.ndarray]) -> np.ndarray:
    """``act`` with each vector's sign turned to the reference's (or to the flips of the output it
    follows) and its undefined vectors replaced by the reference's."""
    along = ref.ndim + mask.axis  # the entries' axis
    dots = np.sum(ref.astype(np.float64) * act.astype(np.float64), axis=along)
    own = np.where(dots < 0, -1.0, 1.0)
    if mask.follows is not None and mask.follows in flips:
        decided = flips[mask.follows]
        n = min(own.shape[-1], decided.shape[-1])
        own = own.copy()
        own[..., :n] = decided[..., :n]
    flips[index] = own
    merged = act * np.expand_dims(own, along).astype(act.dtype)
    undefined = np.broadcast_to(np.expand_dims(mask.undefined, along), ref.shape)
    merged[undefined] = ref[undefined].astype(act.dtype)
    return merged
