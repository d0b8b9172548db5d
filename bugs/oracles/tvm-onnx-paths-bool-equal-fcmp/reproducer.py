#!/usr/bin/env python3
"""TVM: an equality (or inequality) comparison of two bool tensors cannot be built for llvm: the
LLVM code generator emits a floating-point compare on i1 ("fcmp oeq i1 ...") and the LLVM module
verifier rejects it ("Invalid operand types for FCmp instruction"). CodeGenLLVM::VisitExpr_(EQNode)
uses ICmpEQ only for is_int() || is_uint() and FCmpOEQ otherwise; bool has its own type code
(kDLBool = 6 in TVM 0.27), so it falls into the float branch. Reached from ONNX Equal on bool inputs
(Equal-11+ allows tensor(bool)), and from a bare TE compute.

Opera signature crash:tvm-torch:rule=paths:tvm-onnx:tvm/tirx/build.py:codegen_build:InternalError
(torch.unravel_index and torch.bucketize: their torch.onnx exports contain Equal(bool, bool)).
Needs numpy, onnx, onnxruntime, tvm. Exit 1: the failure shows; 0: it does not.
"""
import sys

import numpy as np
import onnx
import onnxruntime as ort
import tvm
from onnx import TensorProto, helper
from tvm import relax, te
from tvm.relax.frontend.onnx import from_onnx

failed = False
print("tvm.DataType('bool').type_code =", tvm.DataType("bool").type_code, "(kDLInt 0, kDLUInt 1, kDLFloat 2)")
for np_type, onnx_type in ((np.bool_, TensorProto.BOOL), (np.int32, TensorProto.INT32)):
    graph = helper.make_graph(
        [helper.make_node("Equal", ["a", "b"], ["y"])], "equal",
        [helper.make_tensor_value_info("a", onnx_type, [3]), helper.make_tensor_value_info("b", onnx_type, [3])],
        [helper.make_tensor_value_info("y", TensorProto.BOOL, [3])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.checker.check_model(model, full_check=True)
    a = np.array([1, 0, 1]).astype(np_type)
    b = np.array([1, 1, 0]).astype(np_type)
    expected = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"a": a, "b": b})[0]
    label = f"ONNX Equal({np.dtype(np_type).name}[3], {np.dtype(np_type).name}[3])"
    try:
        vm = relax.VirtualMachine(tvm.compile(from_onnx(model, keep_params_in_input=False), target="llvm"), tvm.cpu())
        got = vm["main"](tvm.runtime.tensor(a), tvm.runtime.tensor(b)).numpy()
        ok = got.tolist() == expected.tolist()
        print(f"{label}: onnxruntime {expected.tolist()}, TVM {got.tolist()}{'' if ok else '  <- WRONG'}")
        failed |= not ok
    except Exception as e:  # noqa: BLE001
        lines = [l.strip() for l in str(e).splitlines() if "fcmp" in l or "FCmp" in l]
        print(f"{label}: onnxruntime {expected.tolist()}, TVM build RAISES: {' | '.join(lines[:2])}  <- WRONG")
        failed = True
# the same without the ONNX frontend: a TE compute of a == b on bool placeholders
x = te.placeholder((3,), "bool", name="x")
y = te.placeholder((3,), "bool", name="y")
z = te.compute((3,), lambda i: x[i] == y[i], name="z")
try:
    tvm.compile(tvm.IRModule({"main": te.create_prim_func([x, y, z])}), target="llvm")
    print("TE compute x[i] == y[i] on bool: builds")
except Exception as e:  # noqa: BLE001
    print("TE compute x[i] == y[i] on bool: build RAISES:", [l.strip() for l in str(e).splitlines() if "fcmp" in l][:1], " <- WRONG")
    failed = True
print("REPRODUCED" if failed else "not reproduced")
sys.exit(1 if failed else 0)
