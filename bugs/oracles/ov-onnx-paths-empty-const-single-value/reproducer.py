#!/usr/bin/env python3
"""OpenVINO: the offline (MOC) transformations that every ov.convert_model runs die with SIGSEGV
when a pattern predicate calls ov::op::util::get_single_value() on an empty Constant:
normalize_single_value(std::vector<T> vec, ...) reads *vec.begin() without checking that the
vector has an element (transformations/utils/utils.hpp), so an empty Constant dereferences the
begin of an empty std::vector (null).

How Opera met it (oracle `paths`, generated Keras corpus): tf2onnx's export of keras.ops.where /
elu / arctan2 on (0,)-shaped operands. OpenVINO's ONNX frontend, reading a model from a file,
turns a graph input of shape [0] into an empty Constant (translate_graph_from_iterator: "A no-data
graph input is a Parameter unless it is the empty-constant special case"); after constant folding
the Add(Mul(.., Convert(..)), Mul(..)) of the export holds empty Constants, and MOC dies.

Parts (each run in a child process, since the failure kills the process):
  A. the keras.ops.where export, rebuilt by hand as ONNX (7 nodes), onnxruntime -> (0,), then
     ov.convert_model(path);
  B. the same defect without ONNX: apply_moc_transformations on a pure OpenVINO model
     Add(Multiply(Convert(C_bool[0]), Convert(C_u16[0])), Multiply(C_f32[0], C_f32[0])),
     constants from numpy arrays (non-null data pointers).
Needs numpy, onnx, onnxruntime, openvino. Exit 1 while either part dies; 0 when both convert.
"""
import os
import subprocess
import sys
import tempfile
import textwrap

PART_A = textwrap.dedent('''
    import sys
    import numpy as np, onnx, onnxruntime as ort, openvino as ov
    from onnx import TensorProto as T, helper as h
    n = h.make_node
    nodes = [n("Not", ["c"], ["notc"]), n("Cast", ["notc"], ["notc_f"], to=T.FLOAT),
             n("Cast", ["c"], ["c_f"], to=T.FLOAT), n("Mul", ["y", "notc_f"], ["m1"]),
             n("Cast", ["x"], ["x_f"], to=T.FLOAT), n("Mul", ["c_f", "x_f"], ["m2"]),
             n("Add", ["m2", "m1"], ["out"])]
    g = h.make_graph(nodes, "where", [h.make_tensor_value_info("c", T.BOOL, [0]),
                                       h.make_tensor_value_info("x", T.UINT16, [0]),
                                       h.make_tensor_value_info("y", T.FLOAT, [0])],
                     [h.make_tensor_value_info("out", T.FLOAT, [0])])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)]); m.ir_version = 8
    onnx.checker.check_model(m, full_check=True)
    feed = {"c": np.zeros(0, bool), "x": np.zeros(0, np.uint16), "y": np.zeros(0, np.float32)}
    r = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feed)[0]
    print("A: onnxruntime", r.shape, flush=True)
    path = sys.argv[1]
    onnx.save(m, path)
    print("A: read_model(path) ops:", [o.get_type_name() for o in ov.Core().read_model(path).get_ordered_ops()], flush=True)
    print("A: read_model(bytes) inputs:", len(ov.Core().read_model(m.SerializeToString()).inputs), flush=True)
    ov.convert_model(path)
    print("A: convert_model ok", flush=True)
''')

PART_B = textwrap.dedent('''
    import numpy as np, openvino as ov, openvino.opset13 as ops
    from openvino._offline_transformations import apply_moc_transformations
    f32 = ov.Type.f32
    c = lambda dt: ops.constant(np.zeros((0,), dt))
    y = ops.add(ops.multiply(ops.convert(c(np.bool_), f32), ops.convert(c(np.uint16), f32)),
                ops.multiply(c(np.float32), c(np.float32)))
    model = ov.Model([y], [])
    print("B: compile_model without MOC:", ov.Core().compile_model(model, "CPU")({})[0].shape, flush=True)
    apply_moc_transformations(model, cf=False, smart_reshape=True)
    print("B: apply_moc_transformations ok", flush=True)
''')

failed = False
with tempfile.TemporaryDirectory() as tmp:
    for name, code in (("A", PART_A), ("B", PART_B)):
        r = subprocess.run([sys.executable, "-c", code, os.path.join(tmp, "where.onnx")],
                           capture_output=True, text=True, timeout=600)
        print(r.stdout.rstrip())
        if r.returncode != 0:
            died = f"signal {-r.returncode}" if r.returncode < 0 else f"exit {r.returncode}"
            tail = (r.stderr.strip().splitlines() or [""])[-1]
            print(f"{name}: FAILED ({died}) {tail}")
            failed = True
print("REPRODUCED" if failed else "not reproduced")
sys.exit(1 if failed else 0)
