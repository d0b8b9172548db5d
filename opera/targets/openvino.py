"""OpenVINO targets: ``ov-torch``, ``ov-onnx``, ``ov-keras`` (DESIGN.md section 6).

``openvino.convert_model`` is the frontend; the model is compiled for the CPU plugin with f32
inference precision: the default on these CPUs is bf16, whose rounding (4e-3..4e-2) would drown
the conversion bugs we are after in false inconsistencies (PITFALLS.md).
"""

from __future__ import annotations

import os
import re
import tempfile
from dataclasses import dataclass
from typing import Any

import numpy as np

from opera.targets import Target, register_target
from opera.targets._artifacts import export_torch
from opera.targets._onnx_prep import prepare_onnx
from opera.templates import SingleOpModel

__all__ = ["OvKerasTarget", "OvOnnxTarget", "OvTorchTarget", "COMPILE_CONFIG"]

COMPILE_CONFIG: dict[str, str] = {"INFERENCE_PRECISION_HINT": "f32"}

_core: Any = None


def _ov_core() -> Any:
    global _core
    if _core is None:
        import openvino as ov

        _core = ov.Core()
    return _core


@dataclass
class OvModel:
    model: Any  # openvino.Model, or a CompiledModel after compile
    input_indices: list[int] | None = None  # positions in built.inputs of the model's parameters
    output_indices: list[int] | None = None  # the model's results that are the source model's outputs


class _OvTarget(Target):
    compiler = "openvino"
    _library_module = ""

    def availability(self) -> str | None:
        try:
            import openvino  # noqa: F401
        except Exception as exc:
            return f"openvino is not importable: {type(exc).__name__}: {exc}"
        try:
            __import__(self._library_module)
        except Exception as exc:
            return f"{self._library_module} is not importable: {type(exc).__name__}: {exc}"
        return None

    def versions(self) -> dict[str, str]:
        import openvino as ov

        lib = __import__(self._library_module)
        return {"openvino": ov.__version__, self._library_module: str(getattr(lib, "__version__", "?"))}

    def compile(self, converted: OvModel) -> OvModel:
        compiled = _ov_core().compile_model(converted.model, "CPU", COMPILE_CONFIG)
        return OvModel(compiled, converted.input_indices, converted.output_indices)

    def run(self, compiled: OvModel, inputs: list[np.ndarray]) -> list[np.ndarray]:
        indices = compiled.input_indices
        feed = [inputs[i] for i in indices] if indices is not None else list(inputs)
        request = compiled.model.create_infer_request()
        ports = list(compiled.model.inputs)
        if len(ports) == len(feed):
            feed = [_as_port_type(x, port) for x, port in zip(feed, ports, strict=True)]
        request.infer([_to_ov_tensor(x) for x in feed])
        kept = compiled.output_indices
        wanted = kept if kept is not None else list(range(len(compiled.model.outputs)))
        return [_from_ov_tensor(request.get_output_tensor(i)) for i in wanted]


def _as_port_type(x: Any, port: Any) -> Any:
    """Cast a bfloat16/float16 input to f32 when the compiled model's parameter is f32.

    With f32 inference precision the CPU plugin compiles a TensorFlow model's bf16 parameters as
    f32 and refuses a bf16 tensor ("Failed to set tensor ... precision: bf16"), which a user feeding
    the same values in f32 never sees: a false crash, not a frontend bug.
    """
    import openvino as ov

    arr = np.asarray(x)
    if arr.dtype.name in ("bfloat16", "float16") and port.get_element_type() == ov.Type.f32:
        return arr.astype(np.float32)
    return x


def _to_ov_tensor(x: np.ndarray) -> Any:
    """numpy -> ov.Tensor. OpenVINO's numpy bridge does not know ml_dtypes' bfloat16 (it reads
    the array as float16 values and converts them): bf16 bits are copied into a bf16 tensor."""
    import openvino as ov

    arr = np.asarray(x, order="C")
    if arr.dtype.name == "bfloat16":
        tensor = ov.Tensor(ov.Type.bf16, ov.Shape(list(arr.shape)))
        tensor.data.view(np.uint16)[...] = arr.view(np.uint16)
        return tensor
    return ov.Tensor(arr)


# OpenVINO element types that its numpy bridge exposes as raw bits (uint8 for the 8-bit floats,
# packed bytes for the sub-byte types) -> the ml_dtypes type the ONNX reference uses.
_RAW_BIT_TYPES = {
    "f8e4m3": "float8_e4m3fn",
    "f8e5m2": "float8_e5m2",
    "f8e8m0": "float8_e8m0fnu",
    "i4": "int4",
    "u4": "uint4",
    "f4e2m1": "float4_e2m1fn",
    "u2": "uint2",
}


def _from_ov_tensor(tensor: Any) -> np.ndarray:
    import openvino as ov

    if tensor.element_type == ov.Type.bf16:  # exposed as a float16 view of the bf16 bits
        import ml_dtypes

        return np.array(tensor.data, copy=True).view(np.uint16).view(ml_dtypes.bfloat16)
    target = _RAW_BIT_TYPES.get(tensor.element_type.get_type_name())
    if target is not None:
        return _unpack_raw_bits(tensor, target)
    return np.array(tensor.data, copy=True)


