#!/usr/bin/env python3
"""[TOPI] argmax / argmin return -1 for a row whose every element equals the reducer's initial value
(the dtype's minimum for argmax, its maximum for argmin, -inf / +inf for floats): keras.ops.argmax of a
uint8 all-zero row gives -1 instead of 0 (bugs/oracles/tvm-keras-paths-argmax-minimum-value).

The comm-reducer identity is (index -1, min_value) and the combiner keeps the accumulator's index on a tie
when it is the smaller one, so the identity's -1 beats every real index when no element is bigger than
min_value. Shown three ways: Keras -> TFLite ARG_MAX -> TVM (tvm-keras), ONNX ArgMax -> TVM (tvm-onnx),
and a bare relax.op.argmax / argmin.

Exit status 1 while the bug is there, 0 when fixed. Needs keras (TensorFlow backend), tensorflow, tflite,
onnx, tvm.
"""
import os
import sys

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
import numpy as np
import keras
import onnx
import tensorflow as tf
import tflite
import tvm
from onnx import TensorProto, helper
from tvm import relax
from tvm.relax.frontend.onnx import from_onnx
from tvm.relax.frontend.tflite import from_tflite

failed = False


def report(what, expected, got):
    global failed
    bad = not np.array_equal(np.asarray(expected), np.asarray(got))
    failed |= bad
    print(f"{what}: expected {np.asarray(expected).tolist()}, TVM {np.asarray(got).tolist()}{'  <- WRONG' if bad else ''}")


x = np.array([[0, 0], [1, 1]], np.uint8)

# 1. Keras -> TFLite (ARG_MAX) -> TVM
inp = keras.Input(batch_shape=x.shape, dtype="uint8")
model = keras.Model(inp, keras.layers.Lambda(lambda t: keras.ops.argmax(t, axis=1))(inp))
keras_out = np.asarray(model(x))
buf = tf.lite.TFLiteConverter.from_keras_model(model).convert()
interp = tf.lite.Interpreter(model_content=buf)
interp.allocate_tensors()
interp.set_tensor(interp.get_input_details()[0]["index"], x)
interp.invoke()
tfl_out = interp.get_tensor(interp.get_output_details()[0]["index"])
print(f"keras.ops.argmax({x.tolist()}, axis=1): numpy {np.argmax(x, 1).tolist()}, keras {keras_out.tolist()}, tflite {tfl_out.tolist()}")
vm = relax.VirtualMachine(tvm.compile(from_tflite(tflite.Model.GetRootAsModel(buf, 0)), target="llvm"), tvm.cpu())
report("  tvm-keras (TFLite ARG_MAX)", tfl_out, vm["main"](tvm.runtime.tensor(x)).numpy())

# 2. ONNX ArgMax(uint8) -> TVM
node = helper.make_node("ArgMax", ["x"], ["y"], axis=1, keepdims=0)
graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.UINT8, [2, 2])],
                          [helper.make_tensor_value_info("y", TensorProto.INT64, [2])])
proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
onnx.checker.check_model(proto)
vm = relax.VirtualMachine(tvm.compile(from_onnx(proto), target="llvm"), tvm.cpu())
report("  tvm-onnx (ONNX ArgMax uint8)", np.argmax(x, 1), vm["main"](tvm.runtime.tensor(x)).numpy())

# 3. bare Relax argmax / argmin at each dtype's extreme
cases = [
    ("argmax", np.array([[0, 0], [1, 1]], np.uint8)),
    ("argmax", np.array([[-128, -128], [5, 5]], np.int8)),
    ("argmax", np.array([[-np.inf, -np.inf], [1, 1]], np.float32)),
    ("argmin", np.array([[255, 255], [1, 1]], np.uint8)),
    ("argmin", np.array([[np.inf, np.inf], [1, 1]], np.float32)),
]
for op, arr in cases:
    bb = relax.BlockBuilder()
    v = relax.Var("x", relax.TensorType(arr.shape, str(arr.dtype)))
    with bb.function("main", [v]):
        with bb.dataflow():
            gv = bb.emit_output(getattr(relax.op, op)(v, axis=1))
        bb.emit_func_output(gv)
    vm = relax.VirtualMachine(tvm.compile(bb.get(), target="llvm"), tvm.cpu())
    report(f"  relax.op.{op}({arr.tolist()}, axis=1) {arr.dtype}", getattr(np, op)(arr, 1), vm["main"](tvm.runtime.tensor(arr)).numpy())

print("REPRODUCED" if failed else "not reproduced")
sys.exit(1 if failed else 0)
