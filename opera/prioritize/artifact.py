"""The OPERA research artifact's prioritization, rule for rule (the ``opera-artifact`` strategy).

A port of ``onnx/TCP/run_tcp.py``, ``case.py``, ``encode.py`` and ``utils.py`` of the public artifact
(ShenQingchao/OPERA, commit 926ea43) onto Opera's instances. Run on the artifact's own data it gives
the artifact's published orders position for position (``tests/test_prioritize_artifact.py``,
``benchmarks/prioritize_apfd_artifact.py``, docs/results.md, Fidelity to the artifact's
prioritization). Its rules differ from the paper's text (and from Opera's ``opera`` strategy):

* **Parameters** of an ONNX instance: every attribute of the operator's schema, with the schema's
  default where the instance does not set it, plus ``input_shape``, ``input_dtype``,
  ``output_dtype``, ``output_shape`` (the tuples of all inputs' / outputs' shapes and dtypes, one
  parameter each). Schemas are onnx 1.14.1's, the version the artifact pins
  (``_onnx_1_14_1_attributes``); operators it lacks come from the installed onnx. An operator with no
  default-domain schema (the training and ``ai.onnx.ml`` operators: the artifact skips six of them
  by name and would crash on the others) is not ordered: its instances go at the very end.
* **Abstraction** (``encode.py``): an integer becomes ``-2`` (< -1), ``-1``, ``0``, ``1``, ``2`` (> 1),
  ``None`` ``-100``; a float ``0.1`` (> 0) or ``-0.1``; bytes their text; a list each element, plus
  for a two-element list a third one (``0`` equal, ``-1``/``1`` for ints in order, else ``-1``). A value
  is one *partition*; a parameter's *selected* values start as its abstract default.
* **Distance** of a candidate to its operator's selected values: ``max(single, pair)`` where
  ``single`` is the mean over parameters of ``0`` (value already selected) or ``1/len(selected)``,
  and ``pair`` the same over parameter pairs (``1`` for a pair never seen).
* **Operator rate** ``1 - prod(compiler count / all count)`` over the operator's parameters and
  parameter pairs, counting distinct selected values among the compiler's own (equipped) tests vs
  among those and the corpus together; ``1`` for operators the compiler's tests never use.
* **Order**: the compiler's tests' values are selected first. One heap entry per operator,
  ``(-rate x its best candidate's distance, candidate position)``; pop, emit, select its values,
  push the operator's next best (first in corpus order among equals), until the popped key is ``0``
  or the operator is empty. An operator whose best first distance is ``0`` never enters the heap.
  Everything left (per operator, operators by descending equipped/corpus instance count) is
  appended in ``random.Random(1).shuffle`` order.

The artifact's quirks are kept, since they decide its order: the first instance of each operator
(corpus first, then the equipped file) is completed with the *raw* defaults, later ones with the
abstracted defaults abstracted again, so an unset ``None`` attribute is ``-100`` for the first
and ``-2`` for the rest; an operator's pair table starts from (default of one parameter, value of
the first added instance for the other); an instance lacking a required attribute has no
parameters (distance ``0``); duplicate instances are separate tests (the order lists an id once, at
its first position). One thing an Opera instance may lack: an input Opera cannot build (strings,
FNUZ floats, undefined types) is an ``Opaque`` value without its shape unless the artifact's file was
read with ``EquippedReader(opaque_shapes=True)``; without it those shapes are one unknown value here
(on the artifact's OpenVINO subject: 523 of its 1,004 tests in place, Spearman 0.995, same APFD).
Output shapes and dtypes come from the instance's recorded output signature (``outputs``).

For Keras and PyTorch instances the artifact read defaults from the library's signatures; Opera
does not import the library to prioritize, so their parameters are the recorded ones (args by
position, kwargs by name, ``input_shape``, ``input_dtype``), and a parameter an instance does not
record takes one shared "unrecorded" value. The artifact's selection scans every remaining
candidate per pick; here a lazy heap per operator gives the same picks (distances only shrink as
values are selected, so a stale distance is an upper bound).
"""

