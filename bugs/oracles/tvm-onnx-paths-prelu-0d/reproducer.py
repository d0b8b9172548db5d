#!/usr/bin/env python3
"""TVM Relax ONNX frontend: PRelu on a 0-d input fails to convert. PRelu._impl_v1 takes the branch
`if all(ss == 1 for ss in slope_shape)`, which is vacuously true for a 0-d slope, and calls
relax.op.nn.prelu(x, slope, ndim - 1) with axis -1 on a rank-0 x: "the input axis -1 is out of
range. The input tensor has 0 dimensions". ONNX PRelu puts no rank constraint on X (the slope is
unidirectionally broadcast to X); the checker accepts the model and onnxruntime computes it.

Opera signature crash:tvm-torch:rule=paths:tvm-onnx:tvm/relax/frontend/onnx/onnx_frontend.py:_convert_operator:ValueError
(torch.nn.functional.prelu on a 0-d input with a 0-d weight: torch.onnx exports PRelu(x, 0.8)).
Needs numpy, onnx, onnxruntime, tvm. Exit 1: the failure shows; 0: it does not.
"""
import sys

import numpy as np
import onnx
import onnxruntime as ort
import tvm
from onnx import TensorProto, helper, numpy_helper
from tvm import relax
from tvm.relax.frontend.onnx import from_onnx

failed = False
for x_shape in ((), (1,)):
    graph = helper.make_graph(
        [helper.make_node("PRelu", ["x", "slope"], ["y"])], "prelu",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x_shape))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(x_shape))],
        [numpy_helper.from_array(np.array(0.8, np.float32), "slope")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 16)])
    model.ir_version = 8
    onnx.checker.check_model(model, full_check=True)
    x = np.full(x_shape, -2.0, np.float32)
    expected = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    try:
        vm = relax.VirtualMachine(tvm.compile(from_onnx(model, keep_params_in_input=False), target="llvm"), tvm.cpu())
        got = vm["main"](tvm.runtime.tensor(x)).numpy()
        ok = got.shape == expected.shape and np.allclose(got, expected)
        print(f"PRelu(x{x_shape}=-2, slope 0-d 0.8): onnxruntime {expected.tolist()}, TVM {got.tolist()}{'' if ok else '  <- WRONG'}")
        failed |= not ok
    except Exception as e:  # noqa: BLE001
        msg = str(e).strip().splitlines()[-1]
        print(f"PRelu(x{x_shape}=-2, slope 0-d 0.8): onnxruntime {expected.tolist()}, TVM RAISES {type(e).__name__}: ...{msg[msg.find('the input axis'):]}  <- WRONG")
        failed = True
print("REPRODUCED" if failed else "not reproduced")
sys.exit(1 if failed else 0)
