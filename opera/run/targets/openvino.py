"""OpenVINO targets: ``ov-torch``, ``ov-onnx``, ``ov-keras`` (DESIGN.md section 6).

``openvino.convert_model`` is the frontend; the model is compiled for the CPU plugin with f32
inference precision: the default on these CPUs is bf16, whose rounding (4e-3..4e-2) would drown
the conversion bugs we are after in false inconsistencies (PITFALLS.md).

Inputs are fed by name and only the source model's declared outputs are read back: a converted
model whose parameters or results do not carry the source model's names has changed the model's
interface, which is itself a finding (``InterfaceError``, raised at the run stage: a crash), never
something to paper over by feeding in position order.
"""

from __future__ import annotations

import dataclasses
import os
import tempfile
from dataclasses import dataclass
from typing import Any

import numpy as np

from opera.run.targets import ArtifactError, Target, harness_step, register_target
from opera.run.targets._artifacts import export_torch
from opera.run.targets._onnx_prep import prepare_onnx
from opera.templates import SingleOpModel

__all__ = ["OvKerasTarget", "OvOnnxTarget", "OvTorchTarget", "COMPILE_CONFIG", "InterfaceError"]

COMPILE_CONFIG: dict[str, str] = {"INFERENCE_PRECISION_HINT": "f32"}

_core: Any = None


def _ov_core() -> Any:
    global _core
    if _core is None:
        import openvino as ov

        _core = ov.Core()
    return _core


class InterfaceError(RuntimeError):
    """The converted model lost part of the source model's interface: a graph input has no
    parameter of its name, or a declared output has no result. A frontend finding (a crash)."""


@dataclass
class OvModel:
    model: Any  # openvino.Model, or a CompiledModel after compile
    input_indices: list[int] | None = None  # positions in built.inputs of the model's parameters
    output_indices: list[int] | None = None  # the model's results that are the source model's outputs
    # Why the model cannot be fed or read as the source model: raised by run, so that it is
    # reported at the run stage (conversion itself succeeded).
    interface_error: str | None = None


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
        return dataclasses.replace(converted, model=compiled)

    def run(self, compiled: OvModel, inputs: list[np.ndarray]) -> list[np.ndarray]:
        if compiled.interface_error is not None:
            raise InterfaceError(compiled.interface_error)
        indices = compiled.input_indices
        with harness_step("select the OpenVINO model's inputs"):
            feed = [inputs[i] for i in indices] if indices is not None else list(inputs)
        request = compiled.model.create_infer_request()
        ports = list(compiled.model.inputs)
        if len(ports) == len(feed):
            feed = [_as_port_type(x, port) for x, port in zip(feed, ports, strict=True)]
        request.infer([_to_ov_tensor(x) for x in feed])
        kept = compiled.output_indices
        wanted = kept if kept is not None else list(range(len(compiled.model.outputs)))
        tensors = [request.get_output_tensor(i) for i in wanted]
        with harness_step("decode OpenVINO's output tensors"):
            return [_from_ov_tensor(t) for t in tensors]


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
        indices, error = _torch_input_indices(model, program)
        return OvModel(model, indices, interface_error=error)


def _torch_input_indices(model: Any, program: Any) -> tuple[list[int], str | None]:
    """Positions of the OpenVINO model's parameters among the program's user inputs, by name
    (``_match_parameters``; OpenVINO names each parameter after its placeholder)."""
    names = list(program.graph_signature.user_inputs)
    return _match_parameters([set(p.get_names()) for p in model.inputs], names)


