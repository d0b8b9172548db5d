"""Reduction: shrink a failing instance while the same failure persists (issue 13, item 2).

``reduce_instance`` is greedy hierarchical delta debugging over an instance's tagged values
(``opera.values``). Each pass lists *moves*, coarse before fine, and applies them one at a time to
the best instance so far; a candidate is kept when ``still_fails(candidate)`` says it shows the
same failure and it is smaller. Passes repeat until one keeps nothing (a fixed point), the time
budget or the candidate budget runs out. The moves, in pass order:

1. optional keyword arguments dropped (all at once, then one by one; ONNX attributes are the
   node's kwargs; ``extra["forward_kwargs"]`` / ``extra["call_kwargs"]`` too);
2. fewer inputs: a variadic ONNX input dropped (``Concat``, ``Sum``: the schema says which), an
   optional ONNX input omitted, an element of a list of tensors dropped (``torch.cat``, ONNX
   sequences), the last positional argument of a function dropped;
3. smaller ranks: the leading dimension dropped, of all the tensors of the highest rank together,
   then of each tensor (keeping its first, then its last sub-tensor); tensors flattened to rank 1
   (all together, then each: elementwise operators keep every value);
4. smaller dimensions: every dimension of one size set to 1 (then halved) in all tensors together
   (shapes that must agree keep agreeing), then each dimension of each tensor, keeping its first
   entries, then its last ones (a value that triggers the failure is found by bisection);
5. simpler values: a tensor's values to zeros, ones or small integers (a ``TensorSpec`` by its
   value range, a concrete array by its values; a large concrete array may become a ``TensorSpec``
   of zeros), the seed of a ``TensorSpec`` to 0;
6. float parameters written shorter (the shortest float32 spelling, one significant digit).

"Smaller" is ``(instance_size, elements in all tensors, value complexity)`` compared in that
order: the JSON length (``opera.run.execution.instance_size``) first, then fewer tensor elements
(a ``TensorSpec`` shape ``(3, 4)`` -> ``(1, 4)`` keeps the length), then simpler values (a
concrete array of zeros is as long as a random one). The key decreases strictly with every kept
candidate, so the reduction ends.

Not reduced: integer parameters and lists of them (``kernel_shape``, ``pads``, a shape tensor's
*values* other than to zeros/ones), which are not changed together with the tensors they describe;
serialized payloads (an ``ObjectSpec("onnx.TensorProto")`` input of a dtype numpy cannot hold,
subgraph bytes); ``extra`` other than the call kwargs; ``source`` (the ``test-faults`` target
reads its fault from it). The reduced instance is a new one: ``extra["reduced_from"]`` names the
original (the first one, when a reduced instance is reduced again), so its id is its own.

``still_fails_on`` is the real predicate: each candidate runs isolated like any test, on one
worker of the local executor kept for the whole reduction (a worker that dies or hangs is judged
by the executor: a native crash or timeout of the same signature still fails).
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from opera.errors import OperaError
from opera.model import InstanceKind, OperatorInstance
from opera.outcomes import Outcome, TestResult
from opera.run.execution import instance_size
from opera.run.executors import (
    Executor,
    ExecutorRequest,
    TaskOutcome,
    TestTask,
    WorkerSettings,
    prepare_executor,
)
from opera.values import ObjectSpec, TensorSpec

__all__ = [
    "DEFAULT_BUDGET_S",
    "DEFAULT_MAX_CANDIDATES",
    "BUDGET",
    "FIXED_POINT",
    "FLAKY",
    "MAX_CANDIDATES",
    "RECLASSIFIED",
    "REDUCED_FROM",
    "IsolatedPredicate",
    "Reduction",
    "reduce_instance",
    "still_fails_on",
    "tensor_elements",
]

DEFAULT_BUDGET_S = 120.0
DEFAULT_MAX_CANDIDATES = 200
# The key in ``extra`` that names the instance a reduced one came from (part of its id).
REDUCED_FROM = "reduced_from"

FIXED_POINT = "fixed point"
BUDGET = "budget"
MAX_CANDIDATES = "max candidates"
FLAKY = "flaky"
# the original's re-check got a verdict that is no failure by rule, not by chance (undefined, invalid,
# unsupported): the stored failure predates a fixed false alarm, and nothing is left to reduce
RECLASSIFIED = "reclassified"
_BY_RULE = frozenset({Outcome.UNDEFINED.value, Outcome.INVALID.value, Outcome.UNSUPPORTED.value})

# extra keys that hold call keyword arguments (torch module forward, keras layer call)
_EXTRA_KWARGS = ("forward_kwargs", "call_kwargs")
# A concrete array this large may become a TensorSpec (generated values) when that is shorter.
_SPEC_MIN_ELEMENTS = 8


@dataclass
class Reduction:
    """What a reduction did. ``reduced`` is ``original`` itself when nothing was kept (flaky, or no
    candidate still failed); otherwise a new instance with ``extra["reduced_from"]``, no validity
    verdict and no output signature (those were the original's). Sizes are ``instance_size``: the
    reduced one's counts its ``reduced_from`` note (about 40 characters)."""

    original: OperatorInstance
    reduced: OperatorInstance
    steps: list[str] = field(default_factory=list)
    candidates: int = 0  # candidates run through still_fails (the first re-check not counted)
    accepted: int = 0
    seconds: float = 0.0
    stopped_because: str = FIXED_POINT  # fixed point | budget | max candidates | flaky | reclassified | error: ...
    flaky: bool = False
    # flaky or reclassified: what the original's re-check gave ("undefined: ...")
    recheck: str = ""

    @property
    def size_before(self) -> int:
        return _size(self.original)

    @property
    def size_after(self) -> int:
        return _size(self.reduced)

    def rechecked(self, outcome: str, message: str) -> None:
        """The original did not fail when re-checked: what it was (``outcome`` and the message's
        first line). A verdict that rules give (undefined, invalid, unsupported) is no chance: the
        stored failure predates a fixed false alarm, and the reduction is ``reclassified``."""
        first = next((line.strip() for line in message.splitlines() if line.strip()), "")
        self.recheck = f"{outcome}: {first}"[:300].rstrip(": ")
        if outcome in _BY_RULE:
            self.stopped_because, self.flaky = RECLASSIFIED, False

    def summary(self) -> str:
        """One line for a report or a log."""
        if self.stopped_because == RECLASSIFIED:
            return (
                f"{self.original.id}: reclassified: today's Opera calls the original {self.recheck}; nothing"
                f" reduced ({self.seconds:.1f} s)"
            )
        if self.flaky:
            now = f" ({self.recheck})" if self.recheck else ""
            return (
                f"{self.original.id}: flaky: the original did not fail when re-checked{now}; nothing reduced"
                f" ({self.seconds:.1f} s)"
            )
        return (
            f"{self.original.id} -> {self.reduced.id}: size {self.size_before} -> {self.size_after} in "
            f"{self.accepted} step(s), {self.candidates} candidate(s), {self.seconds:.1f} s; "
            f"stopped: {self.stopped_because}"
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "original": self.original.id,
            "reduced": self.reduced.id,
            "size_before": self.size_before,
            "size_after": self.size_after,
            "steps": list(self.steps),
            "candidates": self.candidates,
            "accepted": self.accepted,
            "seconds": round(self.seconds, 3),
            "stopped_because": self.stopped_because,
            "flaky": self.flaky,
            **({"recheck": self.recheck} if self.recheck else {}),
        }


def _size(inst: OperatorInstance) -> int:
    return instance_size(inst)


# ---- paths to values inside an instance -------------------------------------------------------
# A path is (field, step, step, ...); a step is ("seq", i) into a list/tuple, ("dict", key) into a
# dict, ("oargs", i) / ("okw", key) into an ObjectSpec's args / kwargs.
Path = tuple[Any, ...]


def _is_tensor(value: Any) -> bool:
    return isinstance(value, (np.ndarray, TensorSpec))


def _roots(inst: OperatorInstance) -> Iterator[tuple[Path, Any]]:
    for i, v in enumerate(inst.inputs):
        yield ("inputs", ("seq", i)), v
    for i, v in enumerate(inst.args):
        yield ("args", ("seq", i)), v
    for k, v in inst.kwargs.items():
        yield ("kwargs", ("dict", k)), v
    for name in _EXTRA_KWARGS:
        sub = inst.extra.get(name)
        if isinstance(sub, dict):
            for k, v in sub.items():
                yield ("extra", ("dict", name), ("dict", k)), v


def _walk(path: Path, value: Any) -> Iterator[tuple[Path, Any]]:
    yield path, value
    if isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            yield from _walk((*path, ("seq", i)), v)
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from _walk((*path, ("dict", k)), v)
    elif isinstance(value, ObjectSpec):
        for i, v in enumerate(value.args):
            yield from _walk((*path, ("oargs", i)), v)
        for k, v in value.kwargs.items():
            yield from _walk((*path, ("okw", k)), v)


def _all_values(inst: OperatorInstance) -> Iterator[tuple[Path, Any]]:
    for path, value in _roots(inst):
        yield from _walk(path, value)


def _get(inst: OperatorInstance, path: Path) -> Any:
    value: Any = getattr(inst, path[0])
    for kind, key in path[1:]:
        if kind in ("seq", "dict"):
            value = value[key]
        elif kind == "oargs":
            value = value.args[key]
        else:
            value = value.kwargs[key]
    return value


def _set_in(container: Any, steps: Path, new: Any) -> Any:
    """``container`` with the value at ``steps`` replaced (``_DELETE``: removed), rebuilt not mutated."""
    (kind, key), rest = steps[0], steps[1:]
    if kind == "seq":
        items = list(container)
        item = new if not rest else _set_in(items[key], rest, new)
        if item is _DELETE:
            del items[key]
        else:
            items[key] = item
        return tuple(items) if isinstance(container, tuple) else items
    if kind == "dict":
        out = dict(container)
        item = new if not rest else _set_in(out[key], rest, new)
        if item is _DELETE:
            del out[key]
        else:
            out[key] = item
        return out
    if kind == "oargs":
        return dataclasses.replace(container, args=_set_in(container.args, (("seq", key), *rest), new))
    return dataclasses.replace(container, kwargs=_set_in(container.kwargs, (("dict", key), *rest), new))


_DELETE = object()


def _set(inst: OperatorInstance, path: Path, new: Any) -> OperatorInstance:
    field_name = path[0]
    return dataclasses.replace(inst, **{field_name: _set_in(getattr(inst, field_name), path[1:], new)})


def _label(path: Path) -> str:
    """``in0``, ``arg1``, ``kw:axis``, ``extra.forward_kwargs.mask``, ``in0.arg0[2]``."""
    field_name, first, rest = path[0], path[1], path[2:]
    if field_name == "inputs":
        text = f"in{first[1]}"
    elif field_name == "args":
        text = f"arg{first[1]}"
    elif field_name == "kwargs":
        text = f"kw:{first[1]}"
    else:
        text = f"extra.{first[1]}"
    for kind, key in rest:
        text += f"[{key}]" if kind == "seq" else f".{key}" if kind in ("dict", "okw") else f".arg{key}"
    return text


# ---- measures ---------------------------------------------------------------------------------
def _shape(value: np.ndarray | TensorSpec) -> tuple[int | None, ...]:
    return tuple(value.shape)


def _numel(value: np.ndarray | TensorSpec) -> int:
    return math.prod(2 if d is None else d for d in _shape(value))


def _complexity(value: np.ndarray | TensorSpec) -> int:
    """0 for zeros; elements that are not 0 count 1, those that are not integers 1 more."""
    if isinstance(value, TensorSpec):
        if value.low == value.high:
            return 0 if value.low == 0 else _numel(value)
        return 2 * _numel(value)
    arr = np.asarray(value)
    if arr.dtype == np.bool_:
        return int(np.count_nonzero(arr))
    try:
        as_complex = arr.astype(np.complex128)
    except (TypeError, ValueError):
        return 2 * arr.size
    with np.errstate(invalid="ignore"):
        nonzero = int(np.count_nonzero(as_complex))
        real, imag = as_complex.real, as_complex.imag
        fractional = int(np.count_nonzero((imag != 0) | ~np.isfinite(real) | (np.round(real) != real)))
    return nonzero + fractional


def tensor_elements(inst: OperatorInstance) -> int:
    """How many elements the instance's tensors hold (an unknown dimension counts 2)."""
    return sum(_numel(v) for _, v in _all_values(inst) if _is_tensor(v))


def _key(inst: OperatorInstance) -> tuple[int, int, int]:
    tensors = [v for _, v in _all_values(inst) if _is_tensor(v)]
    return _size(inst), sum(_numel(t) for t in tensors), sum(_complexity(t) for t in tensors)


# ---- moves ------------------------------------------------------------------------------------
# A move maps the current best instance to (candidate, description), or None when it does not
# apply (any more: an earlier move of the pass may have changed the instance).
Move = Callable[[OperatorInstance], tuple[OperatorInstance, str] | None]


def _tensor_paths(inst: OperatorInstance) -> list[Path]:
    return [p for p, v in _all_values(inst) if _is_tensor(v)]


Tensor = np.ndarray | TensorSpec
# A shape change: a tensor -> (the smaller tensor, a note such as "the last part") or None when it
# does not apply to that tensor. A concrete array keeps the values of the part it keeps; a
# TensorSpec keeps its seed (its values are drawn anew for the new shape).
Change = Callable[[Tensor], tuple[Tensor, str] | None]


def _fmt(shape: tuple[int | None, ...]) -> str:
    return "(" + ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else "") + ")"


