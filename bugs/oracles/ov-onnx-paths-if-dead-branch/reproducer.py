#!/usr/bin/env python3
"""OpenVINO ONNX frontend: an If whose condition is a constant false still has its then_branch
shape-checked, against shapes that branch can never see at run time; a Concat there fails
conversion. tf2onnx exports keras.ops.image.resize(pad_to_aspect_ratio=True) this way: two
tf.cond's pad height or width, at most one runs, and the untaken one concatenates pads sized
from the original image to the already padded one.

Model: pad1 = If(true){Concat(axis 0)(ones[1,3], x)} else {x}   (x: [2,3] -> pad1: [3,3])
       y    = If(false){Concat(axis 1)(ones[2,1], pad1)} else {pad1}   (dead branch: 2 rows vs 3)
onnx.checker (full_check) accepts it; onnxruntime returns pad1 ([3,3]).
Exit 1 while OpenVINO fails to convert it (or differs); 0 when it matches onnxruntime.
"""
import os, sys, tempfile
import numpy as np, onnx, onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper
F = TensorProto.FLOAT
# pad1 = If(true):  then Concat(axis=0)(ones[1,3], x)  -> [3,3];  else Identity(x) -> [2,3]
then1 = helper.make_graph([helper.make_node("Concat", ["one_row", "x"], ["t1"], axis=0)], "then1", [],
                          [helper.make_tensor_value_info("t1", F, ["r", 3])],
                          initializer=[numpy_helper.from_array(np.ones((1, 3), np.float32), "one_row")])
else1 = helper.make_graph([helper.make_node("Identity", ["x"], ["e1"])], "else1", [], [helper.make_tensor_value_info("e1", F, ["r", 3])])
# pad2 = If(false): then Concat(axis=1)(ones[2,1], pad1) (dead: x's row count, not pad1's) ; else Identity(pad1)
then2 = helper.make_graph([helper.make_node("Concat", ["one_col", "pad1"], ["t2"], axis=1)], "then2", [],
                          [helper.make_tensor_value_info("t2", F, ["r", "c"])],
                          initializer=[numpy_helper.from_array(np.ones((2, 1), np.float32), "one_col")])
else2 = helper.make_graph([helper.make_node("Identity", ["pad1"], ["e2"])], "else2", [], [helper.make_tensor_value_info("e2", F, ["r", "c"])])
graph = helper.make_graph(
    [helper.make_node("If", ["c1"], ["pad1"], then_branch=then1, else_branch=else1),
     helper.make_node("If", ["c2"], ["y"], then_branch=then2, else_branch=else2)],
    "dead_branch", [helper.make_tensor_value_info("x", F, [2, 3])], [helper.make_tensor_value_info("y", F, ["r", "c"])],
    initializer=[numpy_helper.from_array(np.array(True), "c1"), numpy_helper.from_array(np.array(False), "c2")])
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]); model.ir_version = 8
onnx.checker.check_model(model, full_check=True)
x = np.arange(6, dtype=np.float32).reshape(2, 3)
ref = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
print("onnxruntime:", ref.shape, ref.tolist())
import openvino as ov
path = os.path.join(tempfile.mkdtemp(), "m.onnx"); onnx.save(model, path)
try:
    m = ov.convert_model(path)
except Exception as exc:
    print("OpenVINO convert_model failed:\n" + "\n".join(l for l in str(exc).splitlines() if "Concat" in l or "Shape inference" in l or "inconsistent" in l))
    sys.exit(1)
got = ov.Core().compile_model(m, "CPU")({"x": x})[0]
print("openvino:", got.shape); sys.exit(0 if np.allclose(got, ref) else 1)
