#!/usr/bin/env python3
"""OpenVINO ONNX frontend: Loop whose body passes a loop-carried value straight from a body input
to a body output (as tf2onnx emits for RNN weights) fails to convert.

Builds the smallest such model with onnx.helper, checks it with onnx.checker and onnxruntime,
then converts it with openvino.convert_model.
Exit 1: OpenVINO fails on it (the bug shows); 0: it converts and matches onnxruntime.
Set PASSTHROUGH=0 to route the pass-through through an Identity node (the control: converts).
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper

PASSTHROUGH = os.environ.get("PASSTHROUGH", "1") != "0"

# body(iter, cond_in, acc_in, w_in) -> (cond_out, acc_out, w_out)
#   acc_out = acc_in + w_in;  w_out = w_in (the body output IS the body input: a pass-through)
body_nodes = [
    helper.make_node("Identity", ["cond_in"], ["cond_out"]),
    helper.make_node("Add", ["acc_in", "w_in"], ["acc_out"]),
]
if not PASSTHROUGH:
    body_nodes.append(helper.make_node("Identity", ["w_in"], ["w_out"]))
body = helper.make_graph(
    body_nodes,
    "body",
    [
        helper.make_tensor_value_info("iter", TensorProto.INT64, []),
        helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
        helper.make_tensor_value_info("acc_in", TensorProto.FLOAT, [2]),
        helper.make_tensor_value_info("w_in", TensorProto.FLOAT, [2]),
    ],
    [
        helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
        helper.make_tensor_value_info("acc_out", TensorProto.FLOAT, [2]),
        helper.make_tensor_value_info("w_in" if PASSTHROUGH else "w_out", TensorProto.FLOAT, [2]),
    ],
)
graph = helper.make_graph(
    [helper.make_node("Loop", ["M", "cond", "acc0", "w"], ["acc", "w_final"], body=body)],
    "loop_passthrough",
    [
        helper.make_tensor_value_info("acc0", TensorProto.FLOAT, [2]),
        helper.make_tensor_value_info("w", TensorProto.FLOAT, [2]),
    ],
    [
        helper.make_tensor_value_info("acc", TensorProto.FLOAT, [2]),
        helper.make_tensor_value_info("w_final", TensorProto.FLOAT, [2]),
    ],
    initializer=[
        helper.make_tensor("M", TensorProto.INT64, [], [3]),
        helper.make_tensor("cond", TensorProto.BOOL, [], [True]),
    ],
)
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
model.ir_version = 8
onnx.checker.check_model(model, full_check=True)

feeds = {"acc0": np.array([1.0, 2.0], np.float32), "w": np.array([10.0, 20.0], np.float32)}
import onnxruntime as ort

ref = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
print("onnxruntime:", [r.tolist() for r in ref])  # acc = [31, 62], w_final = [10, 20]
assert np.allclose(ref[0], [31.0, 62.0]) and np.allclose(ref[1], [10.0, 20.0])

import openvino as ov

import tempfile

path = os.path.join(tempfile.mkdtemp(), "loop_passthrough.onnx")
onnx.save(model, path)
try:
    ov_model = ov.convert_model(path)
except Exception as exc:  # OpConversionFailure from src/frontends/onnx/frontend/src/op/loop.cpp
    print("OpenVINO convert_model failed:", str(exc).strip().splitlines()[0][:300])
    print(str(exc)[:1500])
    print("REPRODUCED")
    sys.exit(1)
out = ov.Core().compile_model(ov_model, "CPU")(feeds)
got = [out[i] for i in range(len(ov_model.outputs))]
print("openvino:", [g.tolist() for g in got])
ok = all(np.allclose(a, b) for a, b in zip(ref, got))
print("not reproduced" if ok else "REPRODUCED (wrong result)")
sys.exit(0 if ok else 1)
