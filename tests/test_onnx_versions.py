"""What a node uses that the schema version a versioned converter implements lacks (issue 11,
sample 8): a type or attribute added later is named, what the older schema has is not."""

from __future__ import annotations

import onnx
from onnx import TensorProto, helper

from opera.run.targets._onnx_versions import newer_features


def _model(op: str, elem: int, opset: int, n_inputs: int = 1, **attrs: object) -> onnx.ModelProto:
    names = [f"x{k}" for k in range(n_inputs)]
    node = helper.make_node(op, names, ["y"], **attrs)
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info(n, elem, [3]) for n in names],
        [helper.make_tensor_value_info("y", elem, [3])],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def test_a_type_added_by_a_newer_schema_is_named() -> None:
    said = newer_features(_model("BitShift", TensorProto.INT32, 28, 2, direction="LEFT"), implemented=11)
    assert said is not None
    assert "input #0 of type tensor(int32)" in said and "in BitShift-28, not in BitShift-11" in said
    said = newer_features(_model("Celu", TensorProto.FLOAT16, 28), implemented=12)
    assert said is not None and "tensor(float16)" in said and "in Celu-28, not in Celu-12" in said


def test_what_the_older_schema_has_is_not_named() -> None:
    assert newer_features(_model("BitShift", TensorProto.UINT32, 28, 2, direction="LEFT"), implemented=11) is None
    assert newer_features(_model("Celu", TensorProto.FLOAT, 28), implemented=12) is None
    # the converter is as new as the model's schema: nothing is newer
    assert newer_features(_model("BitShift", TensorProto.INT32, 28, 2, direction="LEFT"), implemented=28) is None


def test_an_attribute_the_older_schema_lacks_is_named() -> None:
    model = _model("SpaceToDepth", TensorProto.FLOAT, 28, blocksize=1, mode="CRD")
    said = newer_features(model, implemented=13)
    assert said is not None and "attribute mode" in said and "SpaceToDepth-13" in said
