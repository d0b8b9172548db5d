"""Relax ONNX: an If whose two branches return tensors of different rank (allowed by the ONNX spec:
the If output's shape "represents the union of both possible shapes") gives a Relax tensor of unknown
rank; the element-wise operator after it is never legalized and tvm.compile stops in VM codegen:
"CodeGenVM cannot emit this Relax operator directly". The condition here is even a constant.

tf2onnx emits this for keras.ops.inner on two 1-element vectors: If(const False, then: x * y of
shape (1,), else: reshape(matmul) of shape ()), then Cast to the result dtype.
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

then_branch = helper.make_graph(
    [helper.make_node("Mul", ["x", "x"], ["t"])], "then", [], [helper.make_tensor_value_info("t", TensorProto.FLOAT, [1])]
)
else_branch = helper.make_graph(
    [helper.make_node("Reshape", ["x", "empty_shape"], ["e"])],
    "else",
    [],
    [helper.make_tensor_value_info("e", TensorProto.FLOAT, [])],
    initializer=[numpy_helper.from_array(np.zeros((0,), np.int64), "empty_shape")],
)
nodes = [
    helper.make_node("If", ["cond"], ["r"], then_branch=then_branch, else_branch=else_branch),
    helper.make_node("Cast", ["r"], ["y"], to=TensorProto.INT16),  # any element-wise op after the If
]
graph = helper.make_graph(
    nodes,
    "if_branch_rank",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
    [helper.make_tensor_value_info("y", TensorProto.INT16, [])],
    initializer=[numpy_helper.from_array(np.array(False), "cond")],
)
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
onnx.checker.check_model(model, full_check=True)

x = np.array([3.0], np.float32)
expected = ort.InferenceSession(model.SerializeToString()).run(None, {"x": x})[0]  # int16 scalar 3

try:
    mod = from_onnx(model, opset=17, keep_params_in_input=False)
    vm = relax.VirtualMachine(tvm.compile(mod, target="llvm"), tvm.cpu())
    got = vm["main"](tvm.runtime.tensor(x)).numpy()
except Exception as exc:  # noqa: BLE001
    lines = [line for line in str(exc).strip().splitlines() if line.strip()]
    print(f"BUG: TVM fails on If with branch outputs of rank 1 and 0: {type(exc).__name__}: {lines[0]} {lines[-1]}")
    sys.exit(1)
if got.shape != expected.shape or not np.array_equal(got, expected):
    print(f"BUG: TVM gives {got!r}, onnxruntime {expected!r}")
    sys.exit(1)
print("OK: TVM matches onnxruntime", got)
sys.exit(0)
