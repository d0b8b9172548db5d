#!/usr/bin/env python3
"""TVM: a compiled Relax module that holds a zero-size constant whose first dimension is not 0
(shape (2, 0)) runs in memory, but its exported library cannot be loaded back:
tvm.runtime.load_module -> VMExecutable::LoadFromBytes -> Tensor::Load:
"Check failed: (read_ret) is false: Invalid DLTensor file format".

Tensor::Load (include/tvm/runtime/tensor.h) reads the 0 data bytes and only skips the check of the
read "if (ndim > 0 && shape[0] != 0)": an empty tensor whose zero is in a later dimension fails.

Opera signature crash:tvm-onnx:rule=reload:tvm/runtime/tensor.h:...Tensor::Load...InternalError
(instances 4dafdb49169e8ddaffc8, c2e562c42de9b9e552f9, 5baddfbc1a503ef1059b, 66f910de1f197fc9c346:
GatherND with empty int64 indices such as (2, 0); 4de6d88a7b551568a8f9: MatMulInteger with a (3, 0) B).
Needs numpy, onnx, onnxruntime, tvm. Exit 1: the failure shows; 0: it does not.
"""
import sys
import tempfile

import numpy as np
import onnx
import onnxruntime as ort
import tvm
from onnx import TensorProto, helper, numpy_helper
from tvm import relax
from tvm.relax.frontend.onnx import from_onnx

# ONNX GatherND (opset 13): data float32 (2, 2, 2) fed at run time, indices an int64 (2, 0, 2) initializer
data = np.arange(8, dtype=np.float32).reshape(2, 2, 2)
indices = np.zeros((2, 0, 2), np.int64)
graph = helper.make_graph(
    [helper.make_node("GatherND", ["data", "indices"], ["y"])], "gathernd",
    [helper.make_tensor_value_info("data", TensorProto.FLOAT, [2, 2, 2])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 0, 2])],
    [numpy_helper.from_array(indices, "indices")])
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
model.ir_version = 8
onnx.checker.check_model(model, full_check=True)
expected = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"data": data})[0]
print("expected (onnxruntime): shape", expected.shape)

failed = False


def check(label, mod, args):
    global failed
    executable = tvm.compile(mod, target="llvm")
    out = relax.VirtualMachine(executable, tvm.cpu())["main"](*[tvm.runtime.tensor(a) for a in args])
    print(f"{label}: compiled and run in memory: shape {out.numpy().shape}")
    with tempfile.TemporaryDirectory() as tmp:
        executable.export_library(f"{tmp}/model.so")
        try:
            lib = tvm.runtime.load_module(f"{tmp}/model.so")
            out = relax.VirtualMachine(lib, tvm.cpu())["main"](*[tvm.runtime.tensor(a) for a in args])
            print(f"{label}: exported, loaded back and run: shape {out.numpy().shape}")
        except Exception as e:  # noqa: BLE001
            print(f"{label}: exported library FAILS to load: {str(e).strip().splitlines()[-1]}  <- WRONG")
            failed = True


check("ONNX GatherND with (2, 0, 2) indices", from_onnx(model, keep_params_in_input=False), [data])

# the same with a bare Relax constant: (2, 0) fails, (0, 2) and (0,) load fine
from tvm.script import relax as R  # noqa: E402

for shape in ((0,), (0, 2), (2, 0)):
    bb = relax.BlockBuilder()
    x = relax.Var("x", R.Tensor((2,), "float32"))
    with bb.function("main", [x]):
        y = bb.emit_te(lambda a: a + 1, x)
        bb.emit_func_output(relax.Tuple([y, relax.const(np.zeros(shape, np.float32))]))
    mod = bb.get()
    executable = tvm.compile(mod, target="llvm")
    with tempfile.TemporaryDirectory() as tmp:
        executable.export_library(f"{tmp}/model.so")
        try:
            tvm.runtime.load_module(f"{tmp}/model.so")
            print(f"Relax constant of shape {shape}: the exported library loads")
        except Exception as e:  # noqa: BLE001
            print(f"Relax constant of shape {shape}: load FAILS: {str(e).strip().splitlines()[-1]}")
            failed = True
print("REPRODUCED" if failed else "not reproduced")
sys.exit(1 if failed else 0)
