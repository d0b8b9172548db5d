"""Apache TVM (Relax) targets: ``tvm-torch``, ``tvm-onnx``, ``tvm-keras`` (DESIGN.md section 6).

All three end in ``tvm.compile(mod, target="llvm")`` and the Relax VM on the CPU; they differ in the
frontend: ``from_exported_program`` (torch.export), ``from_onnx``, and ``from_tflite`` (Keras goes
through a TFLite flatbuffer since TVM removed its Keras frontend with Relay).

``tvm-keras`` and channels-last transposed convolutions (issue 11, defect class 5): the TFLite
frontend emits ``R.nn.conv{1,2,3}d_transpose`` in the TFLite layouts (NHWC / NDHWC data, IOHW /
DHWOI kernel), but TVM's legalization of those ops (``tvm/relax/transform/legalize_ops/nn.py``,
``_nn_conv{1,2,3}d_transpose``) only lowers the channels-first layouts TOPI implements (NCW/IOW,
NCHW/IOHW, NCDHW/IODHW) and leaves any other call untouched, so ``tvm.compile`` stops in VM codegen
("CodeGenVM cannot emit this Relax operator directly") on every transposed convolution. What a TVM
user does about it is what TVM's own pipelines do for layouts a kernel lacks
(``tvm/relax/backend/adreno/pipeline.py``: ``ConvertLayout`` then ``LegalizeOps``): convert those ops
to the layouts their legalization accepts (``relax.transform.ConvertLayout``, which wraps them in
``permute_dims``) and compile again. The target compiles the frontend's module as it is first; only
when that fails and the layout conversion changed the module does it compile the converted one, so
the operator's values still reach the oracle, and it keeps the first failure on the executable
(``TvmExecutable.masked_crash``) for the runner to report as its own finding.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from opera.run.targets import Target, harness_step, register_target
from opera.run.targets._artifacts import export_torch, flatten_outputs, keras_to_tflite
from opera.run.targets._onnx_prep import prepare_onnx
from opera.templates import SingleOpModel

__all__ = ["TvmKerasTarget", "TvmOnnxTarget", "TvmTorchTarget"]


@dataclass
class TvmModule:
    """A Relax IRModule plus how ``built.inputs`` map onto ``main``'s parameters and outputs."""

    mod: Any
    input_indices: list[int] | None = None  # None: all inputs, in order
    output_order: list[int] | None = None  # None: the VM's order
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class TvmExecutable:
    vm: Any
    module: TvmModule
    # "default": ``tvm.compile`` of the frontend's module; "convert-layout": that failed and the
    # module compiled after ``legalizable_layouts`` (see the module docstring).
    pipeline: str = "default"
    # The default pipeline's exception when ``pipeline == "convert-layout"``: a compiler crash of
    # its own (its traceback is kept), which the values compared after the conversion must not hide.
    masked_crash: BaseException | None = None

    @property
    def notes(self) -> list[str]:
        """One line per thing the runner should record beside the verdict."""
        if self.masked_crash is None:
            return []
        text = str(self.masked_crash).strip().splitlines()
        first = text[0] if text else ""
        return [
            f"compiled with pipeline {self.pipeline!r}: the default tvm.compile failed with "
            f"{type(self.masked_crash).__name__}: {first}"
        ]


def legalizable_layouts(mod: Any) -> Any:
    """``mod`` with every Relax op whose legalization accepts only channels-first layouts
    (``tvm/relax/transform/legalize_ops/nn.py``, ``_nn_conv{1,2,3}d_transpose``) converted to those
    layouts (data, kernel), ``permute_dims`` around it; the same object when nothing changed.

    Self-contained (imports inside, the layouts written out) so that a reproducer can embed its
    source with ``inspect.getsource``.
    """
    import tvm
    import tvm_ffi
    from tvm import relax

    desired = {
        "relax.nn.conv1d_transpose": ["NCW", "IOW"],
        "relax.nn.conv2d_transpose": ["NCHW", "IOHW"],
        "relax.nn.conv3d_transpose": ["NCDHW", "IODHW"],
    }
    converted = tvm.transform.Sequential(
        [relax.transform.ConvertLayout(desired), relax.transform.Normalize()]
    )(mod)
    return mod if tvm_ffi.structural_equal(converted, mod) else converted


