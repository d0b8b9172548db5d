"""Relax ONNX: Reshape whose `shape` input is a computed int64 tensor (not an initializer) fails to
import: the converter hands the tensor to relax.op.reshape, which only takes a Shape.

The shape here is even computable from constants alone (tf2onnx's Einsum lowering in Keras's
EinsumDense / MultiHeadAttention / einsum emits exactly this: Concat([-1], ReduceProd(Gather(Shape(W))))).
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

w = np.zeros((1, 3, 4), np.float32)
nodes = [
    helper.make_node("Shape", ["W"], ["w_shape"]),
    helper.make_node("Gather", ["w_shape", "idx"], ["dims"]),
    helper.make_node("ReduceProd", ["dims"], ["prod"], keepdims=1),
    helper.make_node("Concat", ["minus_one", "prod"], ["new_shape"], axis=0),
    helper.make_node("Reshape", ["x", "new_shape"], ["y"]),
]
graph = helper.make_graph(
    nodes,
    "reshape_computed_shape",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 4])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 12])],
    initializer=[
        numpy_helper.from_array(w, "W"),
        numpy_helper.from_array(np.array([1, 2], np.int64), "idx"),
        numpy_helper.from_array(np.array([-1], np.int64), "minus_one"),
    ],
)
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
onnx.checker.check_model(model, full_check=True)

x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
expected = ort.InferenceSession(model.SerializeToString()).run(None, {"x": x})[0]  # (2, 12)

try:
    mod = from_onnx(model, opset=17, keep_params_in_input=False)
    vm = relax.VirtualMachine(tvm.compile(mod, target="llvm"), tvm.cpu())
    got = vm["main"](tvm.runtime.tensor(x)).numpy()
except Exception as exc:  # noqa: BLE001
    print(f"BUG: TVM fails on a valid Reshape with a computed shape: {type(exc).__name__}: {str(exc).strip().splitlines()[-1]}")
    sys.exit(1)
if got.shape != expected.shape or not np.array_equal(got, expected):
    print(f"BUG: TVM gives {got.shape}, onnxruntime {expected.shape}")
    sys.exit(1)
print("OK: TVM matches onnxruntime", got.shape)
sys.exit(0)
