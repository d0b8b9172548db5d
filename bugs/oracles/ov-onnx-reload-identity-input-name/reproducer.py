#!/usr/bin/env python3
"""OpenVINO save_model/read_model drops a Parameter's tensor name when the parameter feeds a Result
directly (an ONNX Sum/Min/Max/Mean with one input, which the ONNX frontend folds to the identity).

The converted model's parameter carries the tensor names {input_0, output_0}; the IR written by
ov.save_model lists only names="output_0" on the Parameter's port, so the read-back model has no
input called "input_0": feeding it by the ONNX input name fails, while the model before saving
accepts it.

Opera signature crash:ov-onnx:rule=reload:InterfaceError (instances 6c8f467b54b744285862
test_sum_one_input, 188a3dcd92c31972587c Min). Needs numpy, onnx, openvino.
Exit 1: the failure shows; 0: it does not.
"""
import os
import sys
import tempfile

import numpy as np
import onnx
import openvino as ov
from onnx import TensorProto, helper

x = np.array([3.0, 0.0, 2.0], np.float32)
graph = helper.make_graph(
    [helper.make_node("Sum", ["input_0"], ["output_0"])], "sum_one_input",
    [helper.make_tensor_value_info("input_0", TensorProto.FLOAT, [3])],
    [helper.make_tensor_value_info("output_0", TensorProto.FLOAT, [3])])
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
model.ir_version = 8
onnx.checker.check_model(model)

core = ov.Core()
with tempfile.TemporaryDirectory() as tmp:
    onnx_path = os.path.join(tmp, "model.onnx")
    onnx.save(model, onnx_path)
    converted = ov.convert_model(onnx_path)
    xml = os.path.join(tmp, "model.xml")
    ov.save_model(converted, xml, compress_to_fp16=False)
    reloaded = core.read_model(xml)
    with open(xml) as f:
        port = [line.strip() for line in f if "names=" in line and "port" in line]
def feed(m):
    try:
        return str(core.compile_model(m, "CPU")({"input_0": x})[0])
    except Exception as e:  # noqa: BLE001
        return "FAILS: " + " ".join(str(e).split())[-60:]


for label, m in (("converted", converted), ("saved and read back", reloaded)):
    print(f"{label:20}: ov.Model parameter tensor names {[sorted(p.get_names()) for p in m.inputs]}, "
          f"results {[sorted(p.get_names()) for p in m.outputs]}; model.input('input_0') "
          f"{'found' if 'input_0' in m.inputs[0].get_names() else 'NOT FOUND'}")
    c = core.compile_model(m, "CPU")
    print(f"{'':20}  compiled: input names {[sorted(p.get_names()) for p in c.inputs]}; fed by 'input_0': {feed(m)}")
print("IR written by save_model:", port)
failed = sorted(converted.inputs[0].get_names()) != sorted(reloaded.inputs[0].get_names())
print("REPRODUCED: save_model/read_model changed the parameter's tensor names" if failed else "not reproduced")
sys.exit(1 if failed else 0)