def _match_parameters(parameters: list[set[str]], sources: list[str]) -> tuple[list[int], str | None]:
    """For each parameter (its tensor names), the position of the source input of the same name;
    and why the model cannot be fed by name (None when it can).

    Fewer parameters than inputs, each matched, is fine: OpenVINO drops a parameter no result
    depends on (``linspace(0, t, steps=0)``, an ONNX ``CastLike``'s target), and feeding it anyway
    fails with "Input port for index 0 was not found". A parameter that matches no input (or
    several, or one already matched) means the frontend renamed the model's interface: a user who
    feeds the inputs by name cannot run it. Self-contained (reproducer scripts embed its source).
    """
    indices: list[int] = []
    strays: list[list[str]] = []
    for names in parameters:
        match = [i for i, source in enumerate(sources) if source in names]
        if len(match) == 1 and match[0] not in indices:
            indices.append(match[0])
        else:
            strays.append(sorted(names))
    if not strays:
        return indices, None
    missing = [source for i, source in enumerate(sources) if i not in indices]
    head = (
        f"OpenVINO model has no parameter for input {missing[0]!r}"
        if missing
        else "OpenVINO model has parameters that match no single source input"
    )
    # The first line is what the crash signature keeps: the same for every instance of the defect.
    return indices, f"{head}\nparameter names {strays} match no source input of {list(sources)}"


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
        # The graph's input names are part of the model's interface: matched by name, never by position.
        found, error = _match_parameters([set(p.get_names()) for p in model.inputs], prepared.runtime_names)
        return OvModel(model, [prepared.runtime_indices[i] for i in found], interface_error=error)


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
        declared = list(built.model.outputs)
        unrepresentable = [
            t.name for t in declared if getattr(t, "sparse", False) or getattr(t, "ragged", False)
        ]
        if unrepresentable:
            raise ArtifactError(
                f"the Keras model's outputs {unrepresentable} are sparse or ragged: OpenVINO has no such "
                "tensors and returns their components, which no dense reference can be compared with"
            )
        indices, input_error = _keras_input_indices(model, built)
        outputs, output_error = _declared_outputs(
            [set(o.get_names()) for o in model.outputs], [t.name for t in declared]
        )
        return OvModel(model, indices, outputs, input_error or output_error)


def _declared_outputs(results: list[set[str]], declared: list[str]) -> tuple[list[int] | None, str | None]:
    """For each declared output of the Keras model (its tensor name), the index of its result in
    the converted model (None: all results, in order); and why they cannot be found.

    OpenVINO traces ``model(x)`` into a TensorFlow signature whose outputs are named either after
    the Keras output tensors (``keras_tensor_12``: returned as a dict keyed by name, so one tensor
    declared twice is one result) or ``Identity``, ``Identity_1``, ... in output order. The
    frontend also adds results the model does not declare: dangling internal tensors
    (``linspace/Cast_1:0`` of ``keras.ops.linspace``, an LSTM's last state), ``Identity_k`` past the
    declared count. Only the declared outputs are compared, in their order, each once. An output
    that is an input (an augmentation layer in inference) is a result named after the parameter,
    or not named at all: such results, neither signature outputs nor internal tensors (a scoped
    ``a/b:0`` name), stand for the declared outputs left, in order, when they are exactly as many.
    Self-contained (reproducer scripts embed its source).
    """
    import re

    first: dict[str, int] = {}
    for index, names in enumerate(results):
        for name in names:
            first.setdefault(name, index)  # a name on two results (a duplicate) counts once
    chosen: list[int | None] = []
    for k, tensor_name in enumerate(declared):
        identity = "Identity:0" if k == 0 else f"Identity_{k}:0"
        chosen.append(first.get(tensor_name, first.get(identity)))
    unmatched = [k for k, index in enumerate(chosen) if index is None]
    if unmatched:
        signature = set(declared)
        anonymous = [
            i
            for i, names in enumerate(results)
            if i not in chosen
            and not any(n in signature or re.fullmatch(r"Identity(_\d+)?:0", n) or "/" in n for n in names)
        ]
        if len(anonymous) != len(unmatched):
            return None, (
                f"OpenVINO model has no result for declared output {unmatched[0]}\n"
                f"declared outputs {list(declared)}, result names {[sorted(n) for n in results]}"
            )
        for k, index in zip(unmatched, anonymous, strict=True):
            chosen[k] = index
    kept = [int(i) for i in chosen if i is not None]
    return (None if kept == list(range(len(results))) else kept), None


def _keras_input_indices(model: Any, built: SingleOpModel) -> tuple[list[int], str | None]:
    """Match OV parameters to Keras inputs by name (the TF frontend may reorder them; a tensor
    name carries a port suffix, ``input_0:0``)."""
    keras_names = list(built.input_names) or [t.name.split(":")[0] for t in built.model.inputs]
    parameters = [set(p.get_names()) | {n.split(":")[0] for n in p.get_names()} for p in model.inputs]
    return _match_parameters(parameters, keras_names)
