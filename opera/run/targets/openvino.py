"""OpenVINO targets: ``ov-torch``, ``ov-onnx``, ``ov-keras`` (docs/design.md, Targets).

``openvino.convert_model`` is the frontend; the model is compiled for the CPU plugin with f32
inference precision: the default on these CPUs is bf16, whose rounding (4e-3..4e-2) would drown
the conversion bugs we are after in false inconsistencies (docs/design.md, Decisions and why).

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
from types import MappingProxyType
from typing import Any

import numpy as np

from opera.reproduce.steps import (
    TORCH_LOAD,
    ReproducerSteps,
    exported_program,
    keras_artifact,
    keras_input_names,
    prepared_onnx,
)
from opera.run.targets import ArtifactError, Target, harness_step, register_target
from opera.run.targets._artifacts import (
    aten_ops,
    decompose_torch,
    export_torch,
    onnx_op,
    torch_decomposition_failed,
)
from opera.run.targets._converter_source import unnamed_attributes
from opera.run.targets._onnx_prep import prepare_built
from opera.run.targets._onnx_versions import newer_than, node_gap
from opera.run.targets._ov_io import (
    InterfaceError,
    as_port_type,
    declared_outputs,
    from_ov_tensor,
    keras_input_outputs,
    match_parameters,
    to_ov_tensor,
)
from opera.run.targets._ov_onnx_binary import library_names, newest_known_opset
from opera.run.targets._torch_parts import cut_combined, fx_decoder, named_parts, no_rule_parts, ov_decompose
from opera.templates import SingleOpModel
from opera.templates.onnx_template import schema_at

__all__ = ["OvKerasTarget", "OvOnnxTarget", "OvTorchTarget", "COMPILE_CONFIG", "InterfaceError"]

COMPILE_CONFIG: dict[str, str] = {"INFERENCE_PRECISION_HINT": "f32"}
# The ``optlevel`` variant: the CPU plugin without its code-generating subgraph fusion (snippets) and
# in its accuracy execution mode (no precision-lowering transformations).
UNOPTIMIZED_CONFIG: dict[str, str] = {**COMPILE_CONFIG, "SNIPPETS_MODE": "DISABLE", "EXECUTION_MODE_HINT": "ACCURACY"}

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
    # Why the model cannot be fed or read as the source model: raised by run, so that it is
    # reported at the run stage (conversion itself succeeded).
    interface_error: str | None = None


# The CPU plugin has no float64 arithmetic: its inference precisions are f32, bf16 and f16
# (OpenVINO docs, CPU Device, "Supported inference data types"), so a float64 model runs in float32.
# Its float64 outputs are judged at float32's relative tolerance (a float64 conv of values ~1e7 is
# 5 absolute off in float32 and exactly equal to TensorFlow's float32 conv); Inf/NaN patterns and
# differences beyond float32 precision are still findings (the float64 Cast of +-Inf to +-3.4e38).
_FLOAT64_AS_FLOAT32 = {"float64": {"rtol": 2e-6}}


class _OvTarget(Target):
    compiler = "openvino"
    issue_tracker = "https://github.com/openvinotoolkit/openvino/issues"
    native_frontend = True
    tolerances = MappingProxyType({"dtype": dict(_FLOAT64_AS_FLOAT32)})
    unsupported_patterns: tuple[str, ...] = (
        # OpConversionFailure: "... Model wasn't fully converted.\nSummary:\n-- No conversion rule found for operations: TfIdfVectorizer-9"
        r"No conversion rule found for operations",
        # a tensor element type the frontend cannot load (float4/float8 variants, ...):
        # "Check 'false' failed at src/frontends/common/src/frontend.cpp:47:\nLoading input model\nUnsupported type"
        r"Loading input model\s+Unsupported type",
        # the Python bindings cannot feed/fetch a numpy dtype: "Unsupported data type: float8_e5m2"
        r"pyopenvino/core/common\.cpp:\d+:\s+Unsupported data type: ",
        # the CPU plugin has no kernel for this operation's shape/dtype ("Unsupported operation of type:
        # GroupNormalization ... Not Implemented: Cannot fallback on ngraph reference implementation")
        r"Cannot fallback on ngraph reference implementation",
        # the frontends' own words: "[PyTorch Frontend] Translation for aten::avg_pool2d do not support
        # divisor_override input.", "[PyTorch Frontend] ord=0 supported only for vector norm",
        # "OpenVINO TensorFlow Frontend does not support Reverse or ReverseV2 with multiple axes"
        r"\[PyTorch Frontend\] .*(do|does) not support",
        r"\[PyTorch Frontend\] .* supported only for",
        r"OpenVINO TensorFlow Frontend does not support",
        # "half_pixel_symmetric - this type of coordinate transformation mode is not supported";
        # the CPU plugin on a string tensor: "unsupported src_prc: string"; a translator needing an
        # API the frontend lacks: "FrontEnd API failed with NotImplementedFailure"
        r"this type of [\w ]+ is not supported",
        r"unsupported src_prc: ",
        r"FrontEnd API failed with NotImplementedFailure",
        # a translator that maps an operation onto a float-only OpenVINO op with no path for other
        # types, met at conversion: torch's nansum of int64 decomposes into aten.isnan, translated
        # 1:1 to IsNaN ("The element type of the input tensor must be a floating point number",
        # src/core/src/op/is_nan.cpp; sample 15)
        r"Model wasn't fully converted[\s\S]*The element type of the input tensor must be a floating point number",
    )

    def unimplemented_feature(self, built: SingleOpModel) -> str | None:
        """An integer input holding values outside int32: the CPU plugin's primitives compute
        integers in i32 only (OpenVINO docs, CPU Device, "Supported inference data types": integer
        data types: i32), so an int64/uint64/uint32 value past int32 wraps (Min(3, 2**63-1) gives
        -1). A documented coverage gap, not a bug. A complex input: OpenVINO has no complex element
        type (``ov.Type``; the torch frontend emulates complex only inside a graph), so a complex
        graph input comes out with a dynamic element type and inference refuses it. And a float64
        input holding finite values past float32's range: the plugin's inference precisions are
        f32, bf16 and f16, so such a value cannot survive (an infinity can: its loss is a bug)."""
        for k, value in enumerate(built.inputs):
            if isinstance(value, (np.ndarray, np.generic)) and np.asarray(value).dtype.kind == "c":  # a 0-d one too
                return f"input {k} is {np.asarray(value).dtype.name}: OpenVINO has no complex element type for a model's inputs"
            if isinstance(value, np.ndarray) and value.dtype == np.float64 and value.size:
                finite = np.abs(value[np.isfinite(value)])
                if finite.size and float(finite.max()) > float(np.finfo(np.float32).max):
                    return (
                        f"input {k} (float64) holds finite values beyond float32's range ({float(finite.max()):.3g}): "
                        "OpenVINO's CPU plugin computes float64 in float32"
                    )
        for k, value in enumerate(built.inputs):
            if not isinstance(value, np.ndarray) or value.dtype.kind not in "iu" or value.dtype.itemsize < 4 or not value.size:
                continue
            if value.dtype == np.int32:
                continue
            low, high = int(value.min()), int(value.max())
            if low < -(2**31) or high > 2**31 - 1:
                return (
                    f"input {k} ({value.dtype.name}) holds values outside int32 ({low}..{high}): OpenVINO's CPU plugin "
                    "computes integers in i32"
                )
        return None

    def compile(self, converted: OvModel) -> OvModel:
        compiled = _ov_core().compile_model(converted.model, "CPU", COMPILE_CONFIG)
        return dataclasses.replace(converted, model=compiled)

    def compile_variant(self, converted: OvModel, variant: str) -> OvModel:
        """``optlevel``: compiled with ``UNOPTIMIZED_CONFIG``; ``reload``: the converted model
        written as OpenVINO IR (``save_model``, weights kept in full precision) and read back
        (``read_model``), then compiled as by default. A read-back model whose parameters or
        results lost their names has changed the interface (an ``InterfaceError`` at run)."""
        if variant == "optlevel":
            compiled = _ov_core().compile_model(converted.model, "CPU", UNOPTIMIZED_CONFIG)
            return dataclasses.replace(converted, model=compiled)
        if variant != "reload":
            return super().compile_variant(converted, variant)
        import openvino as ov

        with tempfile.TemporaryDirectory(prefix="opera-ov-reload-") as tmp:
            path = os.path.join(tmp, "model.xml")
            ov.save_model(converted.model, path, compress_to_fp16=False)
            model = _ov_core().read_model(path)
            compiled = _ov_core().compile_model(model, "CPU", COMPILE_CONFIG)
        before = [sorted(p.get_names()) for p in converted.model.inputs]
        after = [sorted(p.get_names()) for p in model.inputs]
        error = converted.interface_error
        if error is None and before != after:
            error = f"the reloaded model's parameters are {after}, the converted model's {before}"
        return dataclasses.replace(converted, model=compiled, interface_error=error)

    def run(self, compiled: OvModel, inputs: list[np.ndarray]) -> list[np.ndarray]:
        if compiled.interface_error is not None:
            raise InterfaceError(compiled.interface_error)
        indices = compiled.input_indices
        with harness_step("select the OpenVINO model's inputs"):
            feed = [inputs[i] for i in indices] if indices is not None else list(inputs)
        request = compiled.model.create_infer_request()
        ports = list(compiled.model.inputs)
        if len(ports) == len(feed):
            feed = [as_port_type(x, port) for x, port in zip(feed, ports, strict=True)]
        request.infer([to_ov_tensor(x) for x in feed])
        kept = compiled.output_indices
        wanted = kept if kept is not None else list(range(len(compiled.model.outputs)))
        tensors = [request.get_output_tensor(i) for i in wanted]
        with harness_step("decode OpenVINO's output tensors"):
            return [from_ov_tensor(t) for t in tensors]


def _reproducer_run(names: str = "None", keras_outputs: bool = False) -> str:
    """Script code from ``model`` (an ``ov.Model``) to ``outputs``: compile, feed by parameter name
    (``names``: a Python expression for the source inputs' names; "None": by position), read the
    declared Keras outputs only (``keras_outputs``; the script's ``keras_model``), decode, all as the
    target does, with ``_ov_io`` embedded verbatim."""
    from opera.reproduce.steps import embed
    from opera.run.targets import _ov_io

    parameters = (
        "[set(p.get_names()) | {n.split(':')[0] for n in p.get_names()} for p in model.inputs]"
        if keras_outputs  # a TensorFlow tensor name's ':0' port suffix is ignored, as the target does
        else "[set(p.get_names()) for p in model.inputs]"
    )
    code = (
        embed(_ov_io)
        + "import openvino as ov\n"
        + f"compiled = ov.Core().compile_model(model, 'CPU', {COMPILE_CONFIG!r})\n"
        + "request = compiled.create_infer_request()\n"
        + f"INPUT_NAMES = {names}\n"
        + "feed, interface_error = list(INPUTS), None\n"
        + "if INPUT_NAMES is not None:  # by name: a parameter carries its input's name\n"
        + f"    found, interface_error = match_parameters({parameters}, INPUT_NAMES)\n"
        + "    feed = [INPUTS[i] for i in found]\n"
    )
    if keras_outputs:
        code += (
            "OUTPUT_INDICES, output_error = declared_outputs(\n"
            "    [set(o.get_names()) for o in model.outputs], [t.name for t in keras_model.outputs],\n"
            "    keras_input_outputs(keras_model),\n"
            ")\n"
            "interface_error = interface_error or output_error\n"
        )
    else:
        code += "OUTPUT_INDICES = None\n"
    return code + (
        "if interface_error is not None:\n"
        "    raise InterfaceError(interface_error)\n"
        "if len(compiled.inputs) == len(feed):\n"
        "    feed = [as_port_type(x, port) for x, port in zip(feed, compiled.inputs)]\n"
        "request.infer([to_ov_tensor(x) for x in feed])\n"
        "wanted = OUTPUT_INDICES if OUTPUT_INDICES is not None else range(len(compiled.outputs))\n"
        "outputs = [from_ov_tensor(request.get_output_tensor(i)) for i in wanted]\n"
    )


_DROPOUTS = frozenset({"aten.dropout.default", "aten.native_dropout.default"})


@register_target
class OvTorchTarget(_OvTarget):
    """torch.export's ExportedProgram -> ``convert_model`` (OpenVINO's FX/torch.export decoder)."""

    batchable = True
    batch_pays = True  # 1,000 random torch instances: docs/results.md (batched compilation)
    # the report of missing conversion rules only (``batch_gaps``); the line is OpenVINO 2026.4's
    batch_gap_message = (
        "openvino._pyopenvino.OpConversionFailure: Check 'false' failed at "
        "src/frontends/common_translators/src/unconverted_ops_report.cpp:151:\n"
        "FrontEnd API failed with OpConversionFailure:\nModel wasn't fully converted.\nSummary:\n"
        "-- No conversion rule found for operations:"
    )
    converts_library_lowering = True
    name = "ov-torch"
    library = "torch"
    requires = ("openvino", "torch")
    frontend_paths = ("openvino/frontend/pytorch", "openvino/tools/ovc")
    unsupported_patterns: tuple[str, ...] = (
        # complex tensors as model inputs or outputs: OpenVINO has no complex element type
        # ("aten::view_as_real is only supported for complex tensors" for a complex64 input;
        # "This is OpenVINO internal type. Consumer: opset1::Result" for a complex64 output)
        r"is only supported for complex tensors",
        r"This is OpenVINO internal type\. Consumer: opset1::Result",
        # a complex dtype reaching a conversion (chalf/cfloat/cdouble): the frontend's internal
        # Complex type cannot become an element type ("Bad as from: ...type7ComplexE to: ...element4TypeE")
        r"Bad as from: \w*Complex\w* to: \w*element\w*Type",
        # std/var/var_mean with a correction other than 0 or 1: "[PyTorch Frontend] Unexpected value
        # of correction" (the translator implements the two Bessel cases only)
        r"Unexpected value of correction",
        # embedding_bag's max mode: "Only sum and mean mode supported for aten::embedding_bag
        # translation" (src/frontends/pytorch/src/op/embedding_bag.cpp)
        r"Only sum and mean mode supported for aten::embedding_bag",
        # and its include_last_offset=True: "[PyTorch Frontend] Inclusion last offset is not supported"
        r"Inclusion last offset is not supported",
        # an output the translator never produces: native_layer_norm / native_batch_norm convert,
        # yielding only their first output, so only the getitem of mean / rstd fails ("[PyTorch
        # Frontend] Index: 2 is out of bounds of input list of len: 1", and the summary names
        # nothing else). Where the operator itself failed too (kthvalue's TopK on a 0-d input),
        # the summary names it and the crash is the operator's.
        r"(?m)\[PyTorch Frontend\] Index: \d+ is out of bounds of input list of len: \d+"
        r"[\s\S]*Conversion is failed for: <built-in function getitem>(?:, SequenceMark)?$",
    )

    def converter_name(self, built: SingleOpModel) -> str | None:
        return aten_ops(built)

    def unimplemented_feature(self, built: SingleOpModel) -> str | None:
        """Beside the CPU plugin's int32 range: a dropout in training mode. OpenVINO's FX table maps
        ``aten.native_dropout.default`` (what ``run_decompositions`` makes of ``aten.dropout``) to
        ``skip_node`` (src/frontends/pytorch/src/op_table.cpp): the input passes through, nothing
        is dropped and no mask comes out, so a training-mode dropout is not implemented (sample 8:
        ``multi_head_attention_forward(dropout_p=0.5, training=True)`` fails on the missing mask)."""
        gap = super().unimplemented_feature(built)
        if gap is not None:
            return gap
        program = export_torch(built)
        for node in program.graph.nodes:
            if node.op != "call_function" or str(node.target) not in _DROPOUTS:
                continue
            p, train = (list(node.args[1:3]) + [None, None])[:2]
            if train is not False and isinstance(p, (int, float)) and p > 0:
                return (
                    f"a training-mode dropout ({node.target}, p={p}): OpenVINO's FX translator maps "
                    "aten.native_dropout to skip_node (no dropping, no mask)"
                )
        return None

    def reproducer_steps(self, built: SingleOpModel) -> ReproducerSteps:
        code = (
            TORCH_LOAD
            + "import openvino as ov\nmodel = ov.convert_model(program)\n"
            + _reproducer_run("list(program.graph_signature.user_inputs)")
        )
        return exported_program(built), list(built.inputs), code

    def batch_cut(self, whole: SingleOpModel, keep: list[int], combined: SingleOpModel) -> bool:
        """The program OpenVINO's decomposition made of ``whole`` with only the parts ``keep``
        (``cut_program``): a batch tried again without a part does not export and decompose again."""
        return cut_combined(whole, keep, combined)

    def batch_gaps(self, combined: SingleOpModel, failure: str) -> dict[int, Exception] | None:
        """Where the batch's conversion failed only on ops without a conversion rule: the parts
        owning one, each with the report its own conversion raises (``no_rule_parts``)."""
        return no_rule_parts(failure, combined.details.get("decomposed"))

    def batch_culprits(self, exc: BaseException, combined: SingleOpModel | None = None) -> set[int]:
        """The parts whose nodes OpenVINO's failure names: by node ("conversion of operation
        getitem_9/<built-in function getitem>", "Consumer: util::PtFrameworkNode getitem_8/...", the
        CPU plugin's "[CPU] Add node with name '_cdist_forward_3/aten._cdist_forward.default/..."
        at inference) or
        by an op without a conversion rule ("No conversion rule found for operations:
        aten.exp2.default"), in the program its decomposition made of the batch."""
        program = combined.details.get("decomposed") if combined is not None else None
        return named_parts(str(exc), program) if program is not None else set()

    def convert(self, built: SingleOpModel) -> OvModel:
        import openvino as ov

        if built.details.get("combined"):
            combined = self._convert_combined(built)
            if combined is not None:
                return combined
        program = export_torch(built)
        try:
            model = ov.convert_model(program)
        except Exception as exc:
            if torch_decomposition_failed(exc):
                # OpenVINO decomposes with its own table; where torch's default lowering of the same
                # program fails too, the failure is torch's (invalid), not the frontend's
                decompose_torch(program)
            raise
        indices, error = _torch_input_indices(model, program)
        return OvModel(model, indices, interface_error=error)

    def _convert_combined(self, built: SingleOpModel) -> OvModel | None:
        """A batch's combined model (opera/run/batch.py): ``convert_model(program)`` in its own two
        steps, OpenVINO's decomposition of the program (``ov_decompose``) and ``convert_model`` of
        the decoder it makes of it, so that a batch tried again without some parts cuts the
        decomposed program (``batch_cut``) and names the parts a failure names (``batch_culprits``).
        A batch decides passes only: a failure sends its parts to their own conversions."""
        import openvino as ov

        program = built.details.get("decomposed")
        if program is None:
            program = ov_decompose(export_torch(built))
            if program is None:  # another torch: converted as a single test is
                return None
            built.details["decomposed"] = program
        model = ov.convert_model(fx_decoder(program))
        indices, error = _torch_input_indices(model, program)
        return OvModel(model, indices, interface_error=error)


def _torch_input_indices(model: Any, program: Any) -> tuple[list[int], str | None]:
    """Positions of the OpenVINO model's parameters among the program's user inputs, by name
    (``match_parameters``; OpenVINO names each parameter after its placeholder)."""
    names = list(program.graph_signature.user_inputs)
    return match_parameters([set(p.get_names()) for p in model.inputs], names)


@register_target
class OvOnnxTarget(_OvTarget):
    name = "ov-onnx"
    library = "onnx"
    requires = ("openvino", "onnx")
    frontend_paths = ("openvino/frontend/onnx", "openvino/frontend", "openvino/tools/ovc")
    # OpenVINO's ONNX translators are C++, registered per opset range, which Python cannot see: no
    # converter_name (signatures fall back to the op type).
    unsupported_patterns: tuple[str, ...] = (
        # Mod-28 allows fmod=0 for floats; the frontend implements the older rule
        r"If the input type is floating point, then `fmod` attribute must be set to 1",
        # said by the converters themselves: Dropout with training_mode = true, Pad-19's mode 'wrap'
        r"Training mode is not supported for \w+ op",
        r"Unsupported padding mode",
        # BatchNormalization-15 lets scale/B and mean/var have their own float types (T1, T2 beside
        # X's T); the frontend builds BatchNormInference on them as they are, whose validation wants
        # one type: "Conversion failed for BatchNormalization-15 ... Input element types do not match"
        r"Conversion failed for BatchNormalization-1[5-9][\s\S]*Input element types do not match",
        # ONNX Col2Im takes N-D images; OpenVINO's Col2Im-15 (what the frontend maps it to) has two
        # spatial dimensions by its own spec: "output_size must be a 1D input of shape [2]. Got: [3]"
        r"output_size must be a 1D input of shape \[2\]",
        # string tensors (StringSplit, RegexFullMatch): an element type OpenVINO's core cannot hold
        # here ("Exception from src/core/include/openvino/core/type/element_type.hpp:256: Unknown type")
        r"element_type\.hpp:\d+:\s+Unknown type",
        # QuantizeLinear/DequantizeLinear to float4e2m1 (ONNX 23+): the frontend maps float
        # quantization to FakeConvert, which takes the two float8 types only ("Bad format for f8
        # conversion type: f4e2m1", fake_convert.cpp's is_supported_type)
        r"Bad format for f8 conversion type",
        # GridSample on a volumetric (5-D) input, which ONNX defines since GridSample-20: the
        # translator maps it to OpenVINO's 2-D GridSample-9 ("GridSample is only supported for 4D
        # input tensors. Got rank: 5", grid_sample.cpp)
        r"is only supported for 4D input tensors",
    )

    def unimplemented_feature(self, built: SingleOpModel) -> str | None:
        """Beside the CPU plugin's limits: an attribute set to a non-default value whose name the
        frontend library never holds (no converter reads it), and what the node uses from a schema
        version newer than every opset the frontend knows (``_ov_onnx_binary``)."""
        gap = super().unimplemented_feature(built)
        if gap is not None:
            return gap
        return node_gap(built, self._node_gap)  # each node of a multi-node model (an exporter's)

    def _node_gap(self, built: SingleOpModel) -> str | None:
        """``unimplemented_feature`` of a single-node model, beside the CPU plugin's limits."""
        node = built.model.graph.node[0]
        op_type, _, opset = onnx_op(built)
        unread = unnamed_attributes(node, opset, library_names)
        if unread:
            return f"attribute(s) {', '.join(unread)} named nowhere in OpenVINO's ONNX frontend library: no converter reads them"
        known = newest_known_opset()
        if known is None or opset is None or opset <= known:
            return None
        schema = schema_at(node, known)
        if schema is None:  # the operator is newer than every opset the frontend knows
            return f"{op_type} does not exist in opset {known}, the newest OpenVINO's ONNX frontend knows"
        newer = newer_than(built.model, schema.since_version)
        if newer:
            return f"{newer} (OpenVINO's ONNX frontend knows ONNX schemas up to opset {known})"
        return None

    def reproducer_steps(self, built: SingleOpModel) -> ReproducerSteps:
        artifact, inputs, _ = prepared_onnx(built)
        names = prepare_built(built).runtime_names
        code = (
            "import os, tempfile\nimport openvino as ov\n"
            "fd, path = tempfile.mkstemp(suffix='.onnx'); os.write(fd, ARTIFACT); os.close(fd)\n"
            "try:\n    model = ov.convert_model(path)  # an in-memory ModelProto is rejected\n"
            "finally:\n    os.unlink(path)\n" + _reproducer_run(repr(list(names)))
        )
        return artifact, inputs, code

    def convert(self, built: SingleOpModel) -> OvModel:
        import onnx
        import openvino as ov

        prepared = prepare_built(built)
        # convert_model rejects an in-memory ModelProto: go through a file.
        fd, path = tempfile.mkstemp(suffix=".onnx", prefix="opera-ov-")
        os.close(fd)
        try:
            onnx.save_model(prepared.model, path)  # type: ignore[arg-type]
            model = ov.convert_model(path)
        finally:
            os.unlink(path)
        # The graph's input names are part of the model's interface: matched by name, never by position.
        found, error = match_parameters([set(p.get_names()) for p in model.inputs], prepared.runtime_names)
        return OvModel(model, [prepared.runtime_indices[i] for i in found], interface_error=error)


@register_target
class OvKerasTarget(_OvTarget):
    """The Keras model object -> ``convert_model`` (OpenVINO's TensorFlow frontend)."""

    name = "ov-keras"
    library = "keras"
    requires = ("openvino", "keras", "tensorflow")
    frontend_paths = ("openvino/frontend/tensorflow", "openvino/tools/ovc")
    # OpenVINO's TensorFlow frontend gives a Keras model's bfloat16 parameters and results f32 types
    # (``convert_model`` output, before compilation), so every bfloat16 Keras op would be an
    # "inconsistent" dtype bfloat16 vs float32. The values are still compared, with bfloat16's
    # tolerance; the type change itself is a frontend behaviour noted in the docs.
    tolerances = MappingProxyType({"dtype": {"bfloat16": {"check_dtype": False}, **_FLOAT64_AS_FLOAT32}})
    unsupported_patterns: tuple[str, ...] = (
        # bfloat16 through the TensorFlow frontend: the Cast's element type stays dynamic and the CPU
        # plugin cannot run it ("cpu_convert can't convert from: f32 precision to: dynamic")
        r"cpu_convert can't convert from: [a-z0-9]+ precision to: dynamic",
        # ... or a later pass meeting that dynamic type: "Swish inputs must have the same type but
        # they are: f32 and dynamic"
        r"but they are: (\w+ and dynamic|dynamic and \w+)\b",
        # ... or a transformation reaching that Convert ("opset1::Convert .../Cast_1[0]:dynamic[]" in
        # the node it names, then "element_visitor.hpp: Element not supported"; sample 10)
        r"opset\d+::Convert \S+\[0\]:dynamic\[",
        # TensorFlow resources (lookup tables of IntegerLookup/StringLookup) are not converted:
        # "Model references undeclared parameters: ... LookupTableFindV2/table_handle"
        r"Model references undeclared parameters: .*LookupTable",
        # the frontend needs a constant where TensorFlow computes one at run time (a concat axis in a
        # tf.cond): "Input 2 cannot be folded to Constant for node ... of type ConcatV2"
        r"cannot be folded to Constant for node",
        # a complex64 model input: OpenVINO has no complex element type, only an internal mark that
        # ops like Complex or FFT produce ("Imag operation expects complex type tensor on input")
        r"operation expects complex type tensor on input",
    )

    def reproducer_steps(self, built: SingleOpModel) -> ReproducerSteps:
        artifact, load = keras_artifact(built)
        names = f"{keras_input_names(built)!r} or [t.name.split(':')[0] for t in keras_model.inputs]"
        code = load + "import openvino as ov\nmodel = ov.convert_model(keras_model)\n" + _reproducer_run(names, keras_outputs=True)
        return artifact, list(built.inputs), code

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
        outputs, output_error = declared_outputs(
            [set(o.get_names()) for o in model.outputs], [t.name for t in declared], keras_input_outputs(built.model)
        )
        return OvModel(model, indices, outputs, input_error or output_error)


def _keras_input_indices(model: Any, built: SingleOpModel) -> tuple[list[int], str | None]:
    """Match OV parameters to Keras inputs by name (the TF frontend may reorder them; a tensor
    name carries a port suffix, ``input_0:0``)."""
    keras_names = list(built.input_names) or [t.name.split(":")[0] for t in built.model.inputs]
    parameters = [set(p.get_names()) | {n.split(":")[0] for n in p.get_names()} for p in model.inputs]
    return match_parameters(parameters, keras_names)
