"""A feature the frontend's own code shows it does not implement is a coverage gap, not a bug.

The judged triage of the human ONNX slice on tvm-onnx (bugs/verdicts.tsv) called 20 of its 53 root
causes UNSUPPORTED that Opera had listed as crashes or wrong results: attributes TVM's converters
never read (Resize ``axes``/``antialias``, IsInf ``detect_negative``, ConvTranspose
``output_shape``, SpaceToDepth ``mode``), sub-byte element types its runtime cannot hold, and
messages in the frontends' own words ("not supported yet", "Missing outputs during conversion").
Each is fixed as a class: read from the converter's source (``Target.unimplemented_feature``) or a
declared pattern; these tests run the real corpus instances on the real frontends.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper
from test_verdicts import _instance, _run

from opera.outcomes import Outcome
from opera.run.targets._converter_source import sub_byte_types, unread_attributes


def test_an_attribute_the_converter_never_names_is_found_but_not_a_default_one() -> None:
    from tvm.relax.frontend.onnx import onnx_frontend

    is_inf = onnx_frontend._get_convert_map()["IsInf"]
    node = helper.make_node("IsInf", ["x"], ["y"], detect_negative=0)
    assert unread_attributes(is_inf, node, 20) == ["detect_negative=0"]
    spelled_default = helper.make_node("IsInf", ["x"], ["y"], detect_negative=1, detect_positive=1)
    assert unread_attributes(is_inf, spelled_default, 20) == []  # the default changes nothing
    resize = onnx_frontend._get_convert_map()["Resize"]
    node = helper.make_node("Resize", ["x", "", "scales"], ["y"], mode="linear", axes=[2, 3])
    assert unread_attributes(resize, node, 19) == ["axes=[2, 3]"]  # `mode` is read, `axes` is not
    dropout = onnx_frontend._get_convert_map()["Dropout"]
    assert unread_attributes(dropout, helper.make_node("Dropout", ["x"], ["y"], seed=3), 13) == []


def test_sub_byte_element_types_are_found_wherever_the_model_names_them() -> None:
    cast = helper.make_node("Cast", ["x"], ["y"], to=TensorProto.INT4)
    graph = helper.make_graph(
        [cast],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])],
        [helper.make_tensor_value_info("y", TensorProto.INT4, [3])],
    )
    assert sub_byte_types(helper.make_model(graph)) == ["INT4"]
    plain = onnx.helper.make_model(
        helper.make_graph(
            [helper.make_node("Cast", ["x"], ["y"], to=TensorProto.INT8)],
            "g",
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])],
            [helper.make_tensor_value_info("y", TensorProto.INT8, [3])],
        )
    )
    assert sub_byte_types(plain) == []


@pytest.mark.parametrize(
    ("test", "reason"),
    [
        # wrong values: TVM's IsInf converter returns relax.op.isinf whatever detect_positive says
        ("test_isinf_negative", "detect_positive=0 never read by TVM's IsInf"),
        # wrong shape: ConvTranspose computes its own output size, output_shape is never read
        ("test_convtranspose_output_shape", "output_shape=[10, 8] never read by TVM's ConvTranspose"),
        # a crash deep in the converter: Resize reads `sizes` for every axis, ignoring `axes`
        ("test_resize_upsample_sizes_nearest_axes_2_3", "axes=[2, 3] never read by TVM's Resize"),
        # sub-byte element types: a "TensorCopyFromBytes" size mismatch in TVM's runtime
        ("test_cast_INT4_to_FLOAT", "sub-byte element type(s) INT4"),
        # the converter's own words: "Missing outputs during conversion. Expected 2 but Got 1"
        ("test_maxpool_with_argmax_2d_precomputed_pads", "Missing outputs during conversion"),
        # integer Pow, a runtime input since integer data is no longer frozen: "power only applies to float"
        ("test_pow_types_int32_int32", "power only applies to float"),
    ],
)
def test_tvm_onnx_coverage_gaps_are_unsupported(state, test: str, reason: str) -> None:
    result = _run(state, _instance("onnx", test), "tvm-onnx")
    assert result.outcome is Outcome.UNSUPPORTED, (result.outcome, result.message[-400:])
    assert reason in result.message


def test_a_real_bug_next_to_an_unread_seed_stays_a_bug(state) -> None:
    """Dropout's mask comes back float32 (the spec says bool: judged REAL, bugs/tvm-onnx/); the
    converter never reads ``seed`` either, but a seed changes only random draws, which are not
    compared, so it cannot turn the wrong dtype into a coverage gap."""
    result = _run(state, _instance("onnx", "test_dropout_default_mask"), "tvm-onnx")
    assert result.outcome is Outcome.INCONSISTENT, (result.outcome, result.message[-400:])
    assert "bool" in result.message


def _by_id(library: str, instance_id: str):
    from test_verdicts import HARVESTED

    from opera.corpus import CorpusReader

    return next(i for i in CorpusReader([HARVESTED / f"{library}.jsonl.gz"]) if i.id == instance_id)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("library", "instance_id", "target", "words"),
    [
        # "[PyTorch Frontend] Translation for aten::avg_pool3d do not support divisor_override input."
        ("torch", "f1878e32f9c49300e18a", "ov-torch", "do not support divisor_override"),
        # keras.ops.flip over both axes -> ReverseV2 with 2 axes: "OpenVINO TensorFlow Frontend does
        # not support Reverse or ReverseV2 with multiple axes"; TVM's TFLite frontend: "TFLite does
        # not support multi-axis yet"
        ("keras", "80a834375064da14a5cb", "ov-keras", "does not support Reverse"),
        ("keras", "80a834375064da14a5cb", "tvm-keras", "not support multi-axis yet"),
        # complex outputs on TVM's torch frontend: "input_type torch.complex64 is not handled yet"
        ("torch", "399babcfa5ba93100ac2", "tvm-torch", "is not handled yet"),
        # one_hot without num_classes: a data-dependent output size torch.compile cannot specialize on
        ("torch", "e52661d9aaa350abcb15", "inductor-torch", "data-dependent expression"),
    ],
)
def test_the_frontends_own_words_for_a_gap_are_unsupported(
    state, library: str, instance_id: str, target: str, words: str
) -> None:
    result = _run(state, _by_id(library, instance_id), target)
    assert result.outcome is Outcome.UNSUPPORTED, (result.outcome, result.message[-400:])
    assert words in result.message


@pytest.mark.slow
def test_openvino_says_which_resize_modes_it_lacks(state) -> None:
    """"half_pixel_symmetric - this type of coordinate transformation mode is not supported"
    (judged UNSUPPORTED in the ov-onnx triage: it was listed as a crash)."""
    result = _run(state, _instance("onnx", "test_resize_downsample_scales_linear_half_pixel_symmetric"), "ov-onnx")
    assert result.outcome is Outcome.UNSUPPORTED, (result.outcome, result.message[-400:])
    assert "coordinate transformation mode is not supported" in result.message


def test_openvino_integers_past_int32_are_a_documented_gap() -> None:
    """OpenVINO's CPU plugin computes integers in i32 (CPU device docs): Min(3, 2**63 - 1) comes
    back as -1. Values past int32 are a coverage gap (unsupported, with the reason); the same
    operator on int64 values inside int32 is judged as usual."""
    from opera.model import InstanceKind, OperatorInstance, Source
    from opera.outcomes import Outcome
    from opera.run.execution import WorkerState, _execute_test
    from opera.run.executors import TestTask, WorkerSettings

    def verdict(b: np.ndarray) -> tuple[Outcome, str]:
        inst = OperatorInstance(
            library="onnx", api="onnx::Min", kind=InstanceKind.ONNX_NODE, inputs=(np.array([3, 3, 2, 1], np.int64), b),
            extra={"domain": "", "n_outputs": 1, "opset": 13}, source=Source(suite="t", test="min"),
        )  # fmt: skip
        result, _ = _execute_test(TestTask(0, inst, "ov-onnx"), WorkerState(WorkerSettings()), lambda stage: None)
        return result.outcome, result.message

    outcome, message = verdict(np.array([2**63 - 1, 2**63 - 1, 2**63 - 1, 0], np.int64))
    assert outcome is Outcome.UNSUPPORTED and "computes integers in i32" in message
    assert verdict(np.array([7, 1, 9, 0], np.int64))[0] is Outcome.PASS


def test_onnx_model_breaking_its_operator_schema_is_invalid() -> None:
    """Gelu allows float types only: on int8 onnxruntime has no kernel and onnx.reference computes
    anyway, so only the schema check makes the mutant invalid (else every frontend's rightful
    refusal looked like a crash); a float input builds as before."""
    from opera.model import InstanceKind, OperatorInstance, Source
    from opera.templates import get_template

    def gelu(x: np.ndarray) -> OperatorInstance:
        return OperatorInstance(
            library="onnx", api="onnx::Gelu", kind=InstanceKind.ONNX_NODE, inputs=(x,),
            extra={"domain": "", "n_outputs": 1, "opset": 20}, source=Source(suite="t", test="gelu"),
        )  # fmt: skip

    template = get_template("onnx")
    checked = template.validate(gelu(np.array([0, 0, 1], np.int8)))
    assert checked.valid is False and "breaks the operator's schema" in (checked.invalid_reason or "")
    assert template.validate(gelu(np.array([0.0, 0.5, 1.0], np.float32))).valid is True


def test_a_float32_only_torch_converter_is_a_gap_for_other_dtypes_only() -> None:
    """tvm-torch's convolutions build their result with out_dtype="float32" (samples 10 and 11):
    an int64 convolution is a dtype gap, a float32 one is not (its failures stay bugs); an op whose
    converter does not fix float32 is never named."""
    from opera.model import InstanceKind, OperatorInstance, Source
    from opera.run.targets import get_target
    from opera.templates import get_template

    def conv(dtype: str) -> OperatorInstance:
        x = np.arange(2 * 3 * 5 * 5).reshape(2, 3, 5, 5).astype(dtype)
        w = np.ones((4, 3, 3, 3), dtype=dtype)
        return OperatorInstance(
            library="torch", api="torch.nn.functional.conv2d", kind=InstanceKind.FUNCTION, args=(x, w), source=Source(suite="t")
        )

    target, template = get_target("tvm-torch"), get_template("torch")
    gap = target.unimplemented_feature(template.build(conv("int64")))
    assert gap is not None and "aten.convolution.default builds its result in float32 only" in gap and "int64" in gap
    assert target.unimplemented_feature(template.build(conv("float32"))) is None
    relu = OperatorInstance(
        library="torch", api="torch.nn.functional.relu", kind=InstanceKind.FUNCTION,
        args=(np.arange(6, dtype=np.int64),), source=Source(suite="t"),
    )  # fmt: skip
    assert target.unimplemented_feature(template.build(relu)) is None
