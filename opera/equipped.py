"""Equipped corpora: the operator instances a compiler's OWN frontend tests exercise (DESIGN.md s. 9).

The prioritizer needs them for the operator score (``Num_DLC``: how often the compiler team already
tests an operator) and, optionally, to count the parameter partitions those tests exercise as
covered before the first pick.

Two inputs are accepted:

* Opera's own corpus format (JSON Lines, optionally gzipped): a corpus harvested with
  ``opera harvest`` from the compiler's frontend test suite. Read with ``opera.corpus``.
* The research artifact's line format, one Python call per record (``../opera-artifact/*/data/
  *_equipped_*.txt``, ``../equipped/*.txt``):

  - ONNX: ``make_graph(op_type='Pad', kwargs={...}, input_name=(...), input_shape=(...),
    input_dtype=(...), output_name=..., ...)``; one line per node (newer files) or per test graph;
  - Keras: ``layer_test(keras.layers.Conv2D, args=(...), kwargs={...}, input_shape=[...],
    input_dtype='float32')``;
  - PyTorch: blocks opened by ``# test_id: N`` holding ``para_k = ...`` assignments, an optional
    ``class X(Module)`` whose ``forward`` returns one ``torch.nn.functional`` call, and a
    ``verify_model(...)`` call.

  Records are parsed with ``ast`` and ``ast.literal_eval``: the files are data, never executed.
  Tensors become ``TensorSpec`` (shape + dtype); a dimension that is unknown or symbolic becomes
  ``None``; values that cannot be represented (sequence inputs, string tensors, quantized dtypes)
  become ``Opaque``. A record that cannot be parsed at all is counted in ``EquippedCorpus.skipped``
  with its line and reason, never silently dropped.
"""

from __future__ import annotations

import ast
import os
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from opera.corpus import read_corpus
from opera.errors import OperaError
from opera.model import InstanceKind, OperatorInstance, Source
from opera.values import DTYPES, DType, Opaque, TensorSpec

__all__ = ["EquippedCorpus", "EquippedError", "SkippedRecord", "iter_equipped", "read_equipped"]

EQUIPPED_SUITE = "equipped"

# ONNX TensorProto type names (as the artifact writes them) -> corpus dtype names.
_ONNX_DTYPES = {
    "FLOAT": "float32",
    "DOUBLE": "float64",
    "FLOAT16": "float16",
    "BFLOAT16": "bfloat16",
    "INT8": "int8",
    "INT16": "int16",
    "INT32": "int32",
    "INT64": "int64",
    "UINT8": "uint8",
    "UINT16": "uint16",
    "UINT32": "uint32",
    "UINT64": "uint64",
    "BOOL": "bool",
    "COMPLEX64": "complex64",
    "COMPLEX128": "complex128",
    "FLOAT8E4M3FN": "float8_e4m3fn",
    "FLOAT8E5M2": "float8_e5m2",
}

# Op types of the tvm-0.27 equipped file that live in the com.microsoft domain (its README); the
# line format does not carry the domain.
_MICROSOFT_OPS = frozenset(
    {"Attention", "BiasGelu", "EmbedLayerNormalization", "FastGelu", "Gelu", "MatMulInteger16", "SkipLayerNormalization"}
)


class EquippedError(OperaError):
    """An equipped-corpus file that is missing or in no known format."""


@dataclass(frozen=True)
class SkippedRecord:
    line: int
    reason: str


@dataclass
class EquippedCorpus:
    """The instances of one equipped file, plus the records that could not be parsed."""

    path: Path
    library: str
    instances: list[OperatorInstance] = field(default_factory=list)
    skipped: list[SkippedRecord] = field(default_factory=list)

    def op_counts(self) -> Counter[str]:
        """``Num_DLC`` per api name."""
        return Counter(inst.api for inst in self.instances)


class _Unsupported(Exception):
    """A record (or a value inside one) this reader cannot represent."""


# ---- format detection -----------------------------------------------------------------------