def _shape_move(path: Path, change: Change) -> Move:
    def move(inst: OperatorInstance) -> tuple[OperatorInstance, str] | None:
        try:
            value = _get(inst, path)
        except (IndexError, KeyError, AttributeError):
            return None
        if not _is_tensor(value):
            return None
        made = change(value)
        if made is None:
            return None
        new, note = made
        text = f"{_label(path)}: shape {_fmt(_shape(value))} -> {_fmt(_shape(new))}{note}"
        return _set(inst, path, new), text

    return move


def _joint_move(describe: str, change: Change) -> Move:
    """The same shape change applied to every tensor it applies to, in one candidate (operands
    whose shapes must agree keep agreeing)."""

    def move(inst: OperatorInstance) -> tuple[OperatorInstance, str] | None:
        changed: list[str] = []
        out = inst
        for path in _tensor_paths(inst):
            made = change(_get(out, path))
            if made is None:
                continue
            out = _set(out, path, made[0])
            changed.append(_label(path))
        if len(changed) < 2:  # one tensor: the per-tensor moves do it
            return None
        return out, f"{describe} in {', '.join(changed)}"

    return move


def _drop_leading(last: bool = False) -> Change:
    """Rank - 1: the first (``last``: the last) sub-tensor along the leading dimension."""

    def change(value: Tensor) -> tuple[Tensor, str] | None:
        shape = _shape(value)
        if not shape or shape[0] is None:
            return None
        if isinstance(value, TensorSpec):
            return (None if last else (dataclasses.replace(value, shape=shape[1:]), ""))
        if shape[0] == 0 or (last and shape[0] < 2):  # nothing to keep / the same as the first
            return None
        return np.array(value[-1 if last else 0], dtype=value.dtype), " (the last one)" if last else ""

    return change


