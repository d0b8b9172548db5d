#!/usr/bin/env python3
"""OpenVINO ONNX frontend: an initializer with a zero-size dimension (dims [1, 0, 3]) is read as a
tensor of shape [] (a scalar), so Abs of it has output shape [] instead of [1, 0, 3].

Seen while building Opera's `paths` oracle (the harness had frozen an empty runtime input into an
initializer). Needs numpy, onnx, onnxruntime, openvino. Exit status 1: reproduces; 0: does not.
"""
import sys
import tempfile

import numpy as np
import onnx
import onnxruntime as ort
import openvino as ov
from onnx import TensorProto, helper, numpy_helper

x = numpy_helper.from_array(np.zeros((1, 0, 3), np.float32), "x")
graph = helper.make_graph(
    [helper.make_node("Abs", ["x"], ["y"])],
    "abs",
    [],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 0, 3])],
    initializer=[x],
)
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
model.ir_version = 8
expected = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {})[0]
with tempfile.NamedTemporaryFile(suffix=".onnx") as f:
    onnx.save(model, f.name)
    ov_model = ov.convert_model(f.name)
print("converted output:", ov_model.outputs[0].partial_shape)
request = ov.Core().compile_model(ov_model, "CPU").create_infer_request()
request.infer([])
actual = request.get_output_tensor(0).data
print("expected (onnxruntime):", expected.shape, "OpenVINO:", actual.shape)
failed = actual.shape != expected.shape
print("REPRODUCED" if failed else "not reproduced")
sys.exit(1 if failed else 0)
