"""Library-side artifacts the frontends consume, shared by the compiler targets.

Every failure here is the *library's* (``torch.export`` rejecting the module, the TFLite converter
failing on a Keras model, ``torch.onnx.export`` failing) and is raised as ``ArtifactError`` chained
to the original exception, so the runner records the instance as invalid for the target instead of
blaming the compiler. The templates may offer the same conversions (``torch_inputs``,
``to_tflite``, ``model_bytes``); they are used when present so there is one definition of each.
"""

from __future__ import annotations

import importlib
from typing import Any

import numpy as np

from opera.run.targets import ArtifactError
from opera.templates import SingleOpModel

__all__ = [
    "aten_ops",
    "onnx_op",
    "export_torch",
    "keras_to_tflite",
    "onnx_model",
    "torch_inputs",
    "torch_to_onnx",
]


def _template_function(module: str, name: str) -> Any:
    try:
        mod = importlib.import_module(f"opera.templates.{module}")
    except ImportError:
        return None
    return getattr(mod, name, None)


def torch_inputs(built: SingleOpModel) -> tuple[Any, ...]:
    """The runtime inputs as torch tensors, in forward order."""
    import torch

    offered = _template_function("torch_template", "torch_inputs")
    if offered is not None:
        return tuple(offered(built))
    return tuple(torch.from_numpy(np.asarray(x, order="C")) if isinstance(x, np.ndarray) else x for x in built.inputs)


def export_torch(built: SingleOpModel) -> Any:
    """``torch.export.export`` of the module on its inputs (strict=False: the default in torch 2.13)."""
    import torch

    try:
        return torch.export.export(built.model, torch_inputs(built))
    except Exception as exc:
        raise ArtifactError(f"torch.export failed: {type(exc).__name__}: {_first_line(exc)}") from exc


def torch_to_onnx(built: SingleOpModel, opset: int = 18) -> Any:
    """torch -> ONNX through the dynamo exporter (``torch.onnx.export(..., dynamo=True)``).

    The TorchScript exporter (``dynamo=False``) is deprecated in torch 2.13; the dynamo exporter is
    what users get by default now, so it is the artifact an ONNX consumer of torch models sees.
    """
    import onnx
    import torch

    args = torch_inputs(built)
    names = [f"input_{i}" for i in range(len(args))]
    try:
        program = torch.onnx.export(built.model, args, dynamo=True, input_names=names, opset_version=opset, verbose=False)
        model = program.model_proto  # type: ignore[union-attr]
    except Exception as exc:
        raise ArtifactError(f"torch.onnx.export failed: {type(exc).__name__}: {_first_line(exc)}") from exc
    model.ir_version = min(model.ir_version, 10)
    onnx.checker.check_model(model)
    return model


def onnx_model(built: SingleOpModel) -> Any:
    """The ONNX ``ModelProto`` of an onnx instance (the template's model itself)."""
    return built.model


def keras_to_tflite(built: SingleOpModel) -> bytes:
    """Keras model -> TFLite flatbuffer (builtin ops only: a TVM frontend cannot run Flex ops)."""
    offered = _template_function("keras_template", "to_tflite")
    try:
        if offered is not None:
            return bytes(offered(built))
        import tensorflow as tf

        converter = tf.lite.TFLiteConverter.from_keras_model(built.model)
        return bytes(converter.convert())
    except Exception as exc:
        raise ArtifactError(f"TFLite conversion failed: {type(exc).__name__}: {_first_line(exc)}") from exc


def onnx_op(built: SingleOpModel) -> tuple[str, str, int | None]:
    """(op type, domain, opset of that domain) of a single-op ONNX model."""
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


def aten_ops(built: SingleOpModel) -> str | None:
    """The ATen operators of the exported program (what the torch frontends dispatch on), as a
    converter name: ``torch.add`` and ``torch.Tensor.add`` both become ``aten.add.Tensor``."""
    program = export_torch(built)
    names = sorted(
        {
            str(node.target)
            for node in program.graph.nodes
            if node.op == "call_function" and "getitem" not in str(node.target)
        }
    )
    return "+".join(names) if names else None


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0][:300] if text else ""