def _of_rank(rank: int, change: Change) -> Change:
    def of_rank(value: Tensor) -> tuple[Tensor, str] | None:
        return change(value) if len(_shape(value)) == rank else None

    return of_rank


def _flatten(value: Tensor) -> tuple[Tensor, str] | None:
    """Rank >= 2 -> rank 1, the same values in the same order (a TensorSpec too: the same seed
    draws the same flat sequence)."""
    shape = _shape(value)
    if len(shape) < 2 or None in shape:
        return None
    flat = (math.prod(d for d in shape if d is not None),)
    if isinstance(value, TensorSpec):
        return dataclasses.replace(value, shape=flat), " (flattened)"
    return np.array(value.reshape(-1), dtype=value.dtype), " (flattened)"


def _set_dim(index: int, size: int, last: bool = False) -> Change:
    """Dimension ``index`` -> ``size``: its first ``size`` entries (``last``: its last ones)."""

    def change(value: Tensor) -> tuple[Tensor, str] | None:
        shape = _shape(value)
        if index >= len(shape):
            return None
        d = shape[index]
        if d is None or d <= size:
            return None
        new_shape = (*shape[:index], size, *shape[index + 1 :])
        if isinstance(value, TensorSpec):
            return None if last else (dataclasses.replace(value, shape=new_shape), "")
        part = slice(d - size, d) if last else slice(0, size)
        kept = value[(slice(None),) * index + (part,)]
        return np.array(kept, dtype=value.dtype), " (the last part)" if last else ""

    return change


