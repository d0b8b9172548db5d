"""Relax ONNX: Expand of a size-1 dimension to a target dimension of 0 is refused at import
("ONNX Expand: Invalid target dimension 0 ... Target dimensions must be >= 1"), although ONNX's
(numpy's) broadcasting rule gives 0 there: np.broadcast_to(np.ones(()), (2, 0, 3)) has shape (2, 0, 3).

tf2onnx emits this for keras.ops.image.resize(pad_to_aspect_ratio=True) when no padding is needed:
the padding branch builds ones of shape [2, 3, 0, 60] with Expand(scalar 1.0, [2, 3, 0, 60]).
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
    helper.make_node("Expand", ["one", "target"], ["pad"]),  # 1.0 -> shape (2, 0, 3)
    helper.make_node("Concat", ["x", "pad"], ["y"], axis=1),  # (2, 4, 3) ++ (2, 0, 3)
]
graph = helper.make_graph(
    nodes,
    "expand_one_to_zero",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4, 3])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4, 3])],
    initializer=[
        numpy_helper.from_array(np.array(1.0, np.float32), "one"),
        numpy_helper.from_array(np.array([2, 0, 3], np.int64), "target"),
    ],
)
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
onnx.checker.check_model(model, full_check=True)

x = np.arange(24, dtype=np.float32).reshape(2, 4, 3)
expected = ort.InferenceSession(model.SerializeToString()).run(None, {"x": x})[0]  # == x
assert np.broadcast_to(np.float32(1.0), (2, 0, 3)).shape == (2, 0, 3)  # numpy's rule

try:
    mod = from_onnx(model, opset=17, keep_params_in_input=False)
    vm = relax.VirtualMachine(tvm.compile(mod, target="llvm"), tvm.cpu())
    got = vm["main"](tvm.runtime.tensor(x)).numpy()
except Exception as exc:  # noqa: BLE001
    print(f"BUG: TVM fails on Expand of 1 to 0: {type(exc).__name__}: {str(exc).strip().splitlines()[-1]}")
    sys.exit(1)
if got.shape != expected.shape or not np.array_equal(got, expected):
    print(f"BUG: TVM gives {got.shape}, onnxruntime {expected.shape}")
    sys.exit(1)
print("OK: TVM matches onnxruntime", got.shape)
sys.exit(0)
