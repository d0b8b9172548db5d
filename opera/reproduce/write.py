"""Standalone reproducer scripts for failing tests (DESIGN.md sections 5 and 7).

A reproducer needs only the source library and the compiler, never Opera: it embeds the artifact
the frontend consumed (ONNX model bytes, a ``torch.export.save`` archive, a TFLite flatbuffer) and
the runtime inputs (dtype + shape + base64 bytes, so bfloat16 survives), runs the same frontend
calls the target makes, and compares with the library's reference outputs, also embedded.
Exit status: 1 when the failure shows (an exception propagates, or the outputs differ beyond the
threshold), 0 when it no longer reproduces; a native crash or hang shows as itself.

What a target contributes is its *steps*: ``(artifact bytes, inputs, code)``, where ``code`` uses
``ARTIFACT`` (bytes), ``INPUTS`` (list of numpy arrays) and ``np`` and must set ``outputs`` (list
of numpy arrays). A target provides them with a ``reproducer_steps(built)`` method; the compiler
targets written before this hook existed get theirs from ``REPRODUCER_STEPS`` below (one function
per target, no chain of ifs).
"""

from __future__ import annotations

import base64
import io
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from opera.model import OperatorInstance
from opera.outcomes import TestResult
from opera.templates import SingleOpModel
from opera.verdict.signature import signature_digest

__all__ = ["REPRODUCER_STEPS", "ReproducerSteps", "reproducer_steps_for", "write_reproducer"]

ReproducerSteps = tuple[bytes, list[np.ndarray], str]


# ---- steps of the compiler targets ------------------------------------------------------------


def _prepared_onnx(built: SingleOpModel) -> tuple[bytes, list[np.ndarray], int | None]:
    from opera.run.targets._onnx_prep import prepare_onnx

    prepared = prepare_onnx(built.model, built.inputs, built.input_names or None)
    opset = next((int(e.version) for e in prepared.model.opset_import if e.domain in ("", "ai.onnx")), None)  # type: ignore[attr-defined]
    return bytes(prepared.model.SerializeToString()), prepared.select(built.inputs), opset  # type: ignore[attr-defined]


_TVM_LAYOUT_FALLBACK = """\
try:
    executable = tvm.compile(mod, target="llvm")
except Exception as default_failure:  # as the target: retry with the layouts TVM can legalize
    converted = legalizable_layouts(mod)
    if converted is mod:
        raise
    try:
        executable = tvm.compile(converted, target="llvm")
    except Exception:
        raise default_failure from None
"""


def _tvm_run(layout_fallback: bool = False) -> str:
    """Compile and run on the Relax VM, and flatten the outputs as the tvm targets do (their own
    source: a ``tvm_ffi.Shape`` is one int64 tensor, containers are walked in order).
    ``layout_fallback``: a failed compile is retried after the target's ``legalizable_layouts``
    (tvm-keras), as the target does."""
    import inspect

    from opera.run.targets import _artifacts
    from opera.run.targets import tvm as tvm_target

    helpers = (_artifacts._is_tvm_shape, _artifacts._is_iterable_container, _artifacts.flatten_outputs)
    fallback = getattr(tvm_target, "legalizable_layouts", None) if layout_fallback else None
    compile_code = (
        inspect.getsource(fallback) + "\n\n" + _TVM_LAYOUT_FALLBACK
        if fallback is not None
        else 'executable = tvm.compile(mod, target="llvm")\n'
    )
    imports = (
        "from collections.abc import Iterable\nfrom typing import Any\nimport tvm\nfrom tvm import relax\n"
    )
    return (
        imports
        + compile_code
        + "vm = relax.VirtualMachine(executable, tvm.cpu())\n"
        + "result = vm['main'](*[tvm.runtime.tensor(np.asarray(x, order='C')) for x in INPUTS])\n\n"
        + "".join(inspect.getsource(f) for f in (*helpers, tvm_target._tvm_to_numpy))
        + "\noutputs = flatten_outputs(result, to_numpy=_tvm_to_numpy)\n"
    )


