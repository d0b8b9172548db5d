#!/usr/bin/env python3
"""[OV ONNX] blocked QuantizeLinear (block_size > 0) without y_zero_point fails conversion.

Standalone: needs numpy, onnx, openvino. Exit 1 while the bug is there, 0 when fixed.
QuantizeLinear-21, x float32[3,4], y_scale float32[3,2] (axis=1, block_size=2), no y_zero_point.
The spec's default zero point is 0; onnxruntime gives the expected values below.
"""
import os, sys, tempfile
import numpy as np
import onnx
from onnx import helper, numpy_helper, TensorProto
import openvino as ov

x = np.array([[6, -8, -10, 5], [1, 8, 4, 5], [0, 20, 10, 4]], np.float32)
scale = np.array([[1.5, 2.5], [3, 4.9], [5.1, 6.9]], np.float32)
# round(x / scale) with each scale repeated over its block of 2 along axis 1, saturated to uint8
expected = np.array([[4, 0, 0, 2], [0, 3, 1, 1], [0, 4, 1, 1]], np.uint8)

node = helper.make_node("QuantizeLinear", ["x", "s"], ["y"], axis=1, block_size=2)
graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 4])],
                          [helper.make_tensor_value_info("y", TensorProto.UINT8, [3, 4])],
                          initializer=[numpy_helper.from_array(scale, "s")])
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)], ir_version=10)
onnx.checker.check_model(model, full_check=True)
fd, path = tempfile.mkstemp(suffix=".onnx"); os.close(fd)
onnx.save(model, path)
try:
    try:
        compiled = ov.Core().compile_model(ov.convert_model(path), "CPU")
    except Exception as e:  # the defect: OpConversionFailure from Reshape shape inference
        print("convert_model failed:", "\n".join(str(e).splitlines()[-8:]))
        print("REPRODUCED: blocked QuantizeLinear without a zero point does not convert")
        sys.exit(1)
finally:
    os.unlink(path)
got = compiled(x)[0]
print("got", got.tolist(), "expected", expected.tolist())
if not np.array_equal(got, expected):
    print("REPRODUCED: wrong values")
    sys.exit(1)
print("fixed")
sys.exit(0)
