"""OpenVINO exposes 8-bit floats as uint8 and sub-byte types as packed bytes: the target unpacks
them so that a Cast to INT4 is compared value by value, not as a (false) shape mismatch."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

ov = pytest.importorskip("openvino")
ml_dtypes = pytest.importorskip("ml_dtypes")

from opera.targets.openvino import _from_ov_tensor  # noqa: E402


def _cast_through_openvino(values: np.ndarray, to: int, tmp_path) -> np.ndarray:
    import onnx

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, list(values.shape))
    y = helper.make_tensor_value_info("y", to, list(values.shape))
    graph = helper.make_graph([helper.make_node("Cast", ["x"], ["y"], to=to)], "g", [x], [y])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)], ir_version=10)
    path = tmp_path / "cast.onnx"
    onnx.save_model(model, str(path))
    compiled = ov.Core().compile_model(ov.convert_model(str(path)), "CPU")
    request = compiled.create_infer_request()
    request.infer([ov.Tensor(values)])
    return _from_ov_tensor(request.get_output_tensor(0))


@pytest.mark.parametrize(
    ("to", "dtype", "values"),
    [
        (TensorProto.INT4, "int4", [-8, -3, -1, 0, 1, 2, 5, 7, 3]),  # odd count: the last byte is half used
        (TensorProto.UINT4, "uint4", [0, 1, 2, 9, 15, 4, 7]),
        (TensorProto.FLOAT8E5M2, "float8_e5m2", [-2.0, -0.5, 0.0, 0.25, 1.5, 3.0]),
        (TensorProto.FLOAT8E4M3FN, "float8_e4m3fn", [-2.0, -0.5, 0.0, 0.25, 1.5, 3.0]),
    ],
)
def test_raw_bit_outputs_come_back_as_values(to: int, dtype: str, values: list[float], tmp_path) -> None:
    source = np.array(values, np.float32).reshape(-1)
    out = _cast_through_openvino(source, to, tmp_path)
    assert out.dtype == np.dtype(getattr(ml_dtypes, dtype))
    assert out.shape == source.shape
    np.testing.assert_array_equal(out.astype(np.float32), source)