def _ov_run(names: str = "None", keras_outputs: bool = False) -> str:
    """Compile, feed, run, and read the outputs as the ov targets do, with the target's own source
    (one definition, not a copy that could drift): parameters matched to the inputs by name
    (``_match_parameters``; ``names`` is a Python expression for the inputs' names, "None": by
    position), a frontend that lost an input's name raising ``InterfaceError`` as the run does, the
    input casts, the declared Keras outputs only (``keras_outputs``: ``_declared_outputs`` of
    ``keras_model``; a TensorFlow tensor name's ``:0`` port suffix is then ignored, as
    ``_keras_input_indices`` does), and the decoding of OpenVINO's raw-bit outputs."""
    import inspect

    from opera.run.targets import openvino as ov_target

    decode = "".join(inspect.getsource(f) for f in (ov_target._unpack_raw_bits, ov_target._from_ov_tensor))
    encode = "".join(inspect.getsource(f) for f in (ov_target._as_port_type, ov_target._to_ov_tensor))
    match = inspect.getsource(ov_target._match_parameters)
    code = (
        "from typing import Any\n"
        "import openvino as ov\n"
        'compiled = ov.Core().compile_model(model, "CPU", {"INFERENCE_PRECISION_HINT": "f32"})\n'
        "request = compiled.create_infer_request()\n\n\n"
        "class InterfaceError(RuntimeError):\n"
        '    """The converted model lost part of the source model\'s interface (as the target raises it)."""\n\n\n'
        + match
        + "\n\n"
        + encode
        + f"\nINPUT_NAMES = {names}\n"
        "feed, interface_error = list(INPUTS), None\n"
        "if INPUT_NAMES is not None:  # by name: a parameter carries its input's name\n"
        "    found, interface_error = _match_parameters(\n"
        + (
            "        [set(p.get_names()) | {n.split(':')[0] for n in p.get_names()} for p in model.inputs], INPUT_NAMES\n"
            if keras_outputs
            else "        [set(p.get_names()) for p in model.inputs], INPUT_NAMES\n"
        )
        + "    )\n"
        "    feed = [INPUTS[i] for i in found]\n"
    )
    if keras_outputs:
        code += (
            "\n"
            + inspect.getsource(ov_target._declared_outputs)
            + "\n\nOUTPUT_INDICES, output_error = _declared_outputs(\n"
            "    [set(o.get_names()) for o in model.outputs], [t.name for t in keras_model.outputs]\n"
            ")\n"
            "interface_error = interface_error or output_error\n"
        )
    else:
        code += "OUTPUT_INDICES = None\n"
    return (
        code + "if INPUT_NAMES is not None and interface_error is not None:\n"
        "    raise InterfaceError(interface_error)\n"
        "if len(compiled.inputs) == len(feed):\n"
        "    feed = [_as_port_type(x, port) for x, port in zip(feed, compiled.inputs)]\n"
        "request.infer([_to_ov_tensor(x) for x in feed])\n"
        f"_RAW_BIT_TYPES = {ov_target._RAW_BIT_TYPES!r}\n\n"
        + decode
        + "\nwanted = OUTPUT_INDICES if OUTPUT_INDICES is not None else range(len(compiled.outputs))\n"
        "outputs = [_from_ov_tensor(request.get_output_tensor(i)) for i in wanted]\n"
    )


def _tvm_onnx_steps(built: SingleOpModel, target: Any) -> ReproducerSteps:
    artifact, inputs, opset = _prepared_onnx(built)
    code = (
        "import onnx\nfrom tvm.relax.frontend.onnx import from_onnx\n"
        "model = onnx.load_from_string(ARTIFACT)\n"
        f"mod = from_onnx(model, opset={opset!r}, keep_params_in_input=False)\n" + _tvm_run()
    )
    return artifact, inputs, code


def _ov_onnx_steps(built: SingleOpModel, target: Any) -> ReproducerSteps:
    artifact, inputs, _ = _prepared_onnx(built)
    from opera.run.targets._onnx_prep import prepare_onnx

    names = prepare_onnx(built.model, built.inputs, built.input_names or None).runtime_names
    code = (
        "import os, tempfile\nimport openvino as ov\n"
        "fd, path = tempfile.mkstemp(suffix='.onnx'); os.write(fd, ARTIFACT); os.close(fd)\n"
        "try:\n    model = ov.convert_model(path)  # an in-memory ModelProto is rejected\n"
        "finally:\n    os.unlink(path)\n" + _ov_run(repr(list(names)))
    )
    return artifact, inputs, code


