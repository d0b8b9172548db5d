#!/usr/bin/env python3
"""TVM Relax ONNX frontend: a static dimension of size 0 (dim_value: 0) becomes a symbolic one, so
Mul of an empty input with an empty initializer cannot be legalized and VM codegen fails.

Found by Opera's `paths` oracle: torch `x.mul(c)` on empty tensors runs on tvm-torch, while its
torch.onnx export (which onnxruntime runs) fails on tvm-onnx
(signature crash:tvm-torch:rule=paths:tvm-onnx:tvm/relax/vm_build.py:_vmcodegen:InternalError).
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

c = numpy_helper.from_array(np.zeros((0, 10, 3), np.float32), "c")
graph = helper.make_graph(
    [helper.make_node("Mul", ["x", "c"], ["y"])],
    "mul",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, [0, 1, 3])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, [0, 10, 3])],
    initializer=[c],
)
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
model.ir_version = 8
onnx.checker.check_model(model)
x = np.zeros((0, 1, 3), np.float32)
expected = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
print("expected (onnxruntime):", expected.shape)
mod = from_onnx(model, keep_params_in_input=False)
print("Relax input:", mod["main"].params[0].ty)  # (v, 1, 3): the static 0 became a variable
try:
    vm = relax.VirtualMachine(tvm.compile(mod, target="llvm"), tvm.cpu())
    actual = vm["main"](tvm.runtime.tensor(x)).numpy()
except Exception as exc:
    print("TVM:", type(exc).__name__, str(exc).strip().splitlines()[0])
    print("REPRODUCED")
    sys.exit(1)
print("TVM:", actual.shape, "not reproduced")
sys.exit(0 if actual.shape == expected.shape else 1)
