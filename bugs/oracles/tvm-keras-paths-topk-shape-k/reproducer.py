"""Relax ONNX: TopK whose K input is the output of a Shape node fails to import with
"Node ... cannot handle ShapeExpr inputs": the importer keeps Shape(x) as a relax.ShapeExpr and
refuses it for any operator outside a short list, instead of converting it to a tensor as its own
comment says.

tf2onnx emits this for keras.ops.segment_sum (UnsortedSegmentSum): TopK(ids, K=Shape(ids)), an
ascending argsort. Exits 1 while the bug is there, 0 when TVM imports, builds and matches onnxruntime.
"""
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper

import tvm
from tvm import relax
from tvm.relax.frontend.onnx import from_onnx

nodes = [
    helper.make_node("Shape", ["x"], ["k"]),  # K = [6]: sort the whole axis
    helper.make_node("TopK", ["x", "k"], ["values", "indices"], axis=0, largest=0, sorted=1),
]
graph = helper.make_graph(
    nodes,
    "topk_k_from_shape",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, [6])],
    [
        helper.make_tensor_value_info("values", TensorProto.FLOAT, [6]),
        helper.make_tensor_value_info("indices", TensorProto.INT64, [6]),
    ],
)
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
onnx.checker.check_model(model, full_check=True)

x = np.array([3.0, 1.0, 4.0, 1.5, 5.0, 9.0], np.float32)
expected = ort.InferenceSession(model.SerializeToString()).run(None, {"x": x})

try:
    mod = from_onnx(model, opset=17, keep_params_in_input=False)
    vm = relax.VirtualMachine(tvm.compile(mod, target="llvm"), tvm.cpu())
    got = [t.numpy() for t in vm["main"](tvm.runtime.tensor(x))]
except Exception as exc:  # noqa: BLE001
    print(f"BUG: TVM fails on TopK with K = Shape(x): {type(exc).__name__}: {str(exc).strip().splitlines()[-1]}")
    sys.exit(1)
if any(g.shape != e.shape or not np.array_equal(g, e) for g, e in zip(got, expected)):
    print(f"BUG: TVM gives {got}, onnxruntime {expected}")
    sys.exit(1)
print("OK: TVM matches onnxruntime", got)
sys.exit(0)