def _exported_program(built: SingleOpModel) -> bytes:
    import torch

    from opera.run.targets._artifacts import export_torch

    program = export_torch(built)
    buffer = io.BytesIO()
    try:
        torch.export.save(program, buffer)
    except Exception:
        # torch.export.save cannot serialize a program whose output is a torch.return_types
        # structseq (kthvalue, topk, ...: "No registered serialization name"): the same graph with
        # its outputs as a plain tuple, in the order Opera compares them, is what the script loads
        import dataclasses

        class PlainOutputs(torch.nn.Module):
            def __init__(self, inner: Any) -> None:
                super().__init__()
                self.inner = inner

            def forward(self, *inputs: Any) -> Any:
                return tuple(torch.utils._pytree.tree_leaves(self.inner(*inputs)))

        plain = dataclasses.replace(built, model=PlainOutputs(built.model))
        buffer = io.BytesIO()
        torch.export.save(export_torch(plain), buffer)
    return buffer.getvalue()


_TORCH_LOAD = """\
import io
import torch
program = torch.export.load(io.BytesIO(ARTIFACT))

def _to_torch(x):
    if x.dtype.name == "bfloat16":
        return torch.from_numpy(np.asarray(x, order="C").view(np.uint16)).view(torch.bfloat16)
    return torch.from_numpy(np.asarray(x, order="C"))  # np.ascontiguousarray makes a 0-d array 1-d
"""


def _tvm_torch_steps(built: SingleOpModel, target: Any) -> ReproducerSteps:
    code = (
        _TORCH_LOAD + "from tvm.relax.frontend.torch import from_exported_program\n"
        "mod = from_exported_program(program, unwrap_unit_return_tuple=True)\n" + _tvm_run()
    )
    return _exported_program(built), list(built.inputs), code


def _ov_torch_steps(built: SingleOpModel, target: Any) -> ReproducerSteps:
    code = (
        _TORCH_LOAD
        + "import openvino as ov\nmodel = ov.convert_model(program)\n"
        + _ov_run("list(program.graph_signature.user_inputs)")
    )
    return _exported_program(built), list(built.inputs), code


def _inductor_steps(built: SingleOpModel, target: Any) -> ReproducerSteps:
    """The same eager call the target compiles (``torch.compile`` of the operator call, not of an
    exported program: ``program.module()`` fails differently, e.g. "Attempt to trace generator"
    for ``torch.unique``); the export path only when the call cannot be pickled without Opera."""
    device = getattr(target, "device", "cpu")
    eager = _eager_call(built)
    run = (
        f"args = tuple(_to_torch(x).to({device!r}) for x in INPUTS)\n"
        "torch._dynamo.reset()\n"
        "compiled = torch.compile(model, backend='inductor', fullgraph=True, dynamic=False)\n"
        "with torch.no_grad():\n"
        "    compiled(*[a.clone() for a in args])  # the first call traces and generates code\n"
        "    result = compiled(*args)\n"
        "def _flatten(value):\n"
        "    if isinstance(value, torch.Tensor):\n"
        "        value = value.detach().cpu()\n"
        "        return [value.float().numpy() if value.dtype == torch.bfloat16 else value.resolve_conj().resolve_neg().numpy()]\n"
        "    if isinstance(value, (list, tuple)):\n"
        "        return [y for item in value for y in _flatten(item)]\n"
        "    return [np.asarray(value)]\n"
        "outputs = _flatten(result)\n"
    )
    if eager is None:
        return _exported_program(built), list(built.inputs), _TORCH_LOAD + "model = program.module()\n" + run
    load = _TORCH_LOAD.replace("program = torch.export.load(io.BytesIO(ARTIFACT))", _EAGER_LOAD)
    if device != "cpu":
        run = "model = model.to(" + repr(device) + ")\n" + run
    return eager, list(built.inputs), load + run