from __future__ import annotations

import ast
import copy
import heapq
import json
import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from opera.model import InstanceKind, OperatorInstance
from opera.prioritize.equipped import OPAQUE_SHAPE_MARK
from opera.values import CallableRef, DType, EnumValue, ObjectSpec, Opaque, TensorSpec

__all__ = [
    "ARTIFACT_SKIPPED_OPS",
    "NO_DEFAULT",
    "TAIL_SEED",
    "ArtifactCase",
    "ArtifactResult",
    "Selection",
    "abstract_int",
    "abstract_list",
    "abstract_params",
    "artifact_order",
    "onnx_defaults",
    "operator_rates",
    "pair_distance",
    "distance",
]

NO_DEFAULT = "no_default"
UNRECORDED = "<unrecorded>"  # the stand-in default of a Keras/PyTorch parameter (see module docstring)
UNKNOWN_SHAPE = "<opaque: shape not recorded>"
TAIL_SEED = 1  # run_tcp.py: random.seed(1); random.shuffle(tests)
# run_tcp.py preprocess_onnx_tc_from_file: "Skip the operators of aionnx_preview_training"
ARTIFACT_SKIPPED_OPS = frozenset({"LinearRegressor", "Adagrad", "Adam", "ArrayFeatureExtractor", "Binarizer", "Momentum"})
ONNX_IO_KEYS = ("input_shape", "input_dtype", "output_dtype", "output_shape")


# ---- encode.py -------------------------------------------------------------------------------
def abstract_int(v: Any) -> Any:
    """``get_abstract_int``: None -> -100, < -1 -> -2, -1/0/1 as is (``True`` stays ``True``), > 1 -> 2."""
    if v is None:
        return -100
    if v < -1:
        return -2
    if v in [-1, 0, 1]:
        return v
    if v > 1:
        return 2
    raise ValueError(f"The value '{v}' cannot be abstracted")


def _text(b: bytes) -> str:
    """``bytes.decode()``; bytes that are not UTF-8 (the artifact would stop there) keep escapes."""
    try:
        return b.decode()
    except UnicodeDecodeError:
        return b.decode("utf-8", "backslashreplace")


def abstract_list(values: Sequence[Any]) -> list[Any]:
    """``get_abstract_list``: element-wise, a first ``None`` is 2 (a batch size), later ones -100; a
    two-element list gains a third element: 0 equal, -1/1 ordered ints, -1 otherwise."""
    out: list[Any] = []
    for i, e in enumerate(values):
        if e is None:
            out.append(2 if i == 0 else -100)
        elif isinstance(e, int):
            out.append(abstract_int(e))
        elif isinstance(e, (list, tuple)):
            out.append(abstract_list(e))
        elif isinstance(e, str):
            out.append(e)
        elif isinstance(e, bytes):
            out.append(_text(e))
        elif isinstance(e, float):
            out.append(0.1 if e > 0 else -0.1)
        else:
            raise TypeError(f"Unsupported type {type(e)} in {values}!")
    if len(out) == 2:
        e0, e1 = out
        if e0 == e1:
            out.append(0)
        elif isinstance(e0, int) and isinstance(e1, int):
            out.append(-1 if e0 < e1 else (1 if e0 > e1 else 0))
        else:
            out.append(-1)
    return out


def abstract_value(v: Any) -> Any:
    """One value of ``TC.get_abstract_test_case`` (an int check first: bools are ints there)."""
    if isinstance(v, int) or v is None:
        return abstract_int(v)
    if isinstance(v, (list, tuple)):
        return abstract_list(v)
    if isinstance(v, float):
        return 0.1 if v > 0 else -0.1
    if isinstance(v, str):
        return v
    if isinstance(v, bytes):
        return _text(v)
    raise TypeError(f"The Type {type(v)} not be support yet!")


def abstract_params(params: dict[str, Any]) -> dict[str, Any]:
    return {k: abstract_value(v) for k, v in params.items()}


