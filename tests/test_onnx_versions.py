"""What a node uses that the schema version a versioned converter implements lacks (issue 11,
sample 8): an attribute added later and set to a non-default value is named; types are not."""

from __future__ import annotations

import onnx
from onnx import TensorProto, helper

from opera.run.targets._onnx_versions import (
    newer_features,
    newest_version_types,
    split_type_params,
    widened_domain,
)


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


def test_types_added_by_a_newer_schema_are_not_counted() -> None:
    """A type-generic lowering implements new types (TVM's Cast is astype): only attributes and
    inputs count."""
    assert newer_features(_model("BitShift", TensorProto.INT32, 28, 2, direction="LEFT"), implemented=11) is None
    assert newer_features(_model("Celu", TensorProto.FLOAT16, 28), implemented=12) is None


def test_an_attribute_the_older_schema_lacks_is_named() -> None:
    model = _model("SpaceToDepth", TensorProto.FLOAT, 28, blocksize=1, mode="CRD")
    said = newer_features(model, implemented=13)
    assert said is not None and "attribute mode='CRD'" in said and "in SpaceToDepth-28, not in SpaceToDepth-13" in said
    # spelled out at its default ('DCR'), the attribute asks nothing the older converter does not do
    assert newer_features(_model("SpaceToDepth", TensorProto.FLOAT, 28, blocksize=1, mode="DCR"), implemented=13) is None
    # the converter is as new as the model's schema: nothing is newer
    assert newer_features(model, implemented=28) is None


def test_a_type_the_selected_schema_version_added_is_named_when_the_converter_is_older() -> None:
    """Samples 8 and 11: BitShift-28's signed integers, Celu-28's float16 came with the very
    version the model's opset selects; a converter of an older version cannot implement them. A
    type an earlier version already had is not named (the float8 Casts, judged REAL, stay bugs),
    nor one whose converter is as new as the schema."""
    named = newest_version_types(_model("BitShift", TensorProto.INT32, 28, 2, direction="LEFT"), implemented=11)
    assert named is not None and "tensor(int32) of X" in named and "came with BitShift-28" in named
    assert "came with Celu-28" in (newest_version_types(_model("Celu", TensorProto.FLOAT16, 28), implemented=12) or "")
    assert newest_version_types(_model("BitShift", TensorProto.UINT8, 28, 2, direction="LEFT"), implemented=11) is None
    assert newest_version_types(_model("Celu", TensorProto.FLOAT16, 28), implemented=28) is None
    # float8 came with Cast-19: at opset 25 the version before (Cast-24) has it already
    cast = _model("Cast", TensorProto.FLOAT16, 25, to=TensorProto.FLOAT8E4M3FN)
    cast.graph.output[0].type.tensor_type.elem_type = TensorProto.FLOAT8E4M3FN
    assert newest_version_types(cast, implemented=13) is None


def test_what_a_schema_version_newly_defines_beyond_its_types_is_named() -> None:
    """Mod-28 defines float inputs with fmod=0, which Mod-13's text excluded ('T is constrained to
    integer data types'): named for a converter older than Mod-28, not for integers or fmod=1."""
    named = widened_domain(_model("Mod", TensorProto.FLOAT, 28, 2), implemented=10)
    assert named is not None and "defined since Mod-28" in named
    assert widened_domain(_model("Mod", TensorProto.INT32, 28, 2), implemented=10) is None
    assert widened_domain(_model("Mod", TensorProto.FLOAT, 28, 2, fmod=1), implemented=10) is None
    assert widened_domain(_model("Mod", TensorProto.FLOAT, 28, 2), implemented=28) is None



def test_inputs_a_newer_schema_types_apart_are_named_when_fed_different_types() -> None:
    """Sample 12: Pow(int32 base, float32 exponent) at opset 15 (test_pow_types_int32_float32):
    Pow-12 gave the exponent its own type T1, TVM's only Pow converter is _impl_v7, where base and
    exponent share T ("Binary operators must have the same datatype"). Same types, or a converter
    as new as the split, are not named."""
    mixed = _model("Pow", TensorProto.INT32, 15, 2)
    mixed.graph.input[1].type.tensor_type.elem_type = TensorProto.FLOAT
    named = split_type_params(mixed, implemented=7)
    assert named is not None and "Pow-15 types them apart (T, T1)" in named and "Pow-7 ties them (T)" in named
    assert split_type_params(_model("Pow", TensorProto.FLOAT, 15, 2), implemented=7) is None
    assert split_type_params(mixed, implemented=15) is None


def test_openvino_onnx_library_probe() -> None:
    """What OpenVINO's ONNX frontend library holds (``_ov_onnx_binary``): attribute names its
    converters read, and the newest opset whose schemas it embeds. A name it never holds is read by
    no converter; a schema newer than that opset has no converter."""
    import pytest

    pytest.importorskip("openvino")
    from opera.run.targets._converter_source import unnamed_attributes
    from opera.run.targets._ov_onnx_binary import frontend_library, library_names, newest_known_opset

    assert frontend_library(), "libopenvino_onnx_frontend not found in the openvino package"
    # read by the Attention converter (attention.cpp) and by many others
    assert library_names("softcap") and library_names("keepdims") and library_names("alpha")
    assert not library_names("left_window_size")  # Attention-25's window (sample 14): never read
    known = newest_known_opset()
    assert known is not None and 18 <= known <= onnx.defs.onnx_opset_version()
    # only non-default attributes the library never names are unread
    attention = helper.make_node("Attention", ["q", "k", "v"], ["y"], is_causal=1, left_window_size=2, softcap=0.5)
    assert unnamed_attributes(attention, 25, library_names) == ["left_window_size=2"]
    at_default = helper.make_node("Attention", ["q", "k", "v"], ["y"], left_window_size=-1)
    assert unnamed_attributes(at_default, 25, library_names) == []


def _pool(opset: int) -> onnx.ModelProto:
    node = helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[1, 1], strides=[2, 2], ceil_mode=1)
    graph = helper.make_graph(
        [node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 2, 2])], [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)]
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def test_older_version_output_shapes() -> None:
    """MaxPool-22 ignores windows that would start in the right padding; MaxPool-12 keeps them
    (sample 15): the older version's shapes are given only where the two versions differ, and the
    judge calls a compiler a gap only when its shapes are exactly the older ones."""
    from opera.model import OperatorInstance
    from opera.templates import SingleOpModel, get_template
    from opera.verdict.judge import _older_version

    template = get_template("onnx")

    def built(opset: int, model: onnx.ModelProto) -> SingleOpModel:
        inst = OperatorInstance.__new__(OperatorInstance)
        return SingleOpModel(inst, model, [], ["x"], {"opset": opset})

    found = template.older_version_shapes(built(22, _pool(22)))
    assert found == ("MaxPool-12", [(1, 1, 2, 2)])
    assert template.older_version_shapes(built(21, _pool(21))) is None  # MaxPool-12 selected: nothing older differs
    no_ceil = _pool(22)
    no_ceil.graph.node[0].attribute.pop()  # without ceil_mode the versions agree
    assert template.older_version_shapes(built(22, no_ceil)) is None

    import numpy as np

    reference = [np.zeros((1, 1, 1, 1), np.float32)]
    assert "MaxPool-12 defines" in (_older_version(found, reference, [np.zeros((1, 1, 2, 2), np.float32)]) or "")
    assert _older_version(found, reference, [np.ones((1, 1, 1, 1), np.float32)]) is None  # new shape, wrong value: a bug
    assert _older_version(found, reference, [np.zeros((2, 2), np.float32)]) is None  # some other shape: a bug