_EAGER_LOAD = """\
spec = torch.load(io.BytesIO(ARTIFACT), weights_only=False)  # the operator, its constants, input slots


def _fill(template, inputs, module):
    if isinstance(template, dict) and set(template) == {"__opera_input__"}:
        return inputs[template["__opera_input__"]]
    if isinstance(template, dict) and set(template) == {"__opera_constant__"}:
        return getattr(module, template["__opera_constant__"])  # a weight held as the model's buffer
    if isinstance(template, list):
        return [_fill(t, inputs, module) for t in template]
    if isinstance(template, tuple):
        return tuple([_fill(t, inputs, module) for t in template])
    return template


def _resolve(name):
    obj = __import__(name.split(".")[0])
    for part in name.split(".")[1:]:
        obj = getattr(obj, part)
    return obj


FUNCTION = _resolve(spec["target"]["__opera_api__"]) if isinstance(spec["target"], dict) else None


class Call(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.op = spec["target"] if isinstance(spec["target"], torch.nn.Module) else None
        for name, tensor in spec.get("constants", {}).items():
            self.register_buffer(name, tensor)

    def forward(self, *inputs):
        op = self.op if self.op is not None else FUNCTION
        return op(*_fill(spec["args"], inputs, self), **{k: _fill(v, inputs, self) for k, v in spec["kwargs"].items()})


model = Call()"""


def _resolve_like_the_script(name: str) -> Any:
    """``name`` resolved as the reproducer's ``_resolve`` does it (import the top package, then
    attributes), or None: a function the script could not find is not pickled by name."""
    import importlib

    parts = name.split(".")
    try:
        obj: Any = importlib.import_module(parts[0])
        for part in parts[1:]:
            obj = getattr(obj, part)
    except Exception:
        return None
    return obj


def _eager_call(built: SingleOpModel) -> bytes | None:
    """The template's call (``CallWithConstants.call_spec``) saved with torch.save, or None when a
    script with only torch could not load it."""
    import io

    import torch

    call_spec = getattr(built.model, "call_spec", None)
    if call_spec is not None:
        spec = call_spec()
    elif isinstance(built.model, torch.nn.Module):  # a module instance: called on all the inputs
        slots = tuple({"__opera_input__": k} for k in range(len(built.inputs)))
        spec = {"target": built.model, "args": slots, "kwargs": {}}
    else:
        return None
    function = getattr(built.model, "_function", None)
    if function is not None and _resolve_like_the_script(spec["target"]["__opera_api__"]) is not function:
        return None
    buffer = io.BytesIO()
    try:
        torch.save(spec, buffer)
    except Exception:
        return None
    data = buffer.getvalue()
    if b"opera." in data or b"templates." in data:  # loading would import Opera's own modules
        return None
    return data


def _tvm_keras_steps(built: SingleOpModel, target: Any) -> ReproducerSteps:
    import inspect

    import tflite

    from opera.run.targets._artifacts import keras_to_tflite
    from opera.run.targets.tvm import tflite_complex_to_pairs, tflite_io_order, tflite_pairs_to_complex

    buf = keras_to_tflite(built)
    input_indices, output_order = tflite_io_order(tflite.Model.GetRootAsModel(buf, 0), built)
    inputs = [built.inputs[i] for i in input_indices] if input_indices is not None else list(built.inputs)
    # complex64 crosses the model's boundary as float32[..., 2] in TVM's TFLite frontend
    inputs = [tflite_complex_to_pairs(x) for x in inputs]
    complex_outputs = [k for k, o in enumerate(built.model.outputs) if "complex" in str(o.dtype)]
    code = (
        "import tflite\nfrom tvm.relax.frontend.tflite import from_tflite\n"
        "mod = from_tflite(tflite.Model.GetRootAsModel(ARTIFACT, 0))\n"
        + _tvm_run(layout_fallback=bool(getattr(target, "_layout_fallback", False)))
    )
    if output_order is not None:
        code += f"outputs = [outputs[i] for i in {output_order!r}]\n"
    if complex_outputs:
        code += (
            inspect.getsource(tflite_pairs_to_complex)
            + f"for k in {complex_outputs!r}:\n    outputs[k] = tflite_pairs_to_complex(outputs[k])\n"
        )
    return buf, inputs, code