def _replace_size(old_size: int, size: int) -> Change:
    """Every dimension of ``old_size`` -> ``size`` (the first entries)."""

    def change(value: Tensor) -> tuple[Tensor, str] | None:
        shape = _shape(value)
        if old_size not in shape:
            return None
        new_shape = tuple(size if d == old_size else d for d in shape)
        if isinstance(value, TensorSpec):
            return dataclasses.replace(value, shape=new_shape), ""
        index = tuple(slice(0, size) if d == old_size else slice(None) for d in shape)
        return np.array(value[index], dtype=value.dtype), ""

    return change


def _drop_key_move(path: Path) -> Move:
    def move(inst: OperatorInstance) -> tuple[OperatorInstance, str] | None:
        try:
            _get(inst, path)
        except (KeyError, IndexError):
            return None
        return _set(inst, path, _DELETE), f"dropped {_label(path)}"

    return move


def _drop_all_kwargs(inst: OperatorInstance) -> tuple[OperatorInstance, str] | None:
    if len(inst.kwargs) < 2:
        return None
    names = ", ".join(f"kw:{k}" for k in inst.kwargs)
    return dataclasses.replace(inst, kwargs={}), f"dropped {names}"


def _onnx_formals(inst: OperatorInstance) -> tuple[list[str], int] | None:
    """The ONNX schema's input options (``Single``/``Optional``/``Variadic``) and its minimum
    input count, or None when onnx or the schema is not at hand."""
    try:
        import onnx.defs

        op_type = inst.api.split("::", 1)[1]
        domain = str(inst.extra.get("domain", "") or "")
        opset = int(inst.extra.get("opset", onnx.defs.onnx_opset_version()))
        schema = onnx.defs.get_schema(op_type, opset, domain)
    except Exception:
        return None
    options = [str(formal.option).rsplit(".", 1)[-1] for formal in schema.inputs]
    return options, int(schema.min_input)


