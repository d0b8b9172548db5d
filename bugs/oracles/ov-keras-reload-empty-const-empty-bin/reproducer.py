#!/usr/bin/env python3
"""OpenVINO IR: a model whose only weight is an empty Constant (ReduceMean with axes i32[0], as the
TensorFlow frontend converts keras.ops.mean(x, axis=())) is saved with an empty .bin, and
read_model fails on it with "Check '!!ptr' failed at src/core/shape_inference/include/utils.hpp:50:
ptr is Null".

The empty Constant is made as the TF frontend makes it (from a tensor: written with size="0");
a Constant made from a Python list (written with size="1") or a model with one more non-empty
Constant (a non-empty .bin) reads back fine: those are printed as controls.
Exit 1 while read_model fails; 0 when the reloaded model gives the input back unchanged.
"""
import os
import re
import sys
import tempfile

import numpy as np
import openvino as ov
import openvino.opset13 as ops
from openvino import op

x = np.arange(24, dtype=np.float32).reshape(4, 2, 3)


def roundtrip(axes, extra_weight=False):
    data = ops.parameter([4, 2, 3], ov.Type.f32, name="x")
    out = ops.reduce_mean(data, axes, True)  # no axes: the identity
    if extra_weight:
        out = ops.multiply(out, ops.constant(np.ones((1,), np.float32)))
    model = ov.Model([out], [data])
    path = os.path.join(tempfile.mkdtemp(), "model.xml")
    ov.save_model(model, path, compress_to_fp16=False)
    const = re.findall(r'<data element_type="i32" shape="0"[^>]*>', open(path).read())
    bin_bytes = os.path.getsize(path[:-4] + ".bin")
    try:
        reloaded = ov.Core().read_model(path)
        got = ov.Core().compile_model(reloaded, "CPU")(x)[0]
        return f"IR {const}, .bin {bin_bytes} bytes: read back, output == input: {np.array_equal(got, x)}", True
    except Exception as exc:
        return f"IR {const}, .bin {bin_bytes} bytes: read_model FAILED: {str(exc).strip().splitlines()[-1]}", False


bug_msg, ok = roundtrip(op.Constant(ov.Tensor(np.zeros(0, np.int32))))
print("empty Constant from a tensor      :", bug_msg)
print("control, Constant(type, shape, []):", roundtrip(op.Constant(ov.Type.i32, ov.Shape([0]), []))[0])
print("control, one more non-empty weight:", roundtrip(op.Constant(ov.Tensor(np.zeros(0, np.int32))), extra_weight=True)[0])
print("not reproduced" if ok else "REPRODUCED")
sys.exit(0 if ok else 1)