def complete_params(defaults: dict[str, Any], collected: dict[str, Any]) -> dict[str, Any] | None:
    """``preprocess_params``: the defaults overwritten by the collected values (keys the defaults
    lack are dropped); None when a parameter without default stays unset."""
    result = copy.deepcopy(defaults)
    keys = list(defaults)
    for k, v in collected.items():
        if k.startswith("para_") and k[5:].isdigit() and int(k[5:]) + 2 < len(keys):
            result[keys[int(k[5:]) + 2]] = v
        elif k in result:
            result[k] = v
    if NO_DEFAULT in result.values():
        return None
    return result


# ---- case.py: one test and the selected values -------------------------------------------------
@dataclass(eq=False)
class ArtifactCase:
    """The artifact's ``TC``: ``pos`` orders like its line id; ``params`` is its ``abstract_tc``."""

    pos: int
    op: str
    params: dict[str, Any]
    iid: str = ""


@dataclass
class Selection:
    """The artifact's ``TCDict``: per operator, its tests and the selected values of each parameter
    (``singles``) and parameter pair (``pairs``), as lists in insertion order (``in`` is ``==``)."""

    defaults: dict[str, dict[str, Any]]  # op -> abstract defaults
    cases: dict[str, list[ArtifactCase]] = field(default_factory=dict)
    singles: dict[str, dict[str, list[Any]]] = field(default_factory=dict)
    pairs: dict[str, dict[tuple[str, str], list[Any]]] = field(default_factory=dict)

    def add(self, tc: ArtifactCase) -> None:
        if tc.op not in self.singles:
            singles: dict[str, list[Any]] = {}
            pairs: dict[tuple[str, str], list[Any]] = {}
            seen: set[str] = set()
            for k1, v1 in self.defaults[tc.op].items():
                singles[k1] = [v1]
                for k2, v2 in tc.params.items():  # the first test's values, not the defaults
                    if k2 not in seen:
                        break
                    pairs[(k1, k2)] = [(v1, v2)]
                seen.add(k1)
            self.singles[tc.op] = singles
            self.pairs[tc.op] = pairs
        self.cases.setdefault(tc.op, []).append(tc)

    def select(self, tc: ArtifactCase) -> bool:
        """``add2selected_tc_dict``; True when some value or pair was new."""
        singles = self.singles[tc.op]
        pairs = self.pairs[tc.op]
        new = False
        seen: set[str] = set()
        items = list(tc.params.items())
        for k1, v1 in items:
            if v1 not in singles[k1]:
                singles[k1].append(v1)
                new = True
            for k2, v2 in items:
                if k2 not in seen:
                    break
                got = pairs.get((k1, k2))
                if got is None:
                    pairs[(k1, k2)] = [(v1, v2)]
                    new = True
                elif (v1, v2) not in got:
                    got.append((v1, v2))
                    new = True
            seen.add(k1)
        return new


def distance(params: dict[str, Any], singles: dict[str, list[Any]], pairs: dict[tuple[str, str], list[Any]]) -> float:
    """``TCDict.calc_distance``: max of the single and the pair distance; 0 without parameters."""
    n = len(params)
    if n == 0:
        return 0
    diff = 0.0
    for k, v in params.items():
        sel = singles[k]
        if v not in sel:
            diff += 1 if len(sel) == 0 else 1 / len(sel)
    return max(diff / n, pair_distance(params, pairs))


def pair_distance(params: dict[str, Any], pairs: dict[tuple[str, str], list[Any]]) -> float:
    """``TCDict.calc_pair_distance`` (0, not a ZeroDivisionError, for a single parameter)."""
    num_pair = len(params) * (len(params) - 1) / 2
    if num_pair == 0:
        return 0.0
    diff: float = 0
    seen: set[str] = set()
    items = list(params.items())
    for k1, v1 in items:
        for k2, v2 in items:
            if k2 not in seen:
                break
            got = pairs.get((k1, k2))
            if got is None:
                diff += 1
            elif (v1, v2) not in got:
                diff += 1 / len(got)
        seen.add(k1)
    return diff / num_pair


