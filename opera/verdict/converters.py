"""Naming the frontend converter an instance goes through, for inconsistency signatures.

The paper counts one bug per conversion function (DESIGN.md section 7): two APIs that reach the
same converter (``torch.add`` and ``torch.Tensor.add`` both become ``aten.add.Tensor``) are one
bug, and one ONNX op whose opset selects a different ``_impl_vN`` is another. OpenVINO's ONNX
translators are C++ registered per opset *range*, which Python cannot see: ov-onnx falls back
to the op type (the API) rather than guessing. A target can name
its converter with a ``converter_name(built)`` method; the targets written before this hook get
theirs from ``CONVERTER_NAMERS`` (one function per target). ``None`` means "cannot tell": the
signature then falls back to the API.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from opera.templates import SingleOpModel

__all__ = ["CONVERTER_NAMERS", "converter_name"]


def _onnx_op(built: SingleOpModel) -> tuple[str, str, int | None]:
    node = built.model.graph.node[0]
    domain = node.domain or ""
    opset = next(
        (
            int(e.version)
            for e in built.model.opset_import
            if (e.domain or "") in (domain, domain if domain else "ai.onnx")
        ),
        None,
    )
    return node.op_type, domain, opset


def _tvm_onnx(built: SingleOpModel, target: Any) -> str | None:
    """The ``OnnxOpConverter`` class and the ``_impl_vN`` TVM selects for the model's opset."""
    from tvm.relax.frontend.onnx import onnx_frontend

    op_type, domain, opset = _onnx_op(built)
    if domain not in ("", "ai.onnx"):
        return None
    cls = onnx_frontend._get_convert_map().get(op_type)
    if cls is None:
        return None
    versions = sorted(int(d.replace("_impl_v", "")) for d in dir(cls) if d.startswith("_impl_v"))
    if not versions:
        return cls.__name__
    chosen = max((v for v in versions if opset is None or v <= opset), default=versions[0])
    return f"{cls.__name__}._impl_v{chosen}"


def _aten_ops(built: SingleOpModel, target: Any) -> str | None:
    """The ATen operators of the exported program: what the torch frontends dispatch on."""
    from opera.run.targets._artifacts import export_torch

    program = export_torch(built)
    names = sorted(
        {
            str(node.target)
            for node in program.graph.nodes
            if node.op == "call_function" and "getitem" not in str(node.target)
        }
    )
    return "+".join(names) if names else None


def _tflite_ops(built: SingleOpModel, target: Any) -> str | None:
    """The TFLite builtin operators of the flatbuffer (TVM's TFLite frontend converts per op)."""
    import tflite

    from opera.run.targets._artifacts import keras_to_tflite

    model = tflite.Model.GetRootAsModel(keras_to_tflite(built), 0)
    names_by_code = {v: k for k, v in vars(tflite.BuiltinOperator).items() if not k.startswith("_")}
    ops = set()
    for i in range(model.OperatorCodesLength()):
        code = model.OperatorCodes(i)
        builtin = max(code.BuiltinCode(), code.DeprecatedBuiltinCode())
        ops.add(names_by_code.get(builtin, str(builtin)))
    return "+".join(sorted(ops)) if ops else None


CONVERTER_NAMERS: dict[str, Callable[[SingleOpModel, Any], str | None]] = {
    "tvm-onnx": _tvm_onnx,
    "tvm-torch": _aten_ops,
    "ov-torch": _aten_ops,
    "inductor-torch": _aten_ops,
    "inductor-torch-cuda": _aten_ops,
    "trt-torch": _aten_ops,
    "tvm-keras": _tflite_ops,
}


def converter_name(target: Any, built: SingleOpModel) -> str | None:
    """The converter ``built`` goes through on ``target``, or None when it cannot be told."""
    try:
        method = getattr(target, "converter_name", None)
        if method is not None:
            return method(built)
        namer = CONVERTER_NAMERS.get(target.name)
        return namer(built, target) if namer is not None else None
    except Exception:  # naming is best effort: the API is a fine fallback
        return None