def _strip_trailing_none(inputs: tuple[Any, ...]) -> tuple[Any, ...]:
    items = list(inputs)
    while items and items[-1] is None:
        items.pop()
    return tuple(items)


def _input_moves(inst: OperatorInstance) -> list[Move]:
    moves: list[Move] = []
    if inst.kind is not InstanceKind.ONNX_NODE:
        return moves
    formals = _onnx_formals(inst)
    n = len(inst.inputs)
    if formals is not None and formals[0] and formals[0][-1] == "Variadic":
        options, min_input = formals
        first_variadic = len(options) - 1
        for i in range(n - 1, first_variadic - 1, -1):
            moves.append(_drop_input_move(i, max(min_input, first_variadic + 1)))
    for i in range(n - 1, 0, -1):
        if formals is not None:
            options = formals[0]
            if i >= len(options) or options[i] != "Optional":
                continue
        moves.append(_omit_input_move(i))
    return moves


def _drop_input_move(index: int, keep_at_least: int) -> Move:
    def move(inst: OperatorInstance) -> tuple[OperatorInstance, str] | None:
        if index >= len(inst.inputs) or len(inst.inputs) <= keep_at_least:
            return None
        inputs = inst.inputs[:index] + inst.inputs[index + 1 :]
        return dataclasses.replace(inst, inputs=inputs), f"dropped in{index} (variadic)"

    return move


def _omit_input_move(index: int) -> Move:
    def move(inst: OperatorInstance) -> tuple[OperatorInstance, str] | None:
        if index >= len(inst.inputs) or inst.inputs[index] is None:
            return None
        inputs = _strip_trailing_none(inst.inputs[:index] + (None,) + inst.inputs[index + 1 :])
        return dataclasses.replace(inst, inputs=inputs), f"in{index}: omitted (optional input)"

    return move


def _list_moves(inst: OperatorInstance) -> list[Move]:
    """Drop an element of a list of tensors (``torch.cat``'s list, an ONNX sequence)."""
    moves: list[Move] = []
    for path, value in _all_values(inst):
        if isinstance(value, (list, tuple)) and len(value) >= 2 and all(_is_tensor(v) for v in value):
            for j in range(len(value) - 1, -1, -1):
                moves.append(_drop_element_move(path, j))
    return moves


def _drop_element_move(path: Path, index: int) -> Move:
    def move(inst: OperatorInstance) -> tuple[OperatorInstance, str] | None:
        try:
            value = _get(inst, path)
        except (IndexError, KeyError, AttributeError):
            return None
        if not isinstance(value, (list, tuple)) or len(value) < 2 or index >= len(value):
            return None
        return _set(inst, (*path, ("seq", index)), _DELETE), f"{_label(path)}: dropped item {index}"

    return move


def _drop_last_arg(inst: OperatorInstance) -> tuple[OperatorInstance, str] | None:
    """A function's trailing positional argument (``torch.sum(x, 1, True)`` -> ``torch.sum(x, 1)``)."""
    if inst.kind is not InstanceKind.FUNCTION or len(inst.args) < 2:
        return None
    return dataclasses.replace(inst, args=inst.args[:-1]), f"dropped arg{len(inst.args) - 1}"