# ---- views: an Opera instance as the artifact's parameter dict ---------------------------------
def onnx_defaults(op_type: str) -> dict[str, Any] | None:
    """``get_onnx_op_default_args_dict``: onnx 1.14.1's table, else the installed onnx's schema
    (attributes sorted by name, as 1.14.1 lists them); None for no default-domain schema."""
    from opera.prioritize._onnx_1_14_1_attributes import ATTRIBUTES

    known = ATTRIBUTES.get(op_type)
    if known is not None:
        return dict(known)
    try:
        import onnx
        from onnx import helper
    except ImportError:  # pragma: no cover - onnx is a dependency
        return None
    try:
        schema = onnx.defs.get_schema(op_type)
    except Exception:  # onnx.defs.SchemaError: no default-domain schema
        return None
    out: dict[str, Any] = {}
    for name in sorted(schema.attributes):
        attr = schema.attributes[name]
        try:
            out[name] = helper.get_attribute_value(attr.default_value)
        except ValueError:
            out[name] = NO_DEFAULT if attr.required else None
    for key in ONNX_IO_KEYS:
        out[key] = NO_DEFAULT
    return out


def _raw(value: Any) -> Any:
    """A neutral value as the Python value the artifact's listing would have held."""
    if value is None or isinstance(value, (bool, int, float, str, bytes)):
        return value
    if isinstance(value, (list, tuple)):
        return type(value)(_raw(v) for v in value)
    if isinstance(value, np.ndarray):
        return str(value)  # the artifact recorded tensor attributes as their text
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, TensorSpec):
        return f"{value.dtype}{list(value.shape)}"
    if isinstance(value, DType):
        return value.name
    if isinstance(value, EnumValue):
        return f"{value.type}.{value.name}"
    if isinstance(value, CallableRef):
        return value.qualname
    if isinstance(value, ObjectSpec):
        return value.api
    if isinstance(value, Opaque):
        return f"opaque:{value.type}:{value.reason}"
    return repr(value)


def _nested_graph(text: str) -> str:
    """``get_graph_args(kind=2)`` then ``json.dumps``: an If/Loop/Scan body recorded as a
    ``make_graph(...)`` string becomes the JSON of its op type, shapes, dtypes and attributes
    (names dropped)."""
    from opera.prioritize.equipped import _call, _convert  # the reader's literal parser (no eval)

    call = _call(text, "make_graph")
    fields = {kw.arg: _convert(kw.value) for kw in call.keywords if kw.arg}
    out: dict[str, Any] = {"op_type": fields.get("op_type")}
    for key in ("input_shape", "input_dtype", "output_shape", "output_dtype"):
        out[key] = fields.get(key)
    for k, v in (fields.get("kwargs") or {}).items():
        out[k] = _nested_graph(v) if isinstance(v, str) and "make_graph" in v else v
    return json.dumps(out)


def _tensor_io(value: Any) -> tuple[Any, Any]:
    """(shape, dtype) of an ONNX input as the artifact's line held them."""
    if value is None:
        return None, "UNDEFINED"  # an omitted optional input
    if isinstance(value, TensorSpec):
        return list(value.shape), value.dtype
    if isinstance(value, np.ndarray):
        return list(value.shape), str(value.dtype)
    if isinstance(value, Opaque):
        # the type's name is in the reason ("tensor of STRING"); the shape only when the reader kept
        # it (EquippedReader(opaque_shapes=True): "tensor of STRING shaped [3, 4]")
        kind, mark, shape = value.reason.rpartition(OPAQUE_SHAPE_MARK)
        if mark:
            try:
                return ast.literal_eval(shape), f"opaque:{kind}"
            except (ValueError, SyntaxError):
                pass
        return UNKNOWN_SHAPE, f"opaque:{value.reason}"
    return UNKNOWN_SHAPE, f"value:{type(value).__name__}"


