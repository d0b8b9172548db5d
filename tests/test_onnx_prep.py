"""Preparing ONNX models for the frontends: frozen parameter inputs and sequence-typed inputs."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper

from opera.run.targets._onnx_prep import prepare_onnx

IR_VERSION = 8  # onnxruntime reads IR <= 13; onnx 1.23's default (14) it refuses


def _sequence_model(
    op: str, extra_inputs: list[onnx.ValueInfoProto], out: onnx.ValueInfoProto
) -> onnx.ModelProto:
    seq = helper.make_tensor_sequence_value_info("seq", TensorProto.FLOAT, None)
    node = helper.make_node(op, ["seq"] + [vi.name for vi in extra_inputs], [out.name])
    graph = helper.make_graph([node], "g", [seq, *extra_inputs], [out])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=IR_VERSION)


def test_sequence_input_becomes_a_constant_sequence_with_the_same_result() -> None:
    """A ragged list cannot be a numpy array: it is built in the graph by SequenceConstruct."""
    tensor = helper.make_tensor_value_info("t", TensorProto.FLOAT, [2])
    out = helper.make_tensor_sequence_value_info("out", TensorProto.FLOAT, None)
    model = _sequence_model("SequenceInsert", [tensor], out)
    elements = [np.ones((3,), np.float32), np.arange(5, dtype=np.float32)]  # ragged
    inserted = np.array([7.0, 8.0], np.float32)
    prepared = prepare_onnx(model, [elements, inserted])
    onnx.checker.check_model(prepared.model, full_check=True)
    assert [vi.name for vi in prepared.model.graph.input] == ["t"]
    assert prepared.model.graph.node[0].op_type == "SequenceConstruct"
    assert prepared.runtime_names == ["t"] and prepared.runtime_indices == [1]
    session = ort.InferenceSession(prepared.model.SerializeToString(), providers=["CPUExecutionProvider"])
    (result,) = session.run(None, {"t": inserted})
    assert len(result) == 3
    for got, want in zip(result, [*elements, inserted], strict=True):
        np.testing.assert_array_equal(got, want)


def test_empty_sequence_input_keeps_its_element_type() -> None:
    out = helper.make_tensor_value_info("n", TensorProto.INT64, [])
    model = _sequence_model("SequenceLength", [], out)
    prepared = prepare_onnx(model, [[]])
    assert prepared.model.graph.node[0].op_type == "SequenceEmpty"
    assert prepared.runtime_names == []
    session = ort.InferenceSession(prepared.model.SerializeToString(), providers=["CPUExecutionProvider"])
    (length,) = session.run(None, {})
    assert int(length) == 0


def test_integer_and_parameter_inputs_are_frozen_float_data_stays_runtime() -> None:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    lo = helper.make_tensor_value_info("lo", TensorProto.FLOAT, [])
    axes = helper.make_tensor_value_info("axes", TensorProto.INT64, [1])
    z = helper.make_tensor_value_info("z", TensorProto.FLOAT, None)
    nodes = [
        helper.make_node("Clip", ["x", "lo"], ["y"]),
        helper.make_node("ReduceSum", ["y", "axes"], ["z"]),
    ]
    model = helper.make_model(
        helper.make_graph(nodes, "g", [x, lo, axes], [z]),
        opset_imports=[helper.make_opsetid("", 17)],
        ir_version=IR_VERSION,
    )
    data = np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3)
    prepared = prepare_onnx(model, [data, np.float32(0.0), np.array([1], np.int64)])
    assert prepared.runtime_names == ["x"] and prepared.runtime_indices == [0]
    assert sorted(init.name for init in prepared.model.graph.initializer) == ["axes", "lo"]
    session = ort.InferenceSession(prepared.model.SerializeToString(), providers=["CPUExecutionProvider"])
    (result,) = session.run(None, {"x": data})
    np.testing.assert_allclose(result, np.clip(data, 0, None).sum(axis=1, keepdims=True), rtol=1e-6)


def _corpus_instance(test: str):
    from pathlib import Path

    from opera.corpus import CorpusReader

    harvested = Path(__file__).resolve().parents[1] / "harvested" / "onnx.jsonl.gz"
    return next(i for i in CorpusReader([harvested]) if i.source.test == test)


def test_integer_data_operands_stay_runtime_inputs_parameters_are_frozen() -> None:
    """Frozen, an integer BitShift is folded away at conversion and its kernel never runs: TVM's
    runtime shift of 32+ bits is wrong where the folded one was right (BitShift-28 defines it).
    Data operands (a type variable shared with the output, or with the first operand) stay inputs;
    a shape, an index or a training flag is frozen; ``--onnx-data-inputs constants`` freezes all."""
    from opera.run.targets._onnx_prep import prepare_built
    from opera.templates import get_template

    template = get_template("onnx")
    shift = template.build(_corpus_instance("test_bitshift_left_int32_shift_ge_width"))
    assert prepare_built(shift).runtime_indices == [0, 1]
    frozen = template.build(_corpus_instance("test_bitshift_left_int32_shift_ge_width"), data_inputs="constants")
    assert prepare_built(frozen).runtime_indices == []
    equal = template.build(_corpus_instance("test_equal"))
    assert prepare_built(equal).runtime_indices == [0, 1]
    reshape = template.build(_corpus_instance("test_reshape_reduced_dims"))
    assert prepare_built(reshape).runtime_indices == [0]  # the shape is frozen
    gather = template.build(_corpus_instance("test_gather_0"))
    assert prepare_built(gather).runtime_indices == [0]  # the indices are frozen
    dropout = template.build(_corpus_instance("test_training_dropout_mask"))
    assert prepare_built(dropout).runtime_indices == [0]  # ratio and training_mode are frozen