_KERAS_LOAD = """\
import os, tempfile
import keras
with tempfile.TemporaryDirectory() as tmp:
    path = os.path.join(tmp, 'model.keras')
    open(path, 'wb').write(ARTIFACT)
    keras_model = keras.saving.load_model(path, compile=False, safe_mode=False)
"""

# A model whose .keras file cannot be loaded back (an op argument Keras cannot deserialize, e.g.
# ``keras.ops.associative_scan(f=operator.add)``): the script builds it again as the template did,
# from the operator, its arguments (pickled by reference) and the inputs' specs, then sets the
# run's weights.
_KERAS_REBUILD = """\
import pickle
import keras
spec = pickle.loads(ARTIFACT)  # the operator call, its arguments, the inputs' specs, the weights


def _fill(template, inputs):
    if isinstance(template, dict) and set(template) == {"__opera_input__"}:
        return inputs[template["__opera_input__"]]
    if isinstance(template, list):
        return [_fill(t, inputs) for t in template]
    if isinstance(template, tuple):
        return tuple([_fill(t, inputs) for t in template])
    if isinstance(template, dict):
        return {k: _fill(v, inputs) for k, v in template.items()}
    return template


keras.utils.set_random_seed(spec["seed"])
symbols = [keras.Input(batch_shape=shape, dtype=dtype, name=name) for shape, dtype, name in spec["inputs"]]
call = spec["target"](*spec["layer_args"], **spec["layer_kwargs"]) if spec["layer"] else spec["target"]
result = call(*_fill(spec["args"], symbols), **_fill(spec["kwargs"], symbols))
keras_model = keras.Model(inputs=symbols, outputs=list(keras.tree.flatten(result)))
if spec["weights"]:
    keras_model.set_weights(spec["weights"])
"""


def _keras_reloads(data: bytes) -> bool:
    import os
    import tempfile

    import keras

    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "model.keras")
        Path(path).write_bytes(data)
        try:
            keras.saving.load_model(path, compile=False, safe_mode=False)
        except Exception:
            return False
    return True


def _keras_call_spec(built: SingleOpModel) -> bytes | None:
    """The template's call as a pickle a script with only Keras can rebuild (``_KERAS_REBUILD``),
    or None (an argument that does not pickle by reference, or a model the template built otherwise)."""
    import pickle

    from opera.model import InstanceKind
    from opera.templates import keras_template as kt

    inst = built.instance
    try:
        holders = kt._Placeholders()
        layer_args: list[Any] = []
        layer_kwargs: dict[str, Any] = {}
        if inst.kind == InstanceKind.MODULE:
            target = kt.resolve_qualname(inst.api)
            layer_args = [kt._to_library(a) for a in inst.args]
            layer_kwargs = {k: kt._to_library(v) for k, v in inst.kwargs.items()}
            args = holders.substitute(tuple(inst.inputs))
            kwargs = holders.substitute(dict(inst.extra.get("call_kwargs", {})))
            inference = getattr(kt, "_inference_call", None)  # training=False, as the template calls it
            if inference is not None:
                kwargs = inference(built.details["layer"], kwargs)
        else:
            target = kt.resolve_qualname(inst.api)
            args, kwargs = holders.substitute(tuple(inst.args)), holders.substitute(dict(inst.kwargs))
            if not holders.symbols:
                holders = kt._Placeholders(promote_scalars=True)
                args, kwargs = holders.substitute(tuple(inst.args)), holders.substitute(dict(inst.kwargs))
    except Exception:
        return None
    if list(holders.names) != list(built.input_names or []) or [a.shape for a in holders.arrays] != [
        np.shape(x) for x in built.inputs
    ]:
        return None
    slot = {id(symbol): k for k, symbol in enumerate(holders.symbols)}

    def slots(value: Any) -> Any:
        if id(value) in slot:
            return {"__opera_input__": slot[id(value)]}
        if isinstance(value, list):
            return [slots(v) for v in value]
        if isinstance(value, tuple):
            return tuple(slots(v) for v in value)
        if isinstance(value, dict):
            return {k: slots(v) for k, v in value.items()}
        return value

    spec = {
        "target": target,
        "layer": inst.kind == InstanceKind.MODULE,
        "layer_args": layer_args,
        "layer_kwargs": layer_kwargs,
        "args": slots(args),
        "kwargs": slots(kwargs),
        "inputs": [
            (tuple(s.shape), str(s.dtype), str(n))
            for s, n in zip(holders.symbols, holders.names, strict=True)
        ],
        "seed": 0,
        "weights": [np.asarray(w) for w in built.model.get_weights()],
    }
    try:
        data = pickle.dumps(spec)
    except Exception:
        return None
    if b"opera." in data or b"templates." in data:  # loading would import Opera's own modules
        return None
    return data