def _parse_signature(sig: str) -> tuple[Any, str]:
    dtype, bracket, rest = sig.partition("[")
    if not bracket:
        return None, dtype
    body = rest[:-1] if rest.endswith("]") else rest
    dims: list[Any] = []
    for d in body.split(",") if body else []:
        if d == "?":
            dims.append(None)
        else:
            try:
                dims.append(int(d))
            except ValueError:
                dims.append(d)
    return dims, dtype


def onnx_collected(inst: OperatorInstance) -> dict[str, Any]:
    """``TC.all_para_info`` before completion: the input/output shapes and dtypes, then attributes."""
    shapes, dtypes = zip(*(_tensor_io(v) for v in inst.inputs), strict=True) if inst.inputs else ((), ())
    outs = [_parse_signature(s) for s in inst.outputs or ()]
    collected: dict[str, Any] = {
        "input_shape": tuple(shapes),
        "input_dtype": tuple(dtypes),
        "output_shape": tuple(s for s, _ in outs),
        "output_dtype": tuple(d for _, d in outs),
    }
    for k, v in inst.kwargs.items():
        collected[k] = _nested_graph(v) if isinstance(v, str) and "make_graph" in v else _raw(v)
    return collected


def generic_collected(inst: OperatorInstance) -> dict[str, Any]:
    """Keras/PyTorch: ``para_i`` by position, kwargs by name, the inputs' shapes and dtypes."""
    collected: dict[str, Any] = {f"arg{i}": _raw(v) for i, v in enumerate(inst.args)}
    collected.update((f"kw:{k}", _raw(inst.kwargs[k])) for k in inst.kwargs)
    shapes: list[Any] = []
    dtypes: list[Any] = []
    for v in inst.inputs:
        if isinstance(v, (TensorSpec, np.ndarray)):
            shapes.append(list(v.shape))
            dtypes.append(str(v.dtype))
        else:
            shapes.append(UNKNOWN_SHAPE)
            dtypes.append(_raw(v))
    collected["input_shape"] = shapes
    collected["input_dtype"] = dtypes
    return collected


def op_name(inst: OperatorInstance) -> str | None:
    """The artifact's operator (``TC.graph``): the ONNX op type of the default domain; for other
    libraries the api. None for an instance the artifact would not load."""
    if inst.kind is InstanceKind.ONNX_NODE:
        domain = inst.extra.get("domain") if inst.extra else None
        if domain not in (None, "", "ai.onnx"):
            return None
        op = inst.api.split("::", 1)[-1]
        return None if op in ARTIFACT_SKIPPED_OPS else op
    return inst.api


@dataclass
class _Loader:
    """``load_tc_from_file`` for the corpus then the equipped file: shares the per-operator
    defaults (``all_graph_default_args_dict``), whose first use is the raw-defaults quirk."""

    generic_keys: dict[str, dict[str, None]]
    raw_defaults: dict[str, dict[str, Any] | None] = field(default_factory=dict)
    abstract_defaults: dict[str, dict[str, Any]] = field(default_factory=dict)

    def defaults_of(self, inst: OperatorInstance, op: str) -> dict[str, Any] | None:
        if inst.kind is InstanceKind.ONNX_NODE:
            return onnx_defaults(op)
        return dict.fromkeys(self.generic_keys[op], UNRECORDED)

    def case(self, pos: int, inst: OperatorInstance, collected: dict[str, Any]) -> ArtifactCase | None:
        op = op_name(inst)
        if op is None:
            return None
        if op not in self.raw_defaults:
            raw = self.raw_defaults[op] = self.defaults_of(inst, op)
            if raw is None:
                return None
            self.abstract_defaults[op] = abstract_params(raw)
            defaults = raw  # the first test of an operator: raw defaults (quirk)
        else:
            if self.raw_defaults[op] is None:
                return None
            defaults = self.abstract_defaults[op]
        completed = complete_params(defaults, collected)
        params = abstract_params(completed) if completed is not None else {}
        return ArtifactCase(pos=pos, op=op, params=params, iid=inst.id)