def _value_candidates(value: np.ndarray | TensorSpec) -> list[tuple[Any, str]]:
    """Simpler versions of a tensor's values, simplest first."""
    out: list[tuple[Any, str]] = []
    if isinstance(value, TensorSpec):
        if value.dtype == "bool":  # a TensorSpec draws booleans whatever its range
            if None not in value.shape:
                shape = tuple(int(d) for d in value.shape if d is not None)
                out.append((np.zeros(shape, np.bool_), "values -> False"))
            return out
        for v, name in ((0.0, "zeros"), (1.0, "ones")):
            out.append((dataclasses.replace(value, low=v, high=v, seed=0), f"values -> {name}"))
        if value.seed != 0:
            out.append((dataclasses.replace(value, seed=0), "seed -> 0"))
        return out
    arr = value
    if arr.dtype == np.bool_:
        out.append((np.zeros_like(arr), "values -> False"))
        out.append((np.ones_like(arr), "values -> True"))
        return out
    if arr.size >= _SPEC_MIN_ELEMENTS:
        from opera.values import dtype_name

        with contextlib.suppress(Exception):
            spec = TensorSpec(dtype_name(arr.dtype), tuple(int(d) for d in arr.shape), seed=0, low=0.0, high=0.0)
            out.append((spec, "values -> zeros (generated)"))
    out.append((np.zeros_like(arr), "values -> zeros"))
    out.append((np.ones_like(arr), "values -> ones"))
    if arr.dtype.kind in ("f", "V"):  # V: bfloat16 (ml_dtypes)
        with contextlib.suppress(Exception), np.errstate(invalid="ignore"):
            small = np.clip(np.round(arr.astype(np.float64)), -4, 4)
            small = np.where(np.isfinite(small), small, 0).astype(arr.dtype)
            out.append((small, "values -> small integers"))
    return out


def _value_move(path: Path, which: int) -> Move:
    def move(inst: OperatorInstance) -> tuple[OperatorInstance, str] | None:
        try:
            value = _get(inst, path)
        except (IndexError, KeyError, AttributeError):
            return None
        if not _is_tensor(value):
            return None
        options = _value_candidates(value)
        if which >= len(options):
            return None
        new, text = options[which]
        return _set(inst, path, new), f"{_label(path)}: {text}"

    return move


def _float_candidates(x: float) -> list[float]:
    if not math.isfinite(x) or x == 0:
        return []
    out = []
    with contextlib.suppress(Exception):
        out.append(float(np.format_float_positional(np.float32(x), unique=True, trim="-")))
    out.append(float(f"{x:.1g}"))
    return [v for v in out if v != x and len(repr(v)) < len(repr(x))]


def _float_move(path: Path, which: int) -> Move:
    def move(inst: OperatorInstance) -> tuple[OperatorInstance, str] | None:
        try:
            value = _get(inst, path)
        except (IndexError, KeyError, AttributeError):
            return None
        if not isinstance(value, float) or isinstance(value, np.generic):
            return None
        options = _float_candidates(value)
        if which >= len(options):
            return None
        return _set(inst, path, options[which]), f"{_label(path)}: {value!r} -> {options[which]!r}"

    return move


