"""Reader for "equipped" corpora: the operator instances a compiler's OWN frontend tests exercise.

The prioritizer's operator score needs how often the compiler team already tests each operator
(``Num_DLC``; docs/design.md, Prioritize), and its parameter diversity may count the settings these tests
cover as already covered. The research artifact wrote these corpora as Python source, one instance
per line (ONNX, Keras) or per ``# test_id: N`` block (PyTorch):

- ONNX: ``make_graph(op_type='Conv', kwargs={...}, input_name=(...), input_shape=(...),
  input_dtype=('FLOAT', ...), output_name=..., output_shape=..., output_dtype=...)``. In
  ``equipped/`` files (the project's own, e.g. TVM 0.27's): one record per node; an omitted optional input has shape ``None`` and
  dtype ``'UNDEFINED'``; unknown dimensions are ``None``/``'?'``, symbolic ones their name;
  sequences/optionals are ``'SEQUENCE(FLOAT)'``/``'OPTIONAL(...)'``.
- Keras: ``layer_test(keras.layers.Conv2D, args=(...), kwargs={...}, input_shape=[...],
  input_dtype='float32')``.
- PyTorch: ``verify_model(torch.nn.Conv2d(...).eval(), input_data=[torch.randn(shape, dtype=...)])``
  (a module), or ``para_i = ...`` assignments, a ``Module`` class whose ``forward`` returns
  ``torch.nn.functional.f(args[0], para_1, ...)`` (a function; ``args[0].view(...)`` is the method
  ``torch.Tensor.view``), and ``verify_model(cls().float().eval(), input_data=para_0)``.

The text is parsed with ``ast`` and never executed. Tensors become ``TensorSpec`` (the files hold
shapes only); anything else that is not a literal becomes an ``ObjectSpec`` (a library call) or an
``Opaque`` value. Unreadable records are counted in ``EquippedReader.skipped``, not silently lost.
"""

from __future__ import annotations

import ast
import re
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from opera.model import InstanceKind, OperatorInstance, Source
from opera.values import DTYPES, DType, ObjectSpec, Opaque, TensorSpec

__all__ = ["OPAQUE_SHAPE_MARK", "EquippedReader", "read_equipped"]

SUITE = "equipped"

# ONNX TensorProto element type names -> corpus dtype names.
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

# Op types TVM 0.27's ONNX frontend tests use from the ``com.microsoft`` domain (equipped/README.md).
MICROSOFT_OPS = frozenset(
    {
        "Attention",
        "BiasGelu",
        "EmbedLayerNormalization",
        "FastGelu",
        "Gelu",
        "MatMulInteger16",
        "SkipLayerNormalization",
    }
)

_TORCH_TENSOR_FACTORIES = {"randn", "rand", "randint", "zeros", "ones", "empty", "full", "tensor"}


@dataclass
class EquippedReader:
    """Stream the instances of one equipped file; ``skipped`` counts unreadable records by reason.

    ``library`` is sniffed from the content when not given. ``microsoft_ops``: ONNX op types to put
    in the ``com.microsoft`` domain (default: ``MICROSOFT_OPS`` for files named ``tvm-0.27_*``).
    ``opaque_shapes``: an ONNX input of a type Opera cannot build (strings, FNUZ floats, undefined,
    sequences) is an ``Opaque`` value whose reason names the type only, so its recorded shape is
    lost; with ``opaque_shapes`` the reason also holds the shape (`` shaped [3, 4]``), which changes
    those instances' ids. The ``opera-artifact`` strategy reads it (the artifact's input-shape
    parameter includes such inputs).
    """

    path: Path
    library: str | None = None
    microsoft_ops: frozenset[str] | None = None
    opaque_shapes: bool = False
    skipped: Counter[str] = field(default_factory=Counter)
    records: int = 0

    def __post_init__(self) -> None:
        self.path = Path(self.path)
        if self.microsoft_ops is None:
            self.microsoft_ops = MICROSOFT_OPS if self.path.name.startswith("tvm-0.27") else frozenset()

    def __iter__(self) -> Iterator[OperatorInstance]:
        text = self.path.read_text()
        library = self.library or _sniff_library(text)
        if library == "torch":
            chunks = _torch_blocks(text)
        else:
            chunks = [
                (n, line)
                for n, line in enumerate(text.splitlines(), 1)
                if line.strip() and not line.startswith("#")
            ]
        for line_no, chunk in chunks:
            self.records += 1
            source = Source(SUITE, test=f"{self.path.name}:{line_no}", sample=self.records - 1)
            try:
                if library == "onnx":
                    inst = _onnx_record(chunk, source, self.microsoft_ops or frozenset(), self.opaque_shapes)
                elif library == "keras":
                    inst = _keras_record(chunk, source)
                else:
                    inst = _torch_record(chunk, source)
            except (SyntaxError, ValueError, KeyError, IndexError, TypeError) as exc:
                self.skipped[
                    f"{type(exc).__name__}: {str(exc).splitlines()[0][:80] if str(exc) else ''}"
                ] += 1
                continue
            yield inst