def _collect(inst: OperatorInstance) -> dict[str, Any]:
    return onnx_collected(inst) if inst.kind is InstanceKind.ONNX_NODE else generic_collected(inst)


def load_cases(
    corpus: Sequence[OperatorInstance], equipped: Sequence[OperatorInstance]
) -> tuple[list[ArtifactCase | None], list[ArtifactCase | None], dict[str, dict[str, Any]]]:
    """The artifact's tests of the corpus and of the equipped instances (None: not loaded), and
    each operator's abstract defaults (its initial selected values)."""
    collected_c = [_collect(i) for i in corpus]
    collected_e = [_collect(i) for i in equipped]
    keys: dict[str, dict[str, None]] = {}
    for inst, col in zip([*corpus, *equipped], [*collected_c, *collected_e], strict=True):
        if inst.kind is not InstanceKind.ONNX_NODE:
            keys.setdefault(inst.api, {}).update(dict.fromkeys(col))
    loader = _Loader(generic_keys=keys)
    cases_c = [loader.case(p, i, c) for p, (i, c) in enumerate(zip(corpus, collected_c, strict=True))]
    cases_e = [loader.case(p, i, c) for p, (i, c) in enumerate(zip(equipped, collected_e, strict=True))]
    return cases_c, cases_e, loader.abstract_defaults


# ---- run_tcp.py --------------------------------------------------------------------------------
def _group(cases: Iterable[ArtifactCase | None]) -> dict[str, list[ArtifactCase]]:
    out: dict[str, list[ArtifactCase]] = {}
    for c in cases:
        if c is not None:
            out.setdefault(c.op, []).append(c)
    return out


def operator_rates(
    corpus: dict[str, list[ArtifactCase]],
    equipped: dict[str, list[ArtifactCase]],
    defaults: dict[str, dict[str, Any]],
) -> dict[str, float]:
    """``1 - prod(compiler count / all count)`` over each operator's parameters and pairs (1 for an
    operator the compiler's tests do not use), multiplied in the artifact's key order."""
    sut = Selection(defaults)
    both = Selection(defaults)
    for op, tcs in equipped.items():
        if op not in corpus:
            continue
        for tc in tcs:
            both.add(tc)
            both.select(tc)
            sut.add(tc)
            sut.select(tc)
    rates: dict[str, float] = {}
    for op, tcs in corpus.items():
        r = 1.0
        for tc in tcs:
            both.add(tc)
            both.select(tc)
        if op in sut.cases:
            s_single, a_single = sut.singles[op], both.singles[op]
            for key in a_single:
                r *= 1.0 * len(s_single[key]) / len(a_single[key]) if key in s_single else 1.0 / len(a_single[key])
            s_pair, a_pair = sut.pairs[op], both.pairs[op]
            for pkey in a_pair:
                r *= 1.0 * len(s_pair[pkey]) / len(a_pair[pkey]) if pkey in s_pair else 1.0 / len(a_pair[pkey])
        else:
            r = 0
        rates[op] = 1.0 - r
    return rates


def rank_operators(corpus: dict[str, list[ArtifactCase]], equipped: dict[str, list[ArtifactCase]]) -> list[str]:
    """``TCDict.rank_layer``: descending equipped/corpus test count (0 when untested), stable."""
    ratio = {op: (len(equipped[op]) / len(tcs) if op in equipped else 0) for op, tcs in corpus.items()}
    return [op for op, _ in sorted(ratio.items(), key=lambda kv: kv[1], reverse=True)]


@dataclass
class ArtifactResult:
    order: list[ArtifactCase]  # heap phase, then the shuffled tail
    heap_count: int
    rates: dict[str, float]
    first_distance: dict[str, float]


