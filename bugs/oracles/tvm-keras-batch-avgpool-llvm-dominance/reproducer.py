"""LLVM codegen: relax avg_pool2d (NHWC, pool (1, 3), stride 1) on a (1, 4, 8, 3) float32 tensor fails
tvm.compile: "LLVM module verification failed ... Instruction does not dominate all uses!" (a
shufflevector). The same operator on a (2, 4, 8, 3) tensor builds and runs.

Keras AdaptiveAveragePooling2D((4, 4)) on a (1, 8, 8, 3) input lowers (TFLite) to AVERAGE_POOL_2D
with filter (1, 3) on a (1, 4, 8, 3) tensor: the batch-1 slice of Opera's batch rule fails to build.
Exits 1 while the bug is there, 0 when TVM builds it and matches numpy.
"""
import sys

import numpy as np

import tvm
from tvm import relax


def build(shape):
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType(shape, "float32"))
    with bb.function("main", [x]):
        with bb.dataflow():
            y = bb.emit_output(relax.op.nn.avg_pool2d(x, pool_size=[1, 3], strides=[1, 1], layout="NHWC"))
        bb.emit_func_output(y)
    return relax.VirtualMachine(tvm.compile(bb.get(), target="llvm"), tvm.cpu())


def expected(x):  # mean over a (1, 3) window, stride 1, no padding
    return np.stack([x[:, :, j : j + 3, :].mean(axis=2) for j in range(x.shape[2] - 2)], axis=2)


build((2, 4, 8, 3))  # the batch of 2 builds
x = np.random.default_rng(0).standard_normal((1, 4, 8, 3)).astype(np.float32)
try:
    vm = build((1, 4, 8, 3))
    got = vm["main"](tvm.runtime.tensor(x)).numpy()
except Exception as exc:  # noqa: BLE001
    lines = [line for line in str(exc).splitlines() if line.strip()]
    print("BUG: avg_pool2d on (1, 4, 8, 3) fails to build:", type(exc).__name__, "|", " | ".join(lines[-3:]))
    sys.exit(1)
if not np.allclose(got, expected(x), atol=1e-5):
    print("BUG: wrong result", np.abs(got - expected(x)).max())
    sys.exit(1)
print("OK: builds and matches numpy", got.shape)
sys.exit(0)