def _detect(path: Path) -> str:
    if path.name.endswith((".jsonl", ".jsonl.gz", ".json", ".gz")):
        return "corpus"
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            s = line.strip()
            if not s:
                continue
            if s.startswith("{"):
                return "corpus"
            if s.startswith("make_graph("):
                return "onnx"
            if s.startswith("layer_test("):
                return "keras"
            if s.startswith(("# test_id", "para_", "verify_model(", "class ")):
                return "torch"
            break
    raise EquippedError(f"{path}: not an equipped corpus (expected make_graph(...), layer_test(...), '# test_id' blocks or Opera JSON Lines)")


def iter_equipped(path: str | os.PathLike[str], skipped: list[SkippedRecord] | None = None) -> Iterator[OperatorInstance]:
    """Stream the instances of one equipped file; unparseable records go to ``skipped``."""
    p = Path(path)
    if not p.exists():
        raise EquippedError(f"equipped corpus not found: {p}")
    sink = skipped if skipped is not None else []
    fmt = _detect(p)
    if fmt == "corpus":
        yield from read_corpus(p)
    elif fmt == "onnx":
        yield from _read_lines(p, _onnx_record, sink)
    elif fmt == "keras":
        yield from _read_lines(p, _keras_record, sink)
    else:
        yield from _read_torch(p, sink)


def read_equipped(path: str | os.PathLike[str]) -> EquippedCorpus:
    skipped: list[SkippedRecord] = []
    instances = list(iter_equipped(path, skipped))
    library = instances[0].library if instances else ""
    return EquippedCorpus(path=Path(path), library=library, instances=instances, skipped=skipped)


def _source(path: Path, line: int) -> Source:
    return Source(suite=EQUIPPED_SUITE, test=f"{path.name}:{line}", sample=line)


def _read_lines(path: Path, parse: Any, skipped: list[SkippedRecord]) -> Iterator[OperatorInstance]:
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            text = line.strip()
            if not text or text.startswith("#"):
                continue
            try:
                call = ast.parse(text, mode="eval").body
                if not isinstance(call, ast.Call):
                    raise _Unsupported("not a call")
                yield parse(call, _source(path, lineno))
            except (SyntaxError, ValueError, _Unsupported) as exc:
                skipped.append(SkippedRecord(lineno, f"{type(exc).__name__}: {exc}"))


def _keywords(call: ast.Call) -> dict[str, ast.expr]:
    return {kw.arg: kw.value for kw in call.keywords if kw.arg is not None}


# ---- ONNX -----------------------------------------------------------------------------------


def _onnx_input(shape: Any, dtype: str) -> Any:
    if dtype == "UNDEFINED" or shape is None and dtype in ("", "UNDEFINED"):
        return None
    name = _ONNX_DTYPES.get(dtype)
    if name is None:
        return Opaque(type=f"onnx.{dtype.lower() or 'unknown'}", reason="not a numeric tensor in the equipped record")
    if shape is None:
        return Opaque(type=f"onnx.tensor({name})", reason="unknown rank in the equipped record")
    return TensorSpec(dtype=name, shape=tuple(d if isinstance(d, int) and d >= 0 else None for d in shape))


def _onnx_attribute(value: Any) -> Any:
    # The artifact wrote STRING attributes as bytes; our harvest decodes them to str.
    if isinstance(value, bytes):
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError:
            return value
    if isinstance(value, list):
        return [_onnx_attribute(v) for v in value]
    return value


def _onnx_record(call: ast.Call, source: Source) -> OperatorInstance:
    kw = _keywords(call)
    if "op_type" not in kw:
        raise _Unsupported("make_graph without op_type")
    op_type = ast.literal_eval(kw["op_type"])
    attrs = ast.literal_eval(kw["kwargs"]) if "kwargs" in kw else {}
    shapes = ast.literal_eval(kw["input_shape"]) if "input_shape" in kw else ()
    dtypes = ast.literal_eval(kw["input_dtype"]) if "input_dtype" in kw else ()
    outputs = ast.literal_eval(kw["output_name"]) if "output_name" in kw else ()
    if not isinstance(attrs, dict):
        raise _Unsupported("kwargs is not a dict")
    inputs = [_onnx_input(s, d) for s, d in zip(shapes, dtypes)]
    while inputs and inputs[-1] is None:
        inputs.pop()
    domain = "com.microsoft" if op_type in _MICROSOFT_OPS else ""
    return OperatorInstance(
        library="onnx",
        api=f"onnx::{op_type}",
        kind=InstanceKind.ONNX_NODE,
        kwargs={str(k): _onnx_attribute(v) for k, v in attrs.items()},
        inputs=tuple(inputs),
        extra={"domain": domain, "n_outputs": len(outputs)},
        source=source,
    )