def artifact_order(
    corpus_cases: Sequence[ArtifactCase | None],
    equipped_cases: Sequence[ArtifactCase | None],
    defaults: dict[str, dict[str, Any]],
    *,
    tail_seed: int = TAIL_SEED,
) -> ArtifactResult:
    """``run_tcp``: the heap phase, then the rest shuffled with ``random.Random(tail_seed)``."""
    corpus = _group(corpus_cases)
    equipped = _group(equipped_cases)
    order_ops = rank_operators(corpus, equipped)
    sel = Selection(defaults)
    for op in order_ops:
        for tc in corpus[op]:
            sel.add(tc)
    for op, tcs in equipped.items():
        if op in corpus:
            for tc in tcs:
                sel.select(tc)
    rates = operator_rates(corpus, equipped, defaults)

    # Lazy per-operator candidate heaps: (-distance, pos, version, case). A stale distance is an
    # upper bound (selected values only grow), so a fresh entry on top is the exact best.
    version = dict.fromkeys(corpus, 0)
    removed: set[int] = set()
    heaps: dict[str, list[tuple[float, int, int, ArtifactCase]]] = {}
    for op, tcs in corpus.items():
        h = [(-distance(tc.params, sel.singles[op], sel.pairs[op]), tc.pos, 0, tc) for tc in tcs]
        heapq.heapify(h)
        heaps[op] = h

    def best(op: str) -> tuple[ArtifactCase, float] | None:
        h = heaps[op]
        while h:
            negd, pos, ver, tc = h[0]
            if pos in removed:
                heapq.heappop(h)
                continue
            if ver == version[op]:
                return tc, -negd
            d = distance(tc.params, sel.singles[op], sel.pairs[op])
            heapq.heapreplace(h, (-d, pos, version[op], tc))
        return None

    heap: list[tuple[float, int, ArtifactCase]] = []
    first: dict[str, float] = {}
    for op in order_ops:
        b = best(op)
        assert b is not None
        tc, d = b
        first[op] = d
        if d == 0:
            continue
        heapq.heappush(heap, (-rates[op] * d, tc.pos, tc))
    out: list[ArtifactCase] = []
    while heap:
        key, _, tc = heapq.heappop(heap)
        out.append(tc)
        if sel.select(tc):
            version[tc.op] += 1
        removed.add(tc.pos)
        if key == 0:
            continue
        b = best(tc.op)
        if b is None:
            continue
        nxt, d = b
        heapq.heappush(heap, (-rates[tc.op] * d, nxt.pos, nxt))
    heap_count = len(out)
    tail = [tc for op in order_ops for tc in corpus[op] if tc.pos not in removed]
    random.Random(tail_seed).shuffle(tail)
    out.extend(tail)
    return ArtifactResult(order=out, heap_count=heap_count, rates=rates, first_distance=first)


def order_instances(
    instances: Iterable[OperatorInstance],
    equipped: Sequence[OperatorInstance],
    *,
    tail_seed: int = TAIL_SEED,
    notes: dict[str, object] | None = None,
) -> list[str]:
    """Opera ids in the artifact's order: instances the validity gate rejected (``valid is False``)
    and instances the artifact would not load go last, in corpus order; each id once."""
    corpus = list(instances)
    runnable = [i for i in corpus if i.valid is not False]
    cases_c, cases_e, defaults = load_cases(runnable, equipped)
    result = artifact_order(cases_c, cases_e, defaults, tail_seed=tail_seed)
    ids: dict[str, None] = {}
    for tc in result.order:
        ids.setdefault(tc.iid)
    skipped = [i.id for i, c in zip(runnable, cases_c, strict=True) if c is None]
    for iid in skipped:
        ids.setdefault(iid)
    for inst in corpus:
        ids.setdefault(inst.id)
    if notes is not None:
        notes.update(
            heap_phase=result.heap_count,
            shuffled_tail=len(result.order) - result.heap_count,
            not_loaded=len(skipped),
            operators=len(result.rates),
            operators_in_equipped=sum(1 for r in result.rates.values() if r < 1.0),
        )
    return list(ids)
