#!/usr/bin/env python3
"""OpenVINO: ONNX Expand of an input with a zero-size dimension against a 1 in the shape input
fails at compile_model: ConvertBroadcast3 rewrites the bidirectional Broadcast-3 into a numpy
Broadcast-1 whose target shape takes max(input dim, target dim) = max(0, 1) = 1, and the numpy
rule then refuses to broadcast 0 to 1 ("Input shape dimension equal 0 cannot be broadcasted
(numpy mode) to 1"). ONNX Expand broadcasts like numpy: (3, 0) with (1, 1) is (3, 0).

Opera signature crash:ov-torch:rule=paths:ov-onnx:src/core/shape_inference/include/broadcast_shape_inference.hpp:RuntimeError
(torch.Tensor.repeat on (3, 0, 1) / (3, 0): torch.onnx exports Expand(x, [1,1,1,1]) then Tile).
Needs numpy, onnx, onnxruntime, openvino. Exit 1: the failure shows; 0: it does not.
"""
import sys
import tempfile

import numpy as np
import onnx
import onnxruntime as ort
import openvino as ov
from onnx import TensorProto, helper, numpy_helper

failed = False
for x_shape, target in (((3, 0), [1, 1]), ((3, 0, 1), [1, 1, 1, 1]), ((3, 2), [1, 1])):
    out_shape = list(np.broadcast_shapes(x_shape, tuple(target)))
    graph = helper.make_graph(
        [helper.make_node("Expand", ["x", "shape"], ["y"])], "expand",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x_shape))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, out_shape)],
        [numpy_helper.from_array(np.array(target, np.int64), "shape")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.checker.check_model(model, full_check=True)
    x = np.zeros(x_shape, np.float32)
    expected = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    with tempfile.TemporaryDirectory() as tmp:
        onnx.save(model, f"{tmp}/m.onnx")
        try:
            got = ov.Core().compile_model(ov.convert_model(f"{tmp}/m.onnx"), "CPU")([x])[0]
            ok = got.shape == expected.shape
            print(f"Expand(x{x_shape}, {target}): onnxruntime {expected.shape}, OpenVINO {got.shape}{'' if ok else '  <- WRONG'}")
            failed |= not ok
        except Exception as e:  # noqa: BLE001
            lines = [l for l in str(e).splitlines() if l.strip()]
            print(f"Expand(x{x_shape}, {target}): onnxruntime {expected.shape}, OpenVINO RAISES: {lines[-1].strip()}  <- WRONG")
            failed = True
print("REPRODUCED" if failed else "not reproduced")
sys.exit(1 if failed else 0)