def _keras_artifact(built: SingleOpModel) -> tuple[bytes, str]:
    """(artifact, code setting ``keras_model``): the saved ``.keras`` model when Keras can load it
    back, else the call rebuilt (``_KERAS_REBUILD``)."""
    import os
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "model.keras")
        built.model.save(path)
        saved = Path(path).read_bytes()
    if _keras_reloads(saved):
        return saved, _KERAS_LOAD
    spec = _keras_call_spec(built)
    return (spec, _KERAS_REBUILD) if spec is not None else (saved, _KERAS_LOAD)


def _ov_keras_steps(built: SingleOpModel, target: Any) -> ReproducerSteps:
    artifact, load = _keras_artifact(built)
    code = (
        load + "import openvino as ov\n"
        "model = ov.convert_model(keras_model)\n"
        + _ov_run(
            f"{_keras_input_names(built)!r} or [t.name.split(':')[0] for t in keras_model.inputs]",
            keras_outputs=True,
        )
    )
    return artifact, list(built.inputs), code


def _keras_input_names(built: SingleOpModel) -> list[str]:
    """The Keras inputs' names, as ``ov-keras`` matches OpenVINO's parameters to them (empty: the
    script takes the reloaded model's)."""
    return list(built.input_names or [])


REPRODUCER_STEPS: dict[str, Callable[[SingleOpModel, Any], ReproducerSteps]] = {
    "tvm-onnx": _tvm_onnx_steps,
    "ov-onnx": _ov_onnx_steps,
    "tvm-torch": _tvm_torch_steps,
    "ov-torch": _ov_torch_steps,
    "inductor-torch": _inductor_steps,
    "inductor-torch-cuda": _inductor_steps,
    "tvm-keras": _tvm_keras_steps,
    "ov-keras": _ov_keras_steps,
}


def reproducer_steps_for(target: Any) -> Callable[[SingleOpModel], ReproducerSteps] | None:
    method = getattr(target, "reproducer_steps", None)
    if method is not None:
        return method
    table_entry = REPRODUCER_STEPS.get(target.name)
    if table_entry is None:
        return None
    return lambda built: table_entry(built, target)


# ---- the script -------------------------------------------------------------------------------


def _encode_string(value: Any) -> dict[str, str]:
    """One element of a string tensor, base64 (the JSON sits in a Python string literal, where
    its escapes of quotes and newlines would be read as Python's)."""
    if isinstance(value, bytes | bytearray | np.bytes_):
        return {"bytes": base64.b64encode(bytes(value)).decode()}
    return {"str": base64.b64encode(str(value).encode("utf-8")).decode()}


def _encode_arrays(arrays: list[Any]) -> str:
    """dtype + shape + bytes per array (the script's ``_arrays`` reads them back). A 0-d array stays
    0-d (``np.ascontiguousarray`` returns at least 1-d); string and object arrays (ONNX string
    tensors) are stored as their values, one ``{"str"}`` or ``{"bytes"}`` per element; fixed-width
    numpy strings (``<U5``) as their bytes."""
    items: list[dict[str, Any]] = []
    for value in arrays:
        arr = np.asarray(value, order="C")
        if arr.dtype.kind == "O":
            items.append(
                {
                    "dtype": "object",
                    "shape": list(arr.shape),
                    "values": [_encode_string(v) for v in arr.reshape(-1).tolist()],
                }
            )
            continue
        if arr.dtype.byteorder == ">":
            arr = arr.astype(arr.dtype.newbyteorder("<"))
        # strings by their full spelling ("<U5": the name "str160" does not parse back); the rest
        # by name (ml_dtypes' float8_e5m2 is "<f1" otherwise)
        dtype = arr.dtype.str if arr.dtype.kind in "US" else arr.dtype.name
        items.append(
            {"dtype": dtype, "shape": list(arr.shape), "b64": base64.b64encode(arr.tobytes()).decode()}
        )
    return json.dumps(items)


