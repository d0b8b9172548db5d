"""What a Python frontend converter plainly does not implement, read from its own source.

A converter that never names an ONNX attribute cannot honour it: ``Resize`` without ``axes`` or
``antialias``, ``IsInf`` without ``detect_negative``, ``ConvTranspose`` without ``output_shape``
(TVM 0.27, ``tvm/relax/frontend/onnx/onnx_frontend.py``). A model that sets such an attribute to
something other than its default is outside what the frontend implements: its failure is a coverage
gap, not a bug (issue 11, the judged triage). Only attributes set to a non-default value count, so
a model that spells out a default never turns a real failure into a gap.
"""

from __future__ import annotations

import functools
import inspect
import re
from collections.abc import Callable
from typing import Any

__all__ = ["sub_byte_types", "unnamed_attributes", "unread_attributes", "unread_tflite_options"]


# Attributes that change only values Opera never compares: a random operator's ``seed`` (its
# draws are not compared, issue 11 class 4), so ignoring it cannot explain a failure.
_VALUES_ONLY = frozenset({"seed"})


@functools.cache
def _source_of(cls: type, module: str) -> str:
    """The source of ``cls`` and of its bases defined in the same module (e.g. ``Pool`` for ``MaxPool``)."""
    parts = []
    for klass in cls.__mro__:
        if klass.__module__ != module or klass.__name__ == "OnnxOpConverter":
            continue
        try:
            parts.append(inspect.getsource(klass))
        except (OSError, TypeError):
            return ""  # no source: nothing can be said
    return "\n".join(parts)


def _default(op_type: str, opset: int | None, domain: str, name: str) -> tuple[bool, Any]:
    """(has a default, the default value) of an attribute in the operator's schema."""
    import onnx

    try:
        schema = onnx.defs.get_schema(op_type, opset or onnx.defs.onnx_opset_version(), domain)
    except Exception:
        return False, None
    attr = schema.attributes.get(name)
    if attr is None or attr.default_value.type == 0:  # required, or no default
        return False, None
    return True, onnx.helper.get_attribute_value(attr.default_value)


def unread_attributes(converter: type, node: Any, opset: int | None) -> list[str]:
    """``name=value`` for each attribute of the ONNX ``node`` set to a non-default value that the
    converter class's source never names (as a string literal). Empty when there is no source."""
    source = _source_of(converter, converter.__module__)
    if not source:
        return []
    return unnamed_attributes(node, opset, lambda name: re.search(rf"[\"']{re.escape(name)}[\"']", source) is not None)


def unnamed_attributes(node: Any, opset: int | None, named: Callable[[str], bool]) -> list[str]:
    """``name=value`` for each attribute of the ONNX ``node`` set to a non-default value for which
    ``named(name)`` is false: a frontend that never names an attribute cannot read it."""
    import onnx

    unread = []
    for attr in node.attribute:
        if attr.name in _VALUES_ONLY or named(attr.name):
            continue
        value = onnx.helper.get_attribute_value(attr)
        has_default, default = _default(node.op_type, opset, node.domain or "", attr.name)
        if has_default and _same(value, default):
            continue
        unread.append(f"{attr.name}={_show(value)}")
    return unread


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return list(a) == list(b)
    return bool(a == b)


def _show(value: Any) -> str:
    if isinstance(value, bytes):
        return value.decode(errors="replace")
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


# Element types narrower than a byte (ONNX packs two or four per byte).
_SUB_BYTE = ("INT2", "UINT2", "INT4", "UINT4", "FLOAT4E2M1")


def sub_byte_types(model: Any) -> list[str]:
    """The sub-byte ONNX element types a model uses: in its inputs, outputs, initializers, or as a
    node's target type (``Cast(to=...)``, ``QuantizeLinear(output_dtype=...)``)."""
    import onnx

    codes = {getattr(onnx.TensorProto, n): n for n in _SUB_BYTE if hasattr(onnx.TensorProto, n)}
    graph = model.graph
    found = {
        codes[v.type.tensor_type.elem_type]
        for v in (*graph.input, *graph.output, *graph.value_info)
        if v.type.tensor_type.elem_type in codes
    }
    found |= {codes[t.data_type] for t in graph.initializer if t.data_type in codes}
    for node in graph.node:
        for attr in node.attribute:
            if (
                attr.name in ("to", "output_dtype")
                and attr.type == onnx.AttributeProto.INT
                and attr.i in codes
            ):
                found.add(codes[attr.i])
    return sorted(found)


@functools.cache
def _tflite_frontend_source() -> str:
    from tvm.relax.frontend.tflite import tflite_frontend

    try:
        return inspect.getsource(tflite_frontend)
    except (OSError, TypeError):
        return ""


def unread_tflite_options(model: Any) -> list[str]:
    """``OP.Option=value`` for each builtin option of the TFLite ``model``'s operators that is set
    to a value other than the schema's default and that TVM's TFLite frontend never reads anywhere (its
    getter, e.g. ``GatherOptions.BatchDims()``, is called nowhere in the frontend's module). Empty
    when the frontend's source is not there."""
    import tflite

    source = _tflite_frontend_source()
    if not source:
        return []
    option_classes = {v: k for k, v in vars(tflite.BuiltinOptions).items() if not k.startswith("_")}
    op_names = {v: k for k, v in vars(tflite.BuiltinOperator).items() if not k.startswith("_")}
    found: list[str] = []
    for g in range(model.SubgraphsLength()):
        graph = model.Subgraphs(g)
        for i in range(graph.OperatorsLength()):
            op = graph.Operators(i)
            cls = getattr(tflite, option_classes.get(op.BuiltinOptionsType(), ""), None)
            table = op.BuiltinOptions()
            if cls is None or table is None:
                continue
            options = cls()
            options.Init(table.Bytes, table.Pos)
            defaults = _empty_table(cls)
            code = model.OperatorCodes(op.OpcodeIndex())
            name = op_names.get(max(code.BuiltinCode(), code.DeprecatedBuiltinCode()), "?")
            for getter in dir(cls):
                if getter.startswith("_") or getter in ("Init",) or "Buffer" in getter or getter.startswith("GetRootAs"):
                    continue
                method = getattr(options, getter)
                try:
                    if len(inspect.signature(method).parameters) != 0:
                        continue  # a vector element accessor
                    value = method()
                    default = getattr(defaults, getter)()
                except (TypeError, ValueError):
                    continue
                if isinstance(value, (bool, int, float)) and value != default and f".{getter}(" not in source:
                    found.append(f"{name}.{getter}={value}")
    return sorted(set(found))


@functools.cache
def _empty_table(cls: type) -> Any:
    """An options table with no field set: its getters return the schema's defaults (a flatbuffer
    default may be true, e.g. ``AddOptions.PotScaleInt16``)."""
    import flatbuffers

    builder = flatbuffers.Builder(0)
    builder.StartObject(0)
    builder.Finish(builder.EndObject())
    return cls.GetRootAs(builder.Output(), 0)  # type: ignore[attr-defined]