def _unpack_raw_bits(tensor: Any, ml_name: str) -> np.ndarray:
    """Raw bits -> values. Sub-byte types are packed low bits first (OpenVINO's layout); without
    this, an int4 output of 25 values compares as 13 bytes (a false "shape differs")."""
    import ml_dtypes

    dtype = np.dtype(getattr(ml_dtypes, ml_name))
    shape = tuple(tensor.shape)
    raw = np.frombuffer(bytes(np.asarray(tensor.data).tobytes()), dtype=np.uint8)
    bits = tensor.element_type.bitwidth
    if bits == 8:
        return raw[: int(np.prod(shape))].view(dtype).reshape(shape).copy()
    per_byte = 8 // bits
    mask = (1 << bits) - 1
    codes = np.stack([(raw >> (bits * k)) & mask for k in range(per_byte)], axis=-1).reshape(-1)
    codes = codes[: int(np.prod(shape))]
    if dtype.name.startswith("float"):  # ml_dtypes keeps a sub-byte float's bit pattern in a byte
        return codes.astype(np.uint8).view(dtype).reshape(shape)
    ints = codes.astype(np.int16)
    if dtype.name.startswith("int"):  # two's complement sign extension
        ints = np.where(ints >= 1 << (bits - 1), ints - (1 << bits), ints)
    return ints.astype(dtype).reshape(shape)


@register_target
class OvTorchTarget(_OvTarget):
    """torch.export's ExportedProgram -> ``convert_model`` (OpenVINO's FX/torch.export decoder)."""

    name = "ov-torch"
    library = "torch"
    _library_module = "torch"
    frontend_paths = ("openvino/frontend/pytorch", "openvino/tools/ovc")

    def convert(self, built: SingleOpModel) -> OvModel:
        import openvino as ov

        program = export_torch(built)
        model = ov.convert_model(program)
        return OvModel(model, _torch_input_indices(model, program))


def _torch_input_indices(model: Any, program: Any) -> list[int] | None:
    """Positions of the OpenVINO model's parameters among the program's user inputs.

    OpenVINO drops a parameter the result does not depend on (``linspace(0, t, steps=0)``); feeding
    it every input then fails with "Input port for index 0 was not found", a false crash.
    """
    names = list(program.graph_signature.user_inputs)
    if len(model.inputs) == len(names):
        return None
    position = {name: i for i, name in enumerate(names)}
    indices = []
    for param in model.inputs:
        match = next((position[n] for n in param.get_names() if n in position), None)
        if match is None:
            return None
        indices.append(match)
    return indices


@register_target
class OvOnnxTarget(_OvTarget):
    name = "ov-onnx"
    library = "onnx"
    _library_module = "onnx"
    frontend_paths = ("openvino/frontend/onnx", "openvino/frontend", "openvino/tools/ovc")

    def convert(self, built: SingleOpModel) -> OvModel:
        import onnx
        import openvino as ov

        prepared = prepare_onnx(built.model, built.inputs, built.input_names or None)
        # convert_model rejects an in-memory ModelProto: go through a file.
        fd, path = tempfile.mkstemp(suffix=".onnx", prefix="opera-ov-")
        os.close(fd)
        try:
            onnx.save_model(prepared.model, path)  # type: ignore[arg-type]
            model = ov.convert_model(path)
        finally:
            os.unlink(path)
        by_name = {name: i for i, name in zip(prepared.runtime_indices, prepared.runtime_names, strict=True)}
        indices = []
        for param in model.inputs:
            names = param.get_names()
            match = next((by_name[n] for n in names if n in by_name), None)
            if match is None:
                indices = prepared.runtime_indices
                break
            indices.append(match)
        return OvModel(model, indices)


@register_target
class OvKerasTarget(_OvTarget):
    """The Keras model object -> ``convert_model`` (OpenVINO's TensorFlow frontend)."""

    name = "ov-keras"
    library = "keras"
    _library_module = "keras"
    frontend_paths = ("openvino/frontend/tensorflow", "openvino/tools/ovc")

    def versions(self) -> dict[str, str]:
        import tensorflow as tf

        return {**super().versions(), "tensorflow": tf.__version__}

    def convert(self, built: SingleOpModel) -> OvModel:
        import openvino as ov

        model = ov.convert_model(built.model)
        return OvModel(model, _keras_input_indices(model, built), _signature_outputs(model))


_SIGNATURE_OUTPUT = re.compile(r"^Identity(_\d+)?:0$")


def _signature_outputs(model: Any) -> list[int] | None:
    """Indices of the results that are the TensorFlow signature's outputs (``Identity[_k]:0``).

    OpenVINO's TensorFlow frontend also turns some dangling internal tensors into results (e.g.
    ``linspace/Cast_1:0`` of ``keras.ops.linspace``), so the converted model has more outputs than
    the Keras model. They are left out of the comparison (the real outputs are still compared); the
    extra results themselves are a frontend quirk noted in the README, not a wrong value.
    """
    keep = [
        i for i, out in enumerate(model.outputs) if any(_SIGNATURE_OUTPUT.match(n) for n in out.get_names())
    ]
    if not keep or len(keep) == len(model.outputs):
        return None
    return keep


def _keras_input_indices(model: Any, built: SingleOpModel) -> list[int] | None:
    """Match OV parameters to Keras inputs by name (the TF frontend may reorder them)."""
    try:
        keras_names = list(built.input_names) or [t.name.split(":")[0] for t in built.model.inputs]
    except Exception:
        return None
    if len(keras_names) != len(model.inputs):
        return None
    indices = []
    for param in model.inputs:
        names = {n.split(":")[0] for n in param.get_names()}
        match = [i for i, k in enumerate(keras_names) if k in names]
        if len(match) != 1:
            return None
        indices.append(match[0])
    return indices
