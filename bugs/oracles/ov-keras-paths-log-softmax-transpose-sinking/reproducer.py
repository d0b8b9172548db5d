#!/usr/bin/env python3
"""OpenVINO TensorFlow frontend: log_softmax over a non-last axis loses its axis.

TensorFlow computes tf.nn.log_softmax(x, axis=1) as Transpose -> LogSoftmax (last axis) ->
Transpose. OpenVINO's TF frontend runs transpose sinking (TSGeneral) after conversion, and
TSUnaryForward treats v5::LogSoftmax as an element-wise unary op: the Transpose is moved through it
without remapping its axis, the two Transposes cancel, and what is left is LogSoftmax on the last
axis. tf.nn.softmax (same Transpose pattern) is the control: it keeps its Transposes.

Exit 1 while OpenVINO's log_softmax differs from TensorFlow's; 0 when it matches.
"""
import sys

import numpy as np
import openvino as ov
import tensorflow as tf

x = np.array([[[0.27, -0.46, -0.92], [-0.97, 0.63, 0.83]]], np.float32)  # [1, 2, 3]


def convert(fn):
    concrete = tf.function(fn, input_signature=[tf.TensorSpec([1, 2, 3], tf.float32)]).get_concrete_function()
    model = ov.convert_model(concrete)
    ops = [(op.get_type_name(), op.get_axis() if op.get_type_name() in ("LogSoftmax", "Softmax") else None)
           for op in model.get_ordered_ops() if op.get_type_name() not in ("Parameter", "Result", "Constant")]
    out = ov.Core().compile_model(model, "CPU")(x)[0]
    return ops, np.asarray(out)


def log_softmax_axis1(t):
    return tf.nn.log_softmax(t, axis=1)


def softmax_axis1(t):
    return tf.nn.softmax(t, axis=1)


failed = False
for name, fn in (("log_softmax", log_softmax_axis1), ("softmax (control)", softmax_axis1)):
    expected = fn(tf.constant(x)).numpy()
    ops, got = convert(fn)
    ok = np.allclose(got, expected, atol=1e-5)
    print(f"{name}: OpenVINO ops {ops}; max |ov - tf| = {float(np.abs(got - expected).max()):.4f}")
    if name == "log_softmax" and not ok:
        print("  tf :", expected.ravel().round(4).tolist())
        print("  ov :", got.ravel().round(4).tolist())
        print("  tf.nn.log_softmax(x, axis=-1):", tf.nn.log_softmax(x, axis=-1).numpy().ravel().round(4).tolist())
        failed = True
print("REPRODUCED" if failed else "not reproduced")
sys.exit(1 if failed else 0)