def _moves(inst: OperatorInstance) -> list[Move]:
    """This pass's moves for ``inst``, coarse before fine."""
    moves: list[Move] = [_drop_all_kwargs]
    moves += [_drop_key_move(("kwargs", ("dict", k))) for k in inst.kwargs]
    for name in _EXTRA_KWARGS:
        sub = inst.extra.get(name)
        if isinstance(sub, dict):
            moves += [_drop_key_move(("extra", ("dict", name), ("dict", k))) for k in sub]
    moves += _input_moves(inst)
    moves += _list_moves(inst)
    moves.append(_drop_last_arg)

    tensors = [(p, v) for p, v in _all_values(inst) if _is_tensor(v)]
    ranks = sorted({len(_shape(v)) for _, v in tensors if len(_shape(v)) > 0}, reverse=True)
    for rank in ranks[:1]:
        moves.append(_joint_move(f"rank {rank} -> {rank - 1} (leading dim dropped)", _of_rank(rank, _drop_leading())))
    for path, value in tensors:
        if len(_shape(value)) > 0:
            moves += [_shape_move(path, _drop_leading()), _shape_move(path, _drop_leading(last=True))]
    moves.append(_joint_move("flattened", _flatten))
    moves += [_shape_move(path, _flatten) for path, _ in tensors]
    sizes = sorted({d for _, v in tensors for d in _shape(v) if d is not None and d > 1}, reverse=True)
    for s in sizes:
        moves.append(_joint_move(f"dims {s} -> 1", _replace_size(s, 1)))
        if s // 2 > 1:
            moves.append(_joint_move(f"dims {s} -> {s // 2}", _replace_size(s, s // 2)))
    for path, value in tensors:
        for i, d in enumerate(_shape(value)):
            if d is None or d <= 1:
                continue
            half = d - d // 2  # ceil(d / 2): an odd size's two halves share the middle entry
            moves += [_shape_move(path, _set_dim(i, 1)), _shape_move(path, _set_dim(i, 1, last=True))]
            if half > 1:
                moves += [_shape_move(path, _set_dim(i, half)), _shape_move(path, _set_dim(i, half, last=True))]
    for path, value in tensors:
        moves += [_value_move(path, k) for k in range(len(_value_candidates(value)))]
    for path, value in _all_values(inst):
        if isinstance(value, float) and not isinstance(value, np.generic):
            moves += [_float_move(path, k) for k in range(2)]
    return moves


# ---- the reducer ------------------------------------------------------------------------------
def _start(original: OperatorInstance) -> OperatorInstance:
    """The instance the candidates derive from: its own identity (``reduced_from``), and no
    validity verdict or output signature (they were the original's)."""
    root = original.extra.get(REDUCED_FROM, original.id)
    return dataclasses.replace(
        original,
        kwargs=dict(original.kwargs),
        extra={**original.extra, REDUCED_FROM: root},
        valid=None,
        invalid_reason=None,
        outputs=None,
    )


def _well_formed(candidate: OperatorInstance) -> bool:
    """A candidate must be an instance the corpus can hold: it round-trips through JSON."""
    try:
        back = OperatorInstance.from_json(candidate.to_json())
    except Exception:
        return False
    return back.id == candidate.id


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0][:200] if text else ''}"


def reduce_instance(
    inst: OperatorInstance,
    still_fails: Callable[[OperatorInstance], bool],
    *,
    budget_s: float = DEFAULT_BUDGET_S,
    max_candidates: int = DEFAULT_MAX_CANDIDATES,
    rechecks: int = 1,
) -> Reduction:
    """Shrink ``inst`` while ``still_fails`` holds (see the module docstring).

    ``still_fails`` is asked about ``inst`` itself first, up to ``rechecks`` times until it says
    yes: when it never does, the failure is flaky and nothing is reduced (``Reduction.flaky``; a
    failure that shows only sometimes, such as uninitialized output, may need a few). Each
    candidate is asked once: one that fails only sometimes may be refused, never wrongly kept.
    ``budget_s`` bounds the wall time (checked before each
    candidate: one slow candidate may overrun it), ``max_candidates`` the candidates tried; either
    way the best instance so far is kept. An exception from ``still_fails`` stops the reduction
    with the best so far (``stopped_because = "error: ..."``)."""
    started = time.monotonic()
    result = Reduction(original=inst, reduced=inst)

    def finish(reason: str) -> Reduction:
        result.stopped_because = reason
        result.seconds = time.monotonic() - started
        return result

    fails = False
    for _ in range(max(1, rechecks)):
        try:
            fails = bool(still_fails(inst))
        except Exception as exc:
            return finish(f"error: {_one_line(exc)}")
        if fails:
            break
    if not fails:
        result.flaky = True
        return finish(FLAKY)

    best = _start(inst)
    best_key = _key(best)
    tried: set[str] = set()
    while True:
        kept_this_pass = 0
        for move in _moves(best):
            if result.candidates >= max_candidates:
                return finish(MAX_CANDIDATES)
            if time.monotonic() - started >= budget_s:
                return finish(BUDGET)
            try:
                made = move(best)
            except Exception:  # a move that does not fit this value (an odd shape): not a candidate
                made = None
            if made is None:
                continue
            candidate, description = made
            if candidate.id in tried or _key(candidate) >= best_key or not _well_formed(candidate):
                continue
            tried.add(candidate.id)
            result.candidates += 1
            try:
                fails = bool(still_fails(candidate))
            except Exception as exc:
                return finish(f"error: {_one_line(exc)}")
            if fails:
                best, best_key = candidate, _key(candidate)
                result.reduced = best
                result.steps.append(description)
                result.accepted += 1
                kept_this_pass += 1
        if kept_this_pass == 0:
            return finish(FIXED_POINT)


# ---- the real predicate: each candidate runs isolated, like any test --------------------------
class IsolatedPredicate:
    """``still_fails`` for a real target: each candidate is a test on a worker of the local
    executor, which stays up for the whole reduction (``close`` it, or use ``with``). A candidate
    still fails when its result's signature is ``signature`` (a crash the target's fallback
    pipeline masked counts under its own signature too)."""

    def __init__(
        self,
        target_name: str,
        signature: str,
        *,
        timeout_s: float = 60.0,
        settings: WorkerSettings | None = None,
        reproducer_dir: str | None = None,
        executor: str = "local",
    ) -> None:
        from opera.run.targets import get_target

        target = get_target(target_name)
        reason = target.availability()
        if reason is not None:
            raise OperaError(f"target {target_name} is not available here: {reason}")
        self.target_name = target_name
        self._signature = signature
        self.mismatch: frozenset[str] | None = None  # how the first matching failure differed
        # what computed the expected outputs of the instance being reduced (the first one run):
        # a candidate whose reference is another one (ONNX: onnx.reference, because onnxruntime
        # refuses the candidate, often as invalid) fails for another reason, not the same defect
        self.reference: str | None = None
        base = settings if settings is not None else WorkerSettings()
        if settings is None or base.max_rss_bytes is None:
            from opera.run.executors.local import default_max_rss_bytes

            base = dataclasses.replace(base, max_rss_bytes=default_max_rss_bytes(1))
        # by default no reproducer per candidate (the caller has one written for the reduced
        # instance: a predicate with ``reproducer_dir``, ``run_task(reduced).reproducer``)
        self.settings = dataclasses.replace(
            base,
            timeout_s=timeout_s,
            warmup_timeout_s=max(base.warmup_timeout_s, timeout_s),
            reproducer_dir=reproducer_dir,
        )
        self._factory = prepare_executor(executor, ExecutorRequest(targets={target_name: target}, workers=1))
        self._executor: Executor | None = None
        self._seq = 0
        self.results: list[TestResult] = []  # every candidate's result, in order

    def run_task(self, inst: OperatorInstance) -> TaskOutcome:
        """Run ``inst`` as a test on this target, isolated in the worker; its outcome (with the
        path of the reproducer the worker wrote, when the predicate has a ``reproducer_dir`` and
        the test failed in Python; a worker that died writes none)."""
        if self._executor is None:
            self._executor = self._factory(1, self.settings)
        self._seq += 1
        seq = self._seq
        self._executor.submit(TestTask(seq, inst, self.target_name))
        while True:
            for outcome in self._executor.poll(0.5):
                if outcome.task.seq == seq and outcome.task.kind == "test" and outcome.result is not None:
                    self.results.append(outcome.result)
                    return outcome
            if self._executor.in_flight() == 0:
                raise OperaError(f"the executor lost the test of {inst.id} on {self.target_name}")

    def run(self, inst: OperatorInstance) -> TestResult:
        """The test's result for ``inst`` on this target."""
        result = self.run_task(inst).result
        assert result is not None
        return result

    @property
    def signature(self) -> str:
        return self._signature

    @signature.setter
    def signature(self, value: str) -> None:
        """Another failure to reduce for: the reference and the mismatch seen first are forgotten too."""
        self._signature, self.reference, self.mismatch = value, None, None

    def matches(self, result: TestResult) -> bool:
        reference = result.extra.get("reference")
        if self.reference is None:
            self.reference = reference
        elif reference != self.reference:
            return False
        if result.signature == self.signature:
            # an inconsistency's signature names only the converters: a candidate must also
            # differ the way the first one did (no drift from TVM's NaN != x to the TFLite
            # converter's missed infinities, which differ by "-Inf positions" instead)
            kinds = mismatch_kinds(result.message)
            if self.mismatch is None:  # the original: how it differs is what a candidate must keep
                self.mismatch = kinds
                return True
            if not self.mismatch:  # a crash, or a message without output mismatches: nothing to keep
                return True
            return bool(kinds) and kinds <= self.mismatch
        masked = result.extra.get("masked_crash")
        return isinstance(masked, dict) and masked.get("signature") == self.signature

    def __call__(self, inst: OperatorInstance) -> bool:
        return self.matches(self.run(inst))

    def close(self) -> None:
        if self._executor is not None:
            self._executor.close()
            self._executor = None

    def __enter__(self) -> IsolatedPredicate:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


_MISMATCH = re.compile(r"output \d+: (shape|dtype|NaN positions|[+-]Inf positions|distance|not comparable)")


def mismatch_kinds(message: str) -> frozenset[str]:
    """How an inconsistency's outputs differed, from its message ("output 0: NaN positions differ
    ..."): shape, dtype, NaN positions, +Inf/-Inf positions, distance, not comparable; also
    "output count". Empty for other failures."""
    found = set(_MISMATCH.findall(message))
    if message.startswith("output count differs"):
        found.add("output count")
    return frozenset(found)


def still_fails_on(
    target_name: str,
    signature: str,
    *,
    timeout_s: float = 60.0,
    settings: WorkerSettings | None = None,
    reproducer_dir: str | None = None,
) -> IsolatedPredicate:
    """The real ``still_fails`` for ``reduce_instance``: does a candidate, run on ``target_name``
    as ``opera run`` runs a test, fail with ``signature``? ``settings`` are the run's worker
    settings (seed, oracle and unsupported configs); the timeout is ``timeout_s``. Close it when
    the reduction is done (``with still_fails_on(...) as still_fails: ...``). ``signature`` may be
    changed between reductions (one worker for several signatures of a target)."""
    return IsolatedPredicate(
        target_name, signature, timeout_s=timeout_s, settings=settings, reproducer_dir=reproducer_dir
    )
