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
from opera.signature import signature_digest
from opera.templates import SingleOpModel

__all__ = ["REPRODUCER_STEPS", "ReproducerSteps", "reproducer_steps_for", "write_reproducer"]

ReproducerSteps = tuple[bytes, list[np.ndarray], str]


# ---- steps of the compiler targets ------------------------------------------------------------


def _prepared_onnx(built: SingleOpModel) -> tuple[bytes, list[np.ndarray], int | None]:
    from opera.targets._onnx_prep import prepare_onnx

    prepared = prepare_onnx(built.model, built.inputs, built.input_names or None)
    opset = next((int(e.version) for e in prepared.model.opset_import if e.domain in ("", "ai.onnx")), None)  # type: ignore[attr-defined]
    return bytes(prepared.model.SerializeToString()), prepared.select(built.inputs), opset  # type: ignore[attr-defined]


def _tvm_run() -> str:
    """Compile and run on the Relax VM, and flatten the outputs as the tvm targets do (their own
    source: a ``tvm_ffi.Shape`` is one int64 tensor, containers are walked in order)."""
    import inspect

    from opera.targets import _artifacts
    from opera.targets import tvm as tvm_target

    helpers = (_artifacts._is_tvm_shape, _artifacts._is_iterable_container, _artifacts.flatten_outputs)
    return (
        "from collections.abc import Iterable\n"
        "from typing import Any\n"
        "import tvm\n"
        "from tvm import relax\n"
        'executable = tvm.compile(mod, target="llvm")\n'
        "vm = relax.VirtualMachine(executable, tvm.cpu())\n"
        "result = vm['main'](*[tvm.runtime.tensor(np.ascontiguousarray(x)) for x in INPUTS])\n\n"
        + "".join(inspect.getsource(f) for f in (*helpers, tvm_target._tvm_to_numpy))
        + "\noutputs = flatten_outputs(result, to_numpy=_tvm_to_numpy)\n"
    )


def _ov_run() -> str:
    """Compile, run, and read the outputs as the ov targets do: the decoding of OpenVINO's raw-bit
    outputs is the target's own source (one definition, not a copy that could drift)."""
    import inspect

    from opera.targets import openvino as ov_target

    decode = "".join(inspect.getsource(f) for f in (ov_target._unpack_raw_bits, ov_target._from_ov_tensor))
    return (
        "from typing import Any\n"
        "import openvino as ov\n"
        'compiled = ov.Core().compile_model(model, "CPU", {"INFERENCE_PRECISION_HINT": "f32"})\n'
        "request = compiled.create_infer_request()\n"
        "request.infer([ov.Tensor(np.ascontiguousarray(x)) for x in INPUTS])\n"
        f"_RAW_BIT_TYPES = {ov_target._RAW_BIT_TYPES!r}\n\n"
        + decode
        + "\noutputs = [_from_ov_tensor(request.get_output_tensor(i)) for i in range(len(compiled.outputs))]\n"
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
    code = (
        "import os, tempfile\nimport openvino as ov\n"
        "fd, path = tempfile.mkstemp(suffix='.onnx'); os.write(fd, ARTIFACT); os.close(fd)\n"
        "try:\n    model = ov.convert_model(path)  # an in-memory ModelProto is rejected\n"
        "finally:\n    os.unlink(path)\n" + _ov_run()
    )
    return artifact, inputs, code


def _exported_program(built: SingleOpModel) -> bytes:
    import torch

    from opera.targets._artifacts import export_torch

    program = export_torch(built)
    buffer = io.BytesIO()
    torch.export.save(program, buffer)
    return buffer.getvalue()


_TORCH_LOAD = """\
import io
import torch
program = torch.export.load(io.BytesIO(ARTIFACT))

def _to_torch(x):
    if x.dtype.name == "bfloat16":
        return torch.from_numpy(np.ascontiguousarray(x).view(np.uint16)).view(torch.bfloat16)
    return torch.from_numpy(np.ascontiguousarray(x))
"""


def _tvm_torch_steps(built: SingleOpModel, target: Any) -> ReproducerSteps:
    code = (
        _TORCH_LOAD + "from tvm.relax.frontend.torch import from_exported_program\n"
        "mod = from_exported_program(program, unwrap_unit_return_tuple=True)\n" + _tvm_run()
    )
    return _exported_program(built), list(built.inputs), code


def _ov_torch_steps(built: SingleOpModel, target: Any) -> ReproducerSteps:
    code = _TORCH_LOAD + "import openvino as ov\nmodel = ov.convert_model(program)\n" + _ov_run()
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


def _fill(template, inputs):
    if isinstance(template, dict) and set(template) == {"__opera_input__"}:
        return inputs[template["__opera_input__"]]
    if isinstance(template, list):
        return [_fill(t, inputs) for t in template]
    if isinstance(template, tuple):
        return tuple([_fill(t, inputs) for t in template])
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

    def forward(self, *inputs):
        op = self.op if self.op is not None else FUNCTION
        return op(*_fill(spec["args"], inputs), **{k: _fill(v, inputs) for k, v in spec["kwargs"].items()})


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
    import tflite

    from opera.targets._artifacts import keras_to_tflite
    from opera.targets.tvm import tflite_io_order

    buf = keras_to_tflite(built)
    input_indices, output_order = tflite_io_order(tflite.Model.GetRootAsModel(buf, 0), built)
    inputs = [built.inputs[i] for i in input_indices] if input_indices is not None else list(built.inputs)
    code = (
        "import tflite\nfrom tvm.relax.frontend.tflite import from_tflite\n"
        "mod = from_tflite(tflite.Model.GetRootAsModel(ARTIFACT, 0))\n" + _tvm_run()
    )
    if output_order is not None:
        code += f"outputs = [outputs[i] for i in {output_order!r}]\n"
    return buf, inputs, code


def _ov_keras_steps(built: SingleOpModel, target: Any) -> ReproducerSteps:
    import os
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "model.keras")
        built.model.save(path)
        artifact = Path(path).read_bytes()
    code = (
        "import os, tempfile\nimport keras\nimport openvino as ov\n"
        "with tempfile.TemporaryDirectory() as tmp:\n"
        "    path = os.path.join(tmp, 'model.keras')\n"
        "    open(path, 'wb').write(ARTIFACT)\n"
        "    keras_model = keras.saving.load_model(path, compile=False)\n"
        "model = ov.convert_model(keras_model)\n" + _ov_run()
    )
    return artifact, list(built.inputs), code


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