class _TvmTarget(Target):
    compiler = "tvm"
    _library_module = ""
    # Retry a failed compile after ``legalizable_layouts`` (frontends that emit channels-last ops).
    _layout_fallback = False

    def availability(self) -> str | None:
        try:
            import tvm  # noqa: F401
            from tvm import relax  # noqa: F401
        except Exception as exc:  # ImportError, or a broken native library
            return f"tvm is not importable: {type(exc).__name__}: {exc}"
        if self._library_module:
            try:
                __import__(self._library_module)
            except Exception as exc:
                return f"{self._library_module} is not importable: {type(exc).__name__}: {exc}"
        return None

    def versions(self) -> dict[str, str]:
        import tvm

        out = {"tvm": str(tvm.__version__)}
        mod = __import__(self._library_module) if self._library_module else None
        if mod is not None:
            out[self._library_module] = str(getattr(mod, "__version__", "?"))
        return out

    def compile(self, converted: TvmModule) -> TvmExecutable:
        import tvm
        from tvm import relax

        try:
            executable = tvm.compile(converted.mod, target="llvm")
        except Exception as exc:
            if not self._layout_fallback:
                raise
            fallback = self._compile_converted_layouts(converted)
            if fallback is None:
                raise
            executable, module = fallback
            return TvmExecutable(
                relax.VirtualMachine(executable, tvm.cpu()),
                module,
                pipeline="convert-layout",
                masked_crash=exc,
            )
        return TvmExecutable(relax.VirtualMachine(executable, tvm.cpu()), converted)

    def _compile_converted_layouts(self, converted: TvmModule) -> tuple[Any, TvmModule] | None:
        """The executable of the layout-converted module, or None: nothing to convert, or the
        converted module does not compile either (the default pipeline's failure stands)."""
        import tvm

        try:
            mod = legalizable_layouts(converted.mod)
            if mod is converted.mod:
                return None
            executable = tvm.compile(mod, target="llvm")
        except Exception:
            return None
        module = TvmModule(mod, converted.input_indices, converted.output_order, dict(converted.extra))
        return executable, module

    def run(self, compiled: TvmExecutable, inputs: list[np.ndarray]) -> list[np.ndarray]:
        import tvm

        indices = compiled.module.input_indices
        with harness_step("select the TVM model's inputs"):
            feed = [np.asarray(inputs[i], order="C") for i in indices] if indices is not None else list(inputs)
        args = [tvm.runtime.tensor(np.asarray(x, order="C")) for x in feed]  # TVM's own API: its failures are TVM's
        result = compiled.vm["main"](*args)
        outputs = flatten_outputs(result, to_numpy=_tvm_to_numpy)
        order = compiled.module.output_order
        with harness_step("order the TVM model's outputs"):
            return [outputs[i] for i in order] if order is not None else outputs


def _tvm_to_numpy(value: Any) -> np.ndarray:
    if hasattr(value, "numpy"):
        return value.numpy()
    return np.asarray(value)


@register_target
class TvmTorchTarget(_TvmTarget):
    name = "tvm-torch"
    library = "torch"
    _library_module = "torch"
    frontend_paths = ("tvm/relax/frontend/torch", "tvm/relax/frontend/common")

    def convert(self, built: SingleOpModel) -> TvmModule:
        from tvm.relax.frontend.torch import from_exported_program

        program = export_torch(built)
        mod = from_exported_program(program, unwrap_unit_return_tuple=True)
        return TvmModule(mod)


@register_target
class TvmOnnxTarget(_TvmTarget):
    name = "tvm-onnx"
    library = "onnx"
    _library_module = "onnx"
    frontend_paths = ("tvm/relax/frontend/onnx", "tvm/relax/frontend/common")

    def convert(self, built: SingleOpModel) -> TvmModule:
        from tvm.relax.frontend.onnx import from_onnx

        prepared = prepare_onnx(built.model, built.inputs, built.input_names or None)
        opset = _onnx_opset(prepared.model)
        mod = from_onnx(prepared.model, opset=opset, keep_params_in_input=False)
        return TvmModule(mod, input_indices=prepared.runtime_indices)


def _onnx_opset(model: Any) -> int | None:
    for entry in model.opset_import:
        if entry.domain in ("", "ai.onnx"):
            return int(entry.version)
    return None


