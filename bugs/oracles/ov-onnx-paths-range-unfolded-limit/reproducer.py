#!/usr/bin/env python3
"""OpenVINO CPU plugin: an ONNX Range whose limit is computed from constants by an op the ONNX
frontend does not fold at conversion (CumSum) fails at compile_model: "Can not create StaticMemory
object. The memory desc is undefined" (src/plugins/intel_cpu/src/cpu_memory.cpp). The converted
model declares the Range output [?]; the same Range with a literal limit, with ReduceSum(const)
as limit (folded: declared [3]) or with a runtime-computed limit compiles and runs.

Opera signature crash:ov-torch:rule=paths:ov-onnx:src/plugins/intel_cpu/src/cpu_memory.cpp:RuntimeError
(torch.Tensor.repeat_interleave with constant repeats [0, 1, 2]: torch.onnx exports
Range(0, Squeeze(Gather(CumSum(repeats), -1)), 1) and further ops on it).
Needs numpy, onnx, onnxruntime, openvino. Exit 1: the failure shows; 0: it does not.
"""
import sys
import tempfile

import numpy as np
import onnx
import onnxruntime as ort
import openvino as ov
from onnx import TensorProto, helper, numpy_helper


def i64(value, name):
    return numpy_helper.from_array(np.array(value, np.int64), name)


def check(label, nodes, inits):
    graph = helper.make_graph(nodes, "range", [], [helper.make_tensor_value_info("y", TensorProto.INT64, ["n"])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 8
    onnx.checker.check_model(model, full_check=True)
    expected = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {})[0]
    with tempfile.TemporaryDirectory() as tmp:
        onnx.save(model, f"{tmp}/m.onnx")
        converted = ov.convert_model(f"{tmp}/m.onnx")
        declared = str(converted.outputs[0].partial_shape)
        try:
            got = ov.Core().compile_model(converted, "CPU")([])[0]
            ok = got.tolist() == expected.tolist()
            print(f"{label}: onnxruntime {expected.tolist()}, OpenVINO (declared {declared}) {got.tolist()}{'' if ok else '  <- WRONG'}")
            return not ok
        except Exception as e:  # noqa: BLE001
            print(f"{label}: onnxruntime {expected.tolist()}, OpenVINO (declared {declared}) RAISES: {str(e).strip().splitlines()[-1]}  <- WRONG")
            return True


failed = check("Range(0, Squeeze(CumSum([3])), 1)",
               [helper.make_node("CumSum", ["r", "axis"], ["c"]), helper.make_node("Squeeze", ["c", "axes"], ["limit"]),
                helper.make_node("Range", ["start", "limit", "delta"], ["y"])],
               [i64([3], "r"), i64(0, "axis"), i64([0], "axes"), i64(0, "start"), i64(1, "delta")])
# controls: the same Range with a literal limit, and with a limit OpenVINO folds (ReduceSum of a constant)
failed |= check("Range(0, 3, 1)", [helper.make_node("Range", ["start", "limit", "delta"], ["y"])],
                [i64(0, "start"), i64(3, "limit"), i64(1, "delta")])
failed |= check("Range(0, ReduceSum([0, 1, 2]), 1)",
                [helper.make_node("ReduceSum", ["r"], ["limit"], keepdims=0), helper.make_node("Range", ["start", "limit", "delta"], ["y"])],
                [i64([0, 1, 2], "r"), i64(0, "start"), i64(1, "delta")])
print("REPRODUCED" if failed else "not reproduced")
sys.exit(1 if failed else 0)