def _wrap(text: str, width: int = 100) -> str:
    return "\n".join(text[i : i + width] for i in range(0, len(text), width)) or ""


_SCRIPT = '''#!/usr/bin/env python3
"""Opera reproducer (standalone: needs {requirements}, not Opera).

signature: {signature}
target:    {target}
instance:  {instance_id} ({api}), source {source}
verdict:   {outcome} at stage {stage}
message:   {message}

Exit status 1: the failure reproduces (an exception, or outputs beyond the threshold);
0: it does not. A native crash or a hang shows as itself.
"""
import base64
import json
import sys

import numpy as np


def _dtype(name):
    try:
        return np.dtype(name)
    except TypeError:  # bfloat16, float8_*, float4_*, int4, uint4, ...: ml_dtypes
        import ml_dtypes

        return np.dtype(getattr(ml_dtypes, name))


def _array(item):
    if "values" in item:  # strings / objects
        values = [base64.b64decode(v["bytes"]) if "bytes" in v else base64.b64decode(v["str"]).decode("utf-8") for v in item["values"]]
        arr = np.empty(len(values), dtype=object)
        arr[:] = values
        return arr.reshape(item["shape"])
    return np.frombuffer(base64.b64decode(item["b64"]), dtype=_dtype(item["dtype"])).reshape(item["shape"]).copy()


def _arrays(text):
    return [_array(item) for item in json.loads(text)]


ARTIFACT = base64.b64decode("""
{artifact}
""".replace("\\n", ""))
INPUTS = _arrays("""{inputs}""")
EXPECTED = _arrays("""{expected}""")
THRESHOLDS = {thresholds!r}  # per output: atol, rtol, whether the dtype must match
COMPARE_VALUES = {compare_values!r}  # False for a random operator: count, shapes and dtypes only
EXPECTED_OUTCOME = {outcome!r}

# ---- the target's steps: convert, compile, run ----
{code}
# ---- compare with the library's reference: Opera's own oracle functions (opera/verdict/oracles.py) ----
{oracle}

def _allowed(expected, atol, rtol):
    return atol if rtol == 0.0 else atol + rtol * _max_abs_finite(expected)


failed = len(outputs) != len(EXPECTED)
if failed:
    print(f"output count differs: expected {{len(EXPECTED)}}, got {{len(outputs)}}")
for index, (expected, actual) in enumerate(zip(EXPECTED, outputs)):
    expected, actual = np.asarray(expected), np.asarray(actual)
    atol, rtol, check_dtype = THRESHOLDS[index]
    problems, distance, allowed = [], float("inf"), _allowed(expected, atol, rtol)
    if expected.shape != actual.shape:
        problems.append(f"shape {{expected.shape}} vs {{actual.shape}}")
    else:
        if check_dtype and dtypes_differ(expected, actual):
            problems.append(f"dtype {{expected.dtype}} vs {{actual.dtype}}")
        pattern = nonfinite_mismatch(expected, actual) if COMPARE_VALUES else None
        if pattern:
            problems.append(pattern)
        else:
            try:
                distance = chebyshev_distance(expected, actual)
            except (TypeError, ValueError) as exc:
                problems.append(f"not comparable ({{exc}})")
            else:
                if COMPARE_VALUES and distance > allowed:
                    problems.append(f"distance {{distance:.6g}} > {{allowed:.3g}}")
    failed = failed or bool(problems)
    print(f"output {{index}}: {{expected.dtype}}{{list(expected.shape)}} chebyshev distance {{distance:.6g}} (allowed {{allowed:.3g}}){{'  <- INCONSISTENT: ' + '; '.join(problems) if problems else ''}}")
if failed:
    print("REPRODUCED: the outputs differ from the library's reference")
    sys.exit(1)
print(f"not reproduced (expected {{EXPECTED_OUTCOME}}): outputs match the reference")
sys.exit(0)
'''

