#!/usr/bin/env python3
"""OpenVINO CPU: ONNX Div on int8 rounds instead of truncating when snippets are disabled.

Found by Opera's `optlevel` oracle (signature inconsistent:ov-onnx:rule=optlevel:onnx::Div).
Needs numpy, onnx, onnxruntime, openvino. Exit status 1: the failure reproduces; 0: it does not.
"""
import sys
import tempfile

import numpy as np
import onnx
import onnxruntime as ort
import openvino as ov
from onnx import TensorProto, helper

a = np.array([12, 18, 14, 15, -12, 7], np.int8)
b = np.array([23, 23, 21, 24, 23, 2], np.int8)
graph = helper.make_graph(
    [helper.make_node("Div", ["a", "b"], ["y"])],
    "div",
    [helper.make_tensor_value_info("a", TensorProto.INT8, [6]), helper.make_tensor_value_info("b", TensorProto.INT8, [6])],
    [helper.make_tensor_value_info("y", TensorProto.INT8, [6])],
)
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
model.ir_version = 8
with tempfile.NamedTemporaryFile(suffix=".onnx") as f:
    onnx.save(model, f.name)
    core = ov.Core()
    ov_model = core.read_model(f.name)
expected = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"a": a, "b": b})[0]
print("expected (onnxruntime; ONNX reference truncates toward zero):", expected)
failed = False
for config in ({"INFERENCE_PRECISION_HINT": "f32"}, {"INFERENCE_PRECISION_HINT": "f32", "SNIPPETS_MODE": "DISABLE"}):
    actual = core.compile_model(ov_model, "CPU", config)({"a": a, "b": b})[0]
    ok = np.array_equal(actual, expected)
    print(f"OpenVINO {config}: {actual} {'ok' if ok else '<- WRONG'}")
    failed |= not ok
print("REPRODUCED" if failed else "not reproduced")
sys.exit(1 if failed else 0)
