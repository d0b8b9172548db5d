"""[CPU plugin] Convolution whose input has a zero-size spatial dimension but whose padding makes
the output non-empty is never executed: the output is uninitialized memory instead of zeros.

ONNX ConvInteger-10 (the Opera instance: x uint8 [1, 1, 0, 3], pads [1, 1, 1, 1], w [2, 1, 2, 2] of
ones, x_zero_point 1, w_zero_point [0, 1]) and plain Conv-11 (x float32 [1, 1, 0, 3], same w, pads):
the output is [1, 2, 1, 4]; every window covers padding only, so every element is 0
(onnx.reference agrees). OpenVINO's CPU plugin returns leftovers of earlier allocations.

Exit 1 while the bug is there (some attempt returns a non-zero element), 0 when fixed.
"""
import os
import sys
import tempfile

import numpy as np
import onnx
import openvino as ov
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

ATTEMPTS = 20


def conv_integer():
    w = np.ones((2, 1, 2, 2), np.uint8)
    wz = np.array([0, 1], np.uint8)
    node = helper.make_node("ConvInteger", ["x", "w", "xz", "wz"], ["y"], pads=[1, 1, 1, 1])
    graph = helper.make_graph(
        [node], "conv_integer",
        [helper.make_tensor_value_info("x", TensorProto.UINT8, [1, 1, 0, 3]),
         helper.make_tensor_value_info("xz", TensorProto.UINT8, [])],
        [helper.make_tensor_value_info("y", TensorProto.INT32, [1, 2, 1, 4])],
        initializer=[numpy_helper.from_array(w, "w"), numpy_helper.from_array(wz, "wz")])
    feeds = {"x": np.zeros((1, 1, 0, 3), np.uint8), "xz": np.array(1, np.uint8)}
    return graph, 10, feeds


def conv():
    w = np.ones((2, 1, 2, 2), np.float32)
    node = helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1])
    graph = helper.make_graph(
        [node], "conv",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 0, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2, 1, 4])],
        initializer=[numpy_helper.from_array(w, "w")])
    return graph, 11, {"x": np.zeros((1, 1, 0, 3), np.float32)}


def scribbler(core):
    """A model whose output buffer has the same size, run first to leave non-zero bytes behind."""
    graph = helper.make_graph(
        [helper.make_node("Add", ["a", "b"], ["c"])], "scribble",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, 2, 1, 4]) for n in "ab"],
        [helper.make_tensor_value_info("c", TensorProto.FLOAT, [1, 2, 1, 4])])
    return graph


def to_model(graph, opset):
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    onnx.checker.check_model(model, full_check=True)
    return model


def main():
    core = ov.Core()
    tmp = tempfile.mkdtemp()
    scribble_path = os.path.join(tmp, "scribble.onnx")
    onnx.save(to_model(scribbler(core), 13), scribble_path)
    failed = False
    for name, (graph, opset, feeds) in {"ConvInteger": conv_integer(), "Conv": conv()}.items():
        model = to_model(graph, opset)
        expected = ReferenceEvaluator(model).run(None, feeds)[0]
        assert expected.shape == (1, 2, 1, 4) and not expected.any(), expected
        path = os.path.join(tmp, f"{name}.onnx")
        onnx.save(model, path)
        bad = 0
        for attempt in range(ATTEMPTS):
            scribble = core.compile_model(scribble_path, "CPU")
            scribble({"a": np.full((1, 2, 1, 4), -7.5e9, np.float32), "b": np.ones((1, 2, 1, 4), np.float32)})
            compiled = core.compile_model(core.read_model(path), "CPU")
            got = compiled(feeds)[0]
            if got.shape != expected.shape or np.any(got != expected):
                bad += 1
                if bad <= 2:
                    print(f"{name} attempt {attempt}: expected all 0, got {got.shape} {got.ravel().tolist()}")
            del scribble, compiled
        print(f"{name}: {bad} of {ATTEMPTS} attempts differ from onnx.reference (all zeros)")
        failed |= bad > 0
    print("REPRODUCED" if failed else "not reproduced")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