def _oracle_source() -> str:
    """The oracle's own comparison functions as source, for a script that has numpy but not Opera
    (one definition: a reproducer judges exactly as the run did)."""
    import inspect

    from opera.verdict import oracles

    functions = (
        oracles._as_comparable,
        oracles._max_abs_finite,
        oracles.nonfinite_mismatch,
        oracles.chebyshev_distance,
        oracles.dtypes_differ,
    )
    header = f"import math\nfrom typing import Any\n\n_LOW_PRECISION = {oracles._LOW_PRECISION!r}\n\n\n"
    return header + "\n\n".join(inspect.getsource(f) for f in functions)


_REQUIREMENTS = {
    "onnx": "numpy, onnx",
    "torch": "numpy, torch",
    "keras": "numpy, keras/tensorflow",
}


def _thresholds(
    config: Any, target: str, instance: OperatorInstance, built: SingleOpModel, reference: list[Any]
) -> list[tuple[float, float, bool]]:
    """Per reference output, the (atol, rtol, check_dtype) the oracle judged it with
    (``opera.verdict.oracles.compare_outputs``: the judging dtype, then the instance's float tolerance)."""
    from opera.verdict.oracles import _LOW_PRECISION, _judging_dtype

    input_dtypes = [a.dtype.name for a in built.inputs if isinstance(a, np.ndarray)]
    out = []
    for value in reference:
        ref = np.asarray(value)
        threshold = config.threshold(target, _judging_dtype(ref, input_dtypes))
        if instance.tolerance is not None and (ref.dtype.kind in "fcV" or ref.dtype.name in _LOW_PRECISION):
            threshold = threshold.loosened(instance.tolerance.atol, instance.tolerance.rtol)
        out.append((float(threshold.atol), float(threshold.rtol), bool(threshold.check_dtype)))
    return out


def write_reproducer(
    instance: OperatorInstance,
    target: Any,
    result: TestResult,
    directory: str | Path,
    *,
    built: SingleOpModel | None = None,
    reference: list[np.ndarray] | None = None,
    file_name: str | None = None,
) -> Path | None:
    """Write ``<directory>/<signature-hash>.py`` (or ``file_name``); None when the target has no
    steps. ``built``/``reference`` are rebuilt with the instance's template when not given."""
    steps_of = reproducer_steps_for(target)
    if steps_of is None:
        return None
    if built is None or reference is None:
        from opera.templates import get_template

        template = get_template(instance.library)
        built = template.build(instance)
        pristine = [x.copy() if isinstance(x, np.ndarray) else x for x in built.inputs]
        reference = template.reference(built)
        built.inputs = pristine
    artifact, inputs, code = steps_of(built)
    from opera.verdict.oracles import load_oracle_config

    oracle = load_oracle_config()
    thresholds = _thresholds(oracle, target.name, instance, built, reference)
    message = " ".join(result.message.strip().splitlines()[-1:])[:300].replace('"""', "'''")
    compiler = getattr(target, "compiler", "the compiler")
    text = _SCRIPT.format(
        requirements=f"{_REQUIREMENTS.get(instance.library, instance.library)}, {compiler}",
        signature=result.signature,
        target=target.name,
        instance_id=instance.id,
        api=instance.api,
        source=f"{instance.source.suite} {instance.source.test}".strip(),
        outcome=result.outcome.value,
        stage=result.stage.value,
        message=message.replace("\\", "\\\\"),
        artifact=_wrap(base64.b64encode(artifact).decode()),
        inputs=_encode_arrays(inputs),
        expected=_encode_arrays(reference),
        thresholds=thresholds,
        compare_values=not oracle.is_random(instance.api),
        code=code,
        oracle=_oracle_source(),
    )
    out_dir = Path(directory)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / (file_name or f"{signature_digest(result.signature or instance.id)}.py")
    path.write_text(text, encoding="utf-8")
    return path