# ---- Keras ----------------------------------------------------------------------------------


def _is_shape(value: Any) -> bool:
    return isinstance(value, (list, tuple)) and all(d is None or isinstance(d, int) for d in value)


def _keras_record(call: ast.Call, source: Source) -> OperatorInstance:
    if not call.args:
        raise _Unsupported("layer_test without a layer class")
    api = ast.unparse(call.args[0])
    if api.startswith("tf.keras."):
        api = api[3:]
    kw = _keywords(call)
    args = ast.literal_eval(kw["args"]) if "args" in kw else ()
    kwargs = ast.literal_eval(kw["kwargs"]) if "kwargs" in kw else {}
    shape = ast.literal_eval(kw["input_shape"]) if "input_shape" in kw else None
    dtype = ast.literal_eval(kw["input_dtype"]) if "input_dtype" in kw else "float32"
    if dtype not in DTYPES:
        raise _Unsupported(f"input dtype {dtype!r}")
    if shape is None:
        shapes: list[Any] = []
    elif _is_shape(shape):
        shapes = [shape]
    elif all(_is_shape(s) for s in shape):
        shapes = list(shape)
    else:
        raise _Unsupported(f"input_shape {shape!r}")
    return OperatorInstance(
        library="keras",
        api=api,
        kind=InstanceKind.MODULE,
        args=tuple(args),
        kwargs={str(k): v for k, v in kwargs.items()},
        inputs=tuple(TensorSpec(dtype=dtype, shape=tuple(s)) for s in shapes),
        source=source,
    )


# ---- PyTorch --------------------------------------------------------------------------------


def _read_torch(path: Path, skipped: list[SkippedRecord]) -> Iterator[OperatorInstance]:
    block: list[str] = []
    start = 1
    with open(path, encoding="utf-8") as f:
        lines = f.read().splitlines()
    for lineno, line in enumerate([*lines, "# test_id: end"], 1):
        if line.startswith("# test_id"):
            if any(b.strip() for b in block):
                try:
                    yield _torch_block("\n".join(block), _source(path, start))
                except (SyntaxError, ValueError, _Unsupported) as exc:
                    skipped.append(SkippedRecord(start, f"{type(exc).__name__}: {exc}"))
            block, start = [], lineno
        else:
            block.append(line)


def _torch_dtype(node: ast.expr | None) -> str:
    if node is None:
        return "float32"
    name = ast.unparse(node).removeprefix("torch.")
    if name not in DTYPES:
        raise _Unsupported(f"torch dtype {name}")
    return name


def _torch_shape(node: ast.expr) -> tuple[int | None, ...]:
    if not isinstance(node, (ast.List, ast.Tuple)):
        raise _Unsupported(f"tensor shape {ast.unparse(node)}")
    dims: list[int | None] = []
    for elt in node.elts:
        if isinstance(elt, ast.Call) and ast.unparse(elt.func) == "tensor" and elt.args:
            elt = elt.args[0]  # the artifact wrote some dims as tensor(N)
        value = ast.literal_eval(elt)
        dims.append(value if isinstance(value, int) else None)
    return tuple(dims)