def _encode_arrays(arrays: list[Any]) -> str:
    items = []
    for value in arrays:
        arr = np.ascontiguousarray(np.asarray(value))
        if arr.dtype.byteorder == ">":
            arr = arr.astype(arr.dtype.newbyteorder("<"))
        items.append(
            {
                "dtype": arr.dtype.name,
                "shape": list(arr.shape),
                "b64": base64.b64encode(arr.tobytes()).decode(),
            }
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


def _arrays(text):
    return [
        np.frombuffer(base64.b64decode(item["b64"]), dtype=_dtype(item["dtype"])).reshape(item["shape"]).copy()
        for item in json.loads(text)
    ]


ARTIFACT = base64.b64decode("""
{artifact}
""".replace("\\n", ""))
INPUTS = _arrays("""{inputs}""")
EXPECTED = _arrays("""{expected}""")
ATOL, RTOL = {atol!r}, {rtol!r}
EXPECTED_OUTCOME = {outcome!r}

# ---- the target's steps: convert, compile, run ----
{code}
# ---- compare with the library's reference ----


def _distance(a, b):
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape:
        return float("inf"), f"shape {{a.shape}} vs {{b.shape}}"
    if a.size == 0:
        return 0.0, ""
    fa, fb = a.astype(np.complex128 if "complex" in a.dtype.name else np.float64), b.astype(np.complex128 if "complex" in b.dtype.name else np.float64)
    if not np.array_equal(np.isnan(fa), np.isnan(fb)) or not np.array_equal(np.isinf(fa) & (fa.real > 0), np.isinf(fb) & (fb.real > 0)):
        return float("inf"), "NaN/Inf positions differ"
    finite = np.isfinite(fa) & np.isfinite(fb)
    return (float(np.abs(fa[finite] - fb[finite]).max()) if finite.any() else 0.0), ""


failed = len(outputs) != len(EXPECTED)
if failed:
    print(f"output count differs: expected {{len(EXPECTED)}}, got {{len(outputs)}}")
for index, (expected, actual) in enumerate(zip(EXPECTED, outputs)):
    distance, why = _distance(expected, actual)
    magnitudes = np.abs(expected.astype(np.complex128 if expected.dtype.kind == "c" else np.float64))
    magnitudes = magnitudes[np.isfinite(magnitudes)]
    allowed = ATOL + RTOL * (float(magnitudes.max()) if magnitudes.size else 0.0)
    bad = distance > allowed or bool(why)
    failed = failed or bad
    print(f"output {{index}}: {{expected.dtype}}{{list(expected.shape)}} chebyshev distance {{distance:.6g}} (allowed {{allowed:.3g}}){{' ' + why if why else ''}}{{'  <- INCONSISTENT' if bad else ''}}")
if failed:
    print("REPRODUCED: the outputs differ from the library's reference")
    sys.exit(1)
print(f"not reproduced (expected {{EXPECTED_OUTCOME}}): outputs match the reference")
sys.exit(0)
'''

_REQUIREMENTS = {
    "onnx": "numpy, onnx",
    "torch": "numpy, torch",
    "keras": "numpy, keras/tensorflow",
}


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
    from opera.oracles import load_oracle_config

    threshold = load_oracle_config().threshold(
        target.name, np.asarray(reference[0]).dtype.name if reference else "float32"
    )
    if instance.tolerance is not None:
        threshold = threshold.loosened(instance.tolerance.atol, instance.tolerance.rtol)
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
        atol=threshold.atol,
        rtol=threshold.rtol,
        code=code,
    )
    out_dir = Path(directory)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / (file_name or f"{signature_digest(result.signature or instance.id)}.py")
    path.write_text(text, encoding="utf-8")
    return path