def read_equipped(paths: Iterable[str | Path]) -> Iterator[OperatorInstance]:
    """The instances of every equipped file in ``paths``, in order.

    A ``.jsonl``/``.jsonl.gz`` file is an Opera corpus harvested with ``opera harvest`` from the
    compiler's own frontend tests, read with ``opera.corpus``.
    """
    for path in paths:
        if Path(path).name.endswith((".jsonl", ".jsonl.gz", ".json.gz")):
            from opera.corpus import read_corpus

            yield from read_corpus(path)
        else:
            yield from EquippedReader(Path(path))


def _sniff_library(text: str) -> str:
    head = text.lstrip()[:200]
    if head.startswith("make_graph("):
        return "onnx"
    if head.startswith("layer_test("):
        return "keras"
    if head.startswith("# test_id") or "verify_model(" in text[:5000]:
        return "torch"
    raise ValueError("not an equipped corpus: no make_graph/layer_test/verify_model records")


# ---- literal conversion ----------------------------------------------------------------------
def _dotted(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return f"{base}.{node.attr}" if base else None
    return None


def _convert(node: ast.AST, env: dict[str, Any] | None = None) -> Any:
    """An expression of the artifact's files -> neutral value (no evaluation)."""
    env = env or {}
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        value = _convert(node.operand, env)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return -value if isinstance(node.op, ast.USub) else value
    if isinstance(node, ast.List):
        return [_convert(e, env) for e in node.elts]
    if isinstance(node, ast.Tuple):
        return tuple(_convert(e, env) for e in node.elts)
    if isinstance(node, ast.Set):
        return [_convert(e, env) for e in node.elts]
    if isinstance(node, ast.Dict):
        return {
            _convert(k, env) if k is not None else None: _convert(v, env)
            for k, v in zip(node.keys, node.values, strict=True)
        }
    if isinstance(node, ast.Name):
        if node.id in env:
            return env[node.id]
        if node.id in ("inf", "nan"):
            return float(node.id)
    name = _dotted(node)
    if name is not None:
        dtype = name.rsplit(".", 1)[-1]
        if name.startswith("torch.") and dtype in DTYPES:
            return DType(dtype)
        if name.startswith(("torch.", "keras.", "tf.", "np.", "numpy.")):
            return ObjectSpec(name) if name.rsplit(".", 1)[-1][:1].isupper() else _callable_ref(name)
    if isinstance(node, ast.Call):
        func = _dotted(node.func)
        if func == "tensor" and len(node.args) == 1:  # shapes printed as [tensor(1), tensor(3)]
            return _convert(node.args[0], env)
        if func and func.startswith("torch.") and func.rsplit(".", 1)[-1] in _TORCH_TENSOR_FACTORIES:
            return _torch_tensor(node, env)
        if func:
            return ObjectSpec(
                func,
                tuple(_convert(a, env) for a in node.args),
                {kw.arg: _convert(kw.value, env) for kw in node.keywords if kw.arg},
            )
    return Opaque("equipped", f"expression {ast.unparse(node)[:80]}")


def _callable_ref(name: str) -> Any:
    from opera.values import CallableRef

    return CallableRef(name)


def _shape(value: Any) -> tuple[int | None, ...]:
    if value is None:
        return ()
    if isinstance(value, int):
        return (value,)
    return tuple(d if isinstance(d, int) and not isinstance(d, bool) else None for d in value)


def _torch_tensor(node: ast.Call, env: dict[str, Any]) -> TensorSpec:
    """``torch.randn(shape, dtype=...)``, ``torch.randint(lo, hi, shape, dtype=...)`` -> TensorSpec."""
    func = (_dotted(node.func) or "").rsplit(".", 1)[-1]
    args = [_convert(a, env) for a in node.args]
    kwargs = {kw.arg: _convert(kw.value, env) for kw in node.keywords if kw.arg}
    dtype = kwargs.get("dtype")
    name = dtype.name if isinstance(dtype, DType) else ("int64" if func == "randint" else "float32")
    if func == "randint":
        low, high = (0, args[0]) if len(args) == 2 else (args[0], args[1])
        shape = args[-1] if len(args) >= 2 else kwargs.get("size")
        return TensorSpec(name, _shape(shape), low=float(low), high=float(high) - 1)
    if func == "tensor":
        shape = list(_nested_shape(args[0])) if args else []
        return TensorSpec(name, tuple(shape))
    shape = args[0] if len(args) == 1 and isinstance(args[0], (list, tuple)) else args or kwargs.get("size")
    return TensorSpec(name, _shape(shape))


def _nested_shape(value: Any) -> tuple[int, ...]:
    if isinstance(value, (list, tuple)):
        return (len(value), *(_nested_shape(value[0]) if value else ()))
    return ()


def _call(text: str, name: str) -> ast.Call:
    tree = ast.parse(text.strip(), mode="eval")
    call = tree.body
    if not isinstance(call, ast.Call) or _dotted(call.func) != name:
        raise ValueError(f"expected a {name}(...) call")
    return call


# ---- ONNX ------------------------------------------------------------------------------------
_ONNX_WRAPPED = re.compile(r"^(SEQUENCE|OPTIONAL)\((.*)\)$")
OPAQUE_SHAPE_MARK = " shaped "  # EquippedReader(opaque_shapes=True): "tensor of STRING shaped [3, 4]"


def _onnx_input(shape: Any, dtype: Any, opaque_shapes: bool = False) -> Any:
    if dtype in (None, "UNDEFINED", "") and shape is None:
        return None  # an omitted optional input
    if not isinstance(dtype, str):
        raise ValueError(f"bad input dtype {dtype!r}")
    shaped = f"{OPAQUE_SHAPE_MARK}{list(shape) if isinstance(shape, (list, tuple)) else shape!r}" if opaque_shapes else ""
    if _ONNX_WRAPPED.match(dtype):
        return Opaque("onnx.value", f"{dtype} input (the equipped format holds no element shapes){shaped}")
    name = _ONNX_DTYPES.get(dtype)
    if name is None:
        return Opaque("onnx.value", f"tensor of {dtype}{shaped}")
    return TensorSpec(name, _shape(shape) if shape is not None else ())


def _onnx_record(
    line: str, source: Source, microsoft_ops: frozenset[str], opaque_shapes: bool = False
) -> OperatorInstance:
    call = _call(line, "make_graph")
    fields = {kw.arg: _convert(kw.value) for kw in call.keywords if kw.arg}
    op_type = fields["op_type"]
    if not isinstance(op_type, str):
        raise ValueError("op_type is not a string")
    shapes = fields.get("input_shape") or ()
    dtypes = fields.get("input_dtype") or ()
    if len(shapes) != len(dtypes):
        raise ValueError(f"{len(shapes)} input shapes for {len(dtypes)} dtypes")
    inputs = tuple(_onnx_input(s, d, opaque_shapes) for s, d in zip(shapes, dtypes, strict=True))
    kwargs = fields.get("kwargs") or {}
    if not isinstance(kwargs, dict):
        raise ValueError("kwargs is not a dict")
    extra: dict[str, Any] = {"domain": "com.microsoft" if op_type in microsoft_ops else ""}
    extra["n_outputs"] = len(fields.get("output_name") or ()) or 1
    return OperatorInstance(
        library="onnx",
        api=f"onnx::{op_type}",
        kind=InstanceKind.ONNX_NODE,
        kwargs={str(k): v for k, v in kwargs.items()},
        inputs=inputs,
        extra=extra,
        source=source,
        outputs=_onnx_outputs(fields.get("output_shape"), fields.get("output_dtype")),
    )


def _onnx_outputs(shapes: Any, dtypes: Any) -> tuple[str, ...] | None:
    """The recorded output signature, ``("float32[2,3]", ...)`` as ``templates.output_signature``
    writes it (an unknown dimension ``?``, a symbolic one its name, an unknown shape no brackets;
    dtypes without a numpy name keep their ONNX name). Not part of the instance's identity; the
    ``opera-artifact`` strategy reads it (the artifact counts output shapes and dtypes as parameters).
    None when the record has no (or inconsistent) output fields."""
    if not isinstance(shapes, (list, tuple)) or not isinstance(dtypes, (list, tuple)) or len(shapes) != len(dtypes):
        return None
    out: list[str] = []
    for shape, dtype in zip(shapes, dtypes, strict=True):
        name = _ONNX_DTYPES.get(dtype, dtype) if isinstance(dtype, str) else repr(dtype)
        if isinstance(shape, (list, tuple)):
            dims = ",".join("?" if d is None else str(d) for d in shape)
            out.append(f"{name}[{dims}]")
        else:
            out.append(name)
    return tuple(out)


# ---- Keras -----------------------------------------------------------------------------------
def _keras_api(name: str) -> str:
    """``keras.layers.Conv2D`` as is; ``layers.X``/``tf.keras.layers.X`` -> ``keras.layers.X``."""
    tail = name.split("layers.", 1)[-1] if "layers." in name else name.rsplit(".", 1)[-1]
    return f"keras.layers.{tail}"


def _keras_record(line: str, source: Source) -> OperatorInstance:
    call = _call(line, "layer_test")
    layer = _dotted(call.args[0]) if call.args else None
    fields = {kw.arg: kw.value for kw in call.keywords if kw.arg}
    if layer is None and "layer_cls" in fields:
        layer = _dotted(fields["layer_cls"])
    if layer is None:
        raise ValueError("layer_test without a layer class")
    args = _convert(fields["args"]) if "args" in fields else ()
    kwargs = _convert(fields["kwargs"]) if "kwargs" in fields else {}
    shape = _convert(fields["input_shape"]) if "input_shape" in fields else None
    dtype = _convert(fields["input_dtype"]) if "input_dtype" in fields else "float32"
    dtype = dtype if isinstance(dtype, str) and dtype in DTYPES else "float32"
    if shape is None:
        inputs: tuple[Any, ...] = ()
    elif shape and all(isinstance(s, (list, tuple)) for s in shape):
        inputs = tuple(TensorSpec(dtype, _shape(s)) for s in shape)  # a multi-input layer
    else:
        inputs = (TensorSpec(dtype, _shape(shape)),)
    return OperatorInstance(
        library="keras",
        api=_keras_api(layer),
        kind=InstanceKind.MODULE,
        args=tuple(args) if isinstance(args, (list, tuple)) else (args,),
        kwargs={str(k): v for k, v in dict(kwargs).items()},
        inputs=inputs,
        source=source,
    )


# ---- PyTorch ---------------------------------------------------------------------------------
def _torch_blocks(text: str) -> list[tuple[int, str]]:
    """``# test_id: N`` blocks: (line number of the header, the code under it)."""
    blocks: list[tuple[int, str]] = []
    start = 0
    lines: list[str] = []
    for n, line in enumerate(text.splitlines(), 1):
        if line.startswith("# test_id"):
            if lines and any(s.strip() for s in lines):
                blocks.append((start, "\n".join(lines)))
            start, lines = n, []
        else:
            lines.append(line)
    if lines and any(s.strip() for s in lines):
        blocks.append((start, "\n".join(lines)))
    return blocks


_MODEL_METHODS = {"eval", "float", "double", "half", "train", "cpu"}


def _strip_model_methods(node: ast.AST) -> ast.AST:
    while (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in _MODEL_METHODS
        and not node.args
    ):
        node = node.func.value
    return node


def _input_index(node: ast.AST) -> int | None:
    """``args[i]`` inside ``forward(self, *args)`` -> i."""
    if (
        isinstance(node, ast.Subscript)
        and isinstance(node.value, ast.Name)
        and node.value.id == "args"
        and isinstance(node.slice, ast.Constant)
        and isinstance(node.slice.value, int)
    ):
        return node.slice.value
    return None


def _torch_record(code: str, source: Source) -> OperatorInstance:
    tree = ast.parse(code)
    env: dict[str, Any] = {}
    forwards: dict[str, ast.Call] = {}
    verify: ast.Call | None = None
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
            env[stmt.targets[0].id] = _convert(stmt.value, env)
        elif isinstance(stmt, ast.ClassDef):
            for item in ast.walk(stmt):
                if isinstance(item, ast.Return) and isinstance(item.value, ast.Call):
                    forwards[stmt.name] = item.value
                    break
        elif (
            isinstance(stmt, ast.Expr)
            and isinstance(stmt.value, ast.Call)
            and _dotted(stmt.value.func) == "verify_model"
        ):
            verify = stmt.value
    if verify is None or not verify.args:
        raise ValueError("no verify_model(...) call")
    data_node = next((kw.value for kw in verify.keywords if kw.arg == "input_data"), None)
    if data_node is None and len(verify.args) > 1:
        data_node = verify.args[1]
    data = _convert(data_node, env) if data_node is not None else []
    inputs = tuple(data) if isinstance(data, (list, tuple)) else (data,)
    model = _strip_model_methods(verify.args[0])
    if not isinstance(model, ast.Call):
        raise ValueError("verify_model of something that is not a constructor call")
    cls = _dotted(model.func) or ""
    if cls in forwards:
        return _torch_function(forwards[cls], env, inputs, source)
    return OperatorInstance(
        library="torch",
        api=cls,
        kind=InstanceKind.MODULE,
        args=tuple(_convert(a, env) for a in model.args),
        kwargs={kw.arg: _convert(kw.value, env) for kw in model.keywords if kw.arg},
        inputs=inputs,
        source=source,
    )


def _torch_function(
    call: ast.Call, env: dict[str, Any], inputs: tuple[Any, ...], source: Source
) -> OperatorInstance:
    """``forward`` returning ``torch.f(args[0], para_1, k=para_2)`` or ``args[0].m(...)``."""

    def value(node: ast.AST) -> Any:
        index = _input_index(node)
        if index is not None:
            if index >= len(inputs):
                raise IndexError(f"args[{index}] with {len(inputs)} inputs")
            return inputs[index]
        return _convert(node, env)

    args = [value(a) for a in call.args]
    if isinstance(call.func, ast.Attribute) and _input_index(call.func.value) is not None:
        api = f"torch.Tensor.{call.func.attr}"
        args.insert(0, value(call.func.value))
    else:
        api = _dotted(call.func) or ""
        if not api.startswith("torch."):
            raise ValueError(f"forward calls {ast.unparse(call.func)[:60]}")
    return OperatorInstance(
        library="torch",
        api=api,
        kind=InstanceKind.FUNCTION,
        args=tuple(args),
        kwargs={kw.arg: value(kw.value) for kw in call.keywords if kw.arg},
        source=source,
    )
