"""The building blocks a target's ``reproducer_steps`` is made of.

A reproducer needs only the source library and the compiler, never Opera. What a target gives
(``Target.reproducer_steps``) is ``(artifact bytes, inputs, code)``: ``code`` uses ``ARTIFACT``
(bytes), ``INPUTS`` (list of numpy arrays) and ``np`` and must set ``outputs`` (list of numpy arrays);
``opera.reproduce.write`` wraps it into the script. Here: the artifacts each library hands a
frontend (the prepared ONNX model, a ``torch.export`` archive, the operator call for
``torch.compile``, a ``.keras`` file or the call that rebuilds it), the code that loads them, and
``embed`` for the standalone modules a target shares with its scripts.
"""

from __future__ import annotations

import inspect
import io
import re
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from opera.templates import SingleOpModel

__all__ = [
    "EAGER_LOAD",
    "KERAS_LOAD",
    "KERAS_REBUILD",
    "TORCH_LOAD",
    "ReproducerSteps",
    "eager_call",
    "embed",
    "exported_program",
    "keras_artifact",
    "keras_input_names",
    "prepared_onnx",
]

ReproducerSteps = tuple[bytes, list[np.ndarray], str]


def embed(*modules: ModuleType) -> str:
    """The source of standalone modules (numpy, the standard library and the compiler only), ready
    to paste into a script: their ``from __future__`` line and ``__all__`` dropped (a script's
    ``__future__`` import must come first), everything else verbatim."""
    parts = []
    for module in modules:
        source = inspect.getsource(module)
        if "from opera" in source or "import opera" in source:
            raise ValueError(f"{module.__name__} imports Opera: a reproducer cannot embed it")
        source = re.sub(r"^from __future__ import annotations\n", "", source, flags=re.M)
        source = re.sub(r"^__all__ = \[.*?\]\n", "", source, flags=re.M | re.S)
        parts.append(f"# ---- {module.__name__} (embedded verbatim) ----\n{source.strip()}\n")
    return "\n\n".join(parts) + "\n"


def prepared_onnx(built: SingleOpModel) -> tuple[bytes, list[np.ndarray], int | None]:
    from opera.run.targets._onnx_prep import prepare_built

    prepared = prepare_built(built)
    opset = next((int(e.version) for e in prepared.model.opset_import if e.domain in ("", "ai.onnx")), None)  # type: ignore[attr-defined]
    return bytes(prepared.model.SerializeToString()), prepared.select(built.inputs), opset  # type: ignore[attr-defined]


def exported_program(built: SingleOpModel) -> bytes:
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


TORCH_LOAD = """\
import io
import torch
program = torch.export.load(io.BytesIO(ARTIFACT))

def _to_torch(x):
    if x.dtype.name == "bfloat16":
        return torch.from_numpy(np.asarray(x, order="C").view(np.uint16)).view(torch.bfloat16)
    return torch.from_numpy(np.asarray(x, order="C"))  # np.ascontiguousarray makes a 0-d array 1-d
"""


EAGER_LOAD = """\
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


def eager_call(built: SingleOpModel) -> bytes | None:
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
    function = getattr(built.model, "function", None)
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


KERAS_LOAD = """\
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
KERAS_REBUILD = """\
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
    """The template's call as a pickle a script with only Keras can rebuild (``KERAS_REBUILD``),
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


def keras_artifact(built: SingleOpModel) -> tuple[bytes, str]:
    """(artifact, code setting ``keras_model``): the saved ``.keras`` model when Keras can load it
    back, else the call rebuilt (``KERAS_REBUILD``)."""
    import os
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "model.keras")
        built.model.save(path)
        saved = Path(path).read_bytes()
    if _keras_reloads(saved):
        return saved, KERAS_LOAD
    spec = _keras_call_spec(built)
    return (spec, KERAS_REBUILD) if spec is not None else (saved, KERAS_LOAD)


def keras_input_names(built: SingleOpModel) -> list[str]:
    """The Keras inputs' names, as ``ov-keras`` matches OpenVINO's parameters to them (empty: the
    script takes the reloaded model's)."""
    return list(built.input_names or [])