def _torch_value(node: ast.expr, env: dict[str, Any]) -> Any:
    """A parameter expression -> neutral value (tensor factories -> TensorSpec)."""
    if isinstance(node, ast.Name) and node.id in env:
        return env[node.id]
    if isinstance(node, ast.Call):
        func = ast.unparse(node.func)
        kw = _keywords(node)
        try:
            if func == "torch.randn":
                if not node.args or (isinstance(node.args[0], ast.Constant) and node.args[0].value is None):
                    return None
                return TensorSpec(dtype=_torch_dtype(kw.get("dtype")), shape=_torch_shape(node.args[0]))
            if func == "torch.randint" and len(node.args) >= 3:
                low, high = ast.literal_eval(node.args[0]), ast.literal_eval(node.args[1])
                return TensorSpec(dtype=_torch_dtype(kw.get("dtype")), shape=_torch_shape(node.args[2]), low=float(low), high=float(high) - 1)
        except _Unsupported as exc:
            return Opaque(type=func, reason=str(exc))
        return Opaque(type=func, reason="call in an equipped record")
    if isinstance(node, (ast.List, ast.Tuple)):
        items = [_torch_value(e, env) for e in node.elts]
        return items if isinstance(node, ast.List) else tuple(items)
    if isinstance(node, ast.Attribute):
        text = ast.unparse(node)
        if text.startswith("torch.") and text.removeprefix("torch.") in DTYPES:
            return DType(text.removeprefix("torch."))
        return Opaque(type=text, reason="attribute in an equipped record")
    try:
        return ast.literal_eval(node)
    except ValueError:
        return Opaque(type=ast.unparse(node)[:40], reason="expression in an equipped record")


def _torch_block(text: str, source: Source) -> OperatorInstance:
    tree = ast.parse(text)
    env: dict[str, Any] = {}
    classes: dict[str, ast.Call] = {}
    verify: ast.Call | None = None
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
            env[stmt.targets[0].id] = _torch_value(stmt.value, env)
        elif isinstance(stmt, ast.ClassDef):
            for ret in ast.walk(stmt):
                if isinstance(ret, ast.Return) and isinstance(ret.value, ast.Call):
                    classes[stmt.name] = ret.value
        elif isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) and ast.unparse(stmt.value.func) == "verify_model":
            verify = stmt.value
    if verify is None or not verify.args:
        raise _Unsupported("no verify_model call")
    data_node = _keywords(verify).get("input_data")
    if data_node is None and len(verify.args) > 1:
        data_node = verify.args[1]
    data = _torch_value(data_node, env) if data_node is not None else []
    inputs = list(data) if isinstance(data, (list, tuple)) else [data]
    # Unwrap X().float().eval() / torch.nn.Conv2d(...).eval() to the innermost constructor call.
    model = verify.args[0]
    while isinstance(model, ast.Call) and isinstance(model.func, ast.Attribute) and model.func.attr in ("eval", "float", "half", "double", "train"):
        model = model.func.value
    if not isinstance(model, ast.Call):
        raise _Unsupported("model is not a constructor call")
    name = ast.unparse(model.func)
    if name in classes:
        body = classes[name]
        env_call = dict(env)

        def arg_value(node: ast.expr) -> Any:
            if isinstance(node, ast.Subscript) and ast.unparse(node.value) == "args":
                index = ast.literal_eval(node.slice)
                if not isinstance(index, int) or index >= len(inputs):
                    raise _Unsupported(f"forward uses {ast.unparse(node)} with {len(inputs)} inputs")
                return inputs[index]
            return _torch_value(node, env_call)

        if any(isinstance(a, ast.Starred) for a in body.args):
            raise _Unsupported("starred call in forward")
        return OperatorInstance(
            library="torch",
            api=ast.unparse(body.func),
            kind=InstanceKind.FUNCTION,
            args=tuple(arg_value(a) for a in body.args),
            kwargs={kw.arg: arg_value(kw.value) for kw in body.keywords if kw.arg is not None},
            source=source,
        )
    if not name.startswith("torch."):
        raise _Unsupported(f"unknown model {name}")
    return OperatorInstance(
        library="torch",
        api=name,
        kind=InstanceKind.MODULE,
        args=tuple(_torch_value(a, env) for a in model.args),
        kwargs={kw.arg: _torch_value(kw.value, env) for kw in model.keywords if kw.arg is not None},
        inputs=tuple(inputs),
        source=source,
    )
