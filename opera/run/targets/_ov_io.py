"""What the OpenVINO targets and their reproducer scripts share: feeding a compiled model by
parameter name and reading its outputs back as numpy.

Standalone by contract (the standard library, numpy and openvino / ml_dtypes imported inside the
functions): a reproducer script embeds this file verbatim, so it feeds and decodes exactly as the
target did (one definition, no copy that could drift).
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = [
    "RAW_BIT_TYPES",
    "InterfaceError",
    "as_port_type",
    "declared_outputs",
    "keras_input_outputs",
    "from_ov_tensor",
    "match_parameters",
    "to_ov_tensor",
    "unpack_raw_bits",
]


class InterfaceError(RuntimeError):
    """The converted model lost part of the source model's interface: a graph input has no
    parameter of its name, or a declared output has no result. A frontend finding (a crash)."""


def as_port_type(x: Any, port: Any) -> Any:
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


def to_ov_tensor(x: np.ndarray) -> Any:
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
RAW_BIT_TYPES = {
    "f8e4m3": "float8_e4m3fn",
    "f8e5m2": "float8_e5m2",
    "f8e8m0": "float8_e8m0fnu",
    "i4": "int4",
    "u4": "uint4",
    "f4e2m1": "float4_e2m1fn",
    "u2": "uint2",
}


def from_ov_tensor(tensor: Any) -> np.ndarray:
    import openvino as ov

    if tensor.element_type == ov.Type.bf16:  # exposed as a float16 view of the bf16 bits
        import ml_dtypes

        return np.array(tensor.data, copy=True).view(np.uint16).view(ml_dtypes.bfloat16)
    target = RAW_BIT_TYPES.get(tensor.element_type.get_type_name())
    if target is not None:
        return unpack_raw_bits(tensor, target)
    return np.array(tensor.data, copy=True)


def unpack_raw_bits(tensor: Any, ml_name: str) -> np.ndarray:
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


def match_parameters(parameters: list[set[str]], sources: list[str]) -> tuple[list[int], str | None]:
    """For each parameter (its tensor names), the position of the source input of the same name;
    and why the model cannot be fed by name (None when it can).

    Fewer parameters than inputs, each matched, is fine: OpenVINO drops a parameter no result
    depends on (``linspace(0, t, steps=0)``, an ONNX ``CastLike``'s target), and feeding it anyway
    fails with "Input port for index 0 was not found". A parameter that matches no input (or
    several, or one already matched) means the frontend renamed the model's interface: a user who
    feeds the inputs by name cannot run it.
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


def declared_outputs(
    results: list[set[str]], declared: list[str], is_input: Any = None
) -> tuple[list[int] | None, str | None]:
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
    ``a/b:0`` name), stand for the declared outputs left, in order, when they are exactly as many,
    and only for declared outputs that are inputs (``is_input(k)``, e.g. ``keras_input_outputs``;
    None: any). A constant output the frontend drops (``keras.ops.isinf`` of an integer tensor is
    ``tf.zeros``) is not stood for by an input's pass-through result: that compared the input's
    values as the operator's (sample 10); it is the lost output it is.
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
        if len(anonymous) != len(unmatched) or (is_input is not None and not all(is_input(k) for k in unmatched)):
            return None, (
                f"OpenVINO model has no result for declared output {unmatched[0]}\n"
                f"declared outputs {list(declared)}, result names {[sorted(n) for n in results]}"
            )
        for k, index in zip(unmatched, anonymous, strict=True):
            chosen[k] = index
    kept = [int(i) for i in chosen if i is not None]
    return (None if kept == list(range(len(results))) else kept), None


def keras_input_outputs(keras_model: Any) -> Any:
    """``is_input`` for ``declared_outputs``: whether declared output ``k`` of a Keras model is, in
    the inference graph TensorFlow traces (what OpenVINO's frontend converts), a model input passed
    through (an augmentation layer in inference), following Identity ops. Traced on first use."""
    cache: list[bool] = []

    def is_input(k: int) -> bool:
        if not cache:
            import tensorflow as tf

            specs = [tf.TensorSpec(t.shape, t.dtype) for t in keras_model.inputs]
            traced = tf.function(lambda *xs: keras_model(list(xs), training=False)).get_concrete_function(*specs)
            for tensor in tf.nest.flatten(traced.structured_outputs):
                op = tensor.op
                while op.type in ("Identity", "IdentityN", "StopGradient", "Snapshot") and op.inputs:
                    index = tensor.value_index if op.type == "IdentityN" else 0
                    tensor = op.inputs[index]
                    op = tensor.op
                cache.append(op.type == "Placeholder")
        return k < len(cache) and cache[k]

    return is_input

