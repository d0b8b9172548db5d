#!/usr/bin/env python3
"""TVM Relax ONNX frontend: OneHot with a rank-1 `depth` (a valid form: "Scalar or Rank 1 tensor
containing exactly one element") crashes: the converter passes the list [d] where an int is expected.

Found by Opera's `paths` oracle: Keras ContrastLimitedAdaptiveHistogramEqualization runs on
tvm-keras (TFLite), while its tf2onnx export, which onnxruntime runs, fails on tvm-onnx
(signature crash:tvm-keras:rule=paths:tvm-onnx:tvm/relax/frontend/onnx/onnx_frontend.py:_impl_v11:TypeError).
Needs numpy, onnx, onnxruntime, tvm. Exit status 1: the failure reproduces; 0: it does not.
"""
import sys

import numpy as np
import onnx
import onnxruntime as ort
import tvm
from onnx import TensorProto, helper, numpy_helper
from tvm import relax
from tvm.relax.frontend.onnx import from_onnx

depth = numpy_helper.from_array(np.array([4], np.int64), "depth")  # rank 1, one element
values = numpy_helper.from_array(np.array([0.0, 1.0], np.float32), "values")
graph = helper.make_graph(
    [helper.make_node("OneHot", ["indices", "depth", "values"], ["y"], axis=-1)],
    "onehot",
    [helper.make_tensor_value_info("indices", TensorProto.INT64, [3])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 4])],
    initializer=[depth, values],
)
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)])
model.ir_version = 8
onnx.checker.check_model(model)
indices = np.array([0, 2, 3], np.int64)
expected = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"indices": indices})[0]
print("expected (onnxruntime):\n", expected)
try:
    mod = from_onnx(model, keep_params_in_input=False)
    vm = relax.VirtualMachine(tvm.compile(mod, target="llvm"), tvm.cpu())
    actual = vm["main"](tvm.runtime.tensor(indices)).numpy()
except Exception as exc:
    print("TVM:", type(exc).__name__, str(exc).strip().splitlines()[-1][:300])
    print("REPRODUCED")
    sys.exit(1)
ok = np.array_equal(actual, expected)
print("TVM:\n", actual, "\nnot reproduced" if ok else "\nREPRODUCED (wrong values)")
sys.exit(0 if ok else 1)
