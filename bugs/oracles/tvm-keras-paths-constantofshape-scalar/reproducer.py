"""Relax ONNX: ConstantOfShape with an empty `input` (the output is a scalar, per the ONNX spec)
fails to import: the converter broadcasts the one-element 1-D `value` tensor to the rank-0 shape.

tf2onnx emits this for keras.ops.segment_sum on 1-D data: ConstantOfShape(Slice(Shape(data), 1:)).
Exits 1 while the bug is there, 0 when TVM imports, builds and matches onnxruntime.
"""
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

import tvm
from tvm import relax
from tvm.relax.frontend.onnx import from_onnx

nodes = [
    helper.make_node("Shape", ["x"], ["x_shape"]),
    helper.make_node("Slice", ["x_shape", "one", "big", "zero"], ["rest"]),  # shape[1:] of a 1-D x: []
    helper.make_node(
        "ConstantOfShape", ["rest"], ["c"], value=helper.make_tensor("value", TensorProto.FLOAT, [1], [2.5])
    ),
    helper.make_node("Add", ["x", "c"], ["y"]),  # (6,) + scalar
]
graph = helper.make_graph(
    nodes,
    "constant_of_shape_scalar",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, [6])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, [6])],
    initializer=[
        numpy_helper.from_array(np.array([1], np.int64), "one"),
        numpy_helper.from_array(np.array([2**62], np.int64), "big"),
        numpy_helper.from_array(np.array([0], np.int64), "zero"),
    ],
)
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
onnx.checker.check_model(model, full_check=True)

x = np.arange(6, dtype=np.float32)
expected = ort.InferenceSession(model.SerializeToString()).run(None, {"x": x})[0]  # x + 2.5

try:
    mod = from_onnx(model, opset=17, keep_params_in_input=False)
    vm = relax.VirtualMachine(tvm.compile(mod, target="llvm"), tvm.cpu())
    got = vm["main"](tvm.runtime.tensor(x)).numpy()
except Exception as exc:  # noqa: BLE001
    print(f"BUG: TVM fails on ConstantOfShape with an empty shape: {type(exc).__name__}: {str(exc).strip().splitlines()[-1]}")
    sys.exit(1)
if got.shape != expected.shape or not np.allclose(got, expected):
    print(f"BUG: TVM gives {got}, onnxruntime {expected}")
    sys.exit(1)
print("OK: TVM matches onnxruntime", got)
sys.exit(0)