@register_target
class TvmKerasTarget(_TvmTarget):
    name = "tvm-keras"
    library = "keras"
    _library_module = "tflite"
    _layout_fallback = True  # the TFLite frontend emits NHWC / NDHWC ops (module docstring)
    frontend_paths = ("tvm/relax/frontend/tflite", "tvm/relax/frontend/common")

    def availability(self) -> str | None:
        reason = super().availability()
        if reason is not None:
            return reason
        try:
            import tensorflow  # noqa: F401
        except Exception as exc:
            return f"tensorflow is not importable: {type(exc).__name__}: {exc}"
        return None

    def versions(self) -> dict[str, str]:
        import keras
        import tensorflow as tf

        return {**super().versions(), "keras": keras.__version__, "tensorflow": tf.__version__}

    def convert(self, built: SingleOpModel) -> TvmModule:
        import tflite
        from tvm.relax.frontend.tflite import from_tflite

        buf = keras_to_tflite(built)
        tfl = tflite.Model.GetRootAsModel(buf, 0)
        input_indices, output_order = tflite_io_order(tfl, built)
        mod = from_tflite(tfl)
        complex_outputs = [k for k, o in enumerate(built.model.outputs) if "complex" in str(o.dtype)]
        return TvmModule(
            mod, input_indices=input_indices, output_order=output_order, extra={"complex_outputs": complex_outputs}
        )

    def run(self, compiled: TvmExecutable, inputs: list[np.ndarray]) -> list[np.ndarray]:
        """TVM's TFLite frontend holds a complex64 tensor as float32 with a trailing axis of 2 (real,
        imaginary) at the model's boundary: what a user feeds and reads back there."""
        with harness_step("encode complex inputs as TVM's TFLite frontend takes them"):
            fed = [tflite_complex_to_pairs(x) for x in inputs]
        outputs = super().run(compiled, fed)
        with harness_step("decode complex outputs"):
            for k in compiled.module.extra.get("complex_outputs", []):
                outputs[k] = tflite_pairs_to_complex(outputs[k])
        return outputs


def tflite_complex_to_pairs(x: Any) -> Any:
    """complex64[...] -> float32[..., 2] (real, imaginary), as TVM's TFLite frontend types it."""
    arr = np.asarray(x)
    if arr.dtype.kind != "c":
        return x
    return np.ascontiguousarray(arr.astype(np.complex64)).view(np.float32).reshape((*arr.shape, 2))


def tflite_pairs_to_complex(y: Any) -> Any:
    """float32[..., 2] -> complex64[...]: a complex output of TVM's TFLite frontend read back."""
    arr = np.asarray(y)
    if arr.dtype != np.float32 or arr.ndim == 0 or arr.shape[-1] != 2:
        return y
    return np.ascontiguousarray(arr).view(np.complex64)[..., 0]


def tflite_io_order(tfl: Any, built: SingleOpModel) -> tuple[list[int] | None, list[int] | None]:
    """Map the TFLite subgraph's inputs/outputs onto the Keras model's order.

    The TFLite converter does not keep the Keras input order (signature inputs are keyed by name)
    nor always the output order (``output_0``, ``output_1``, ...); ``from_tflite`` follows the
    subgraph's order. Returns (for each subgraph input, the index into ``built.inputs``; for each
    Keras output, the index into the subgraph outputs); None where the order is the identity or
    cannot be recovered.
    """
    subgraph = tfl.Subgraphs(0)
    sub_inputs = [int(i) for i in subgraph.InputsAsNumpy()] if subgraph.InputsLength() else []
    sub_outputs = [int(i) for i in subgraph.OutputsAsNumpy()] if subgraph.OutputsLength() else []
    if tfl.SignatureDefsLength() == 0:
        return None, None
    sig = tfl.SignatureDefs(0)
    keras_names = _keras_input_names(built)
    by_tensor_in = {sig.Inputs(i).TensorIndex(): sig.Inputs(i).Name().decode() for i in range(sig.InputsLength())}
    input_indices: list[int] | None = None
    if keras_names and len(keras_names) == len(sub_inputs):
        mapped: list[int] = []
        for t in sub_inputs:
            name = by_tensor_in.get(t)
            if name not in keras_names:
                mapped = []
                break
            mapped.append(keras_names.index(name))
        if mapped and mapped != list(range(len(mapped))):
            input_indices = mapped
    output_order: list[int] | None = None
    by_tensor_out = {sig.Outputs(i).TensorIndex(): sig.Outputs(i).Name().decode() for i in range(sig.OutputsLength())}
    names = [by_tensor_out.get(t, "") for t in sub_outputs]
    if len(sub_outputs) > 1 and all(n.startswith("output_") and n[7:].isdigit() for n in names):
        keras_pos = [int(n[7:]) for n in names]  # keras_pos[j]: keras output index of subgraph output j
        order = sorted(range(len(keras_pos)), key=lambda j: keras_pos[j])
        if order != list(range(len(order))):
            output_order = order
    return input_indices, output_order


def _keras_input_names(built: SingleOpModel) -> list[str]:
    if built.input_names:
        return list(built.input_names)
    try:
        return [t.name.split(":")[0] for t in built.model.inputs]
    except Exception:
        return []
