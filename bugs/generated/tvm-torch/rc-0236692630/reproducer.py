#!/usr/bin/env python3
"""[Relax torch] div(rounding_mode)/floor_divide, fmod, clamp with tensor bounds, cat and slice_scatter do not promote mixed dtypes

Standalone reproducer (torch + tvm only). Exit status 1 while the bug is there, 0 when fixed.
Each case: torch.export the model, tvm.relax.frontend.torch.from_exported_program, tvm.compile
(llvm), run on the Relax VM, and compare with torch eager.
"""
import sys
import warnings

import numpy as np
import torch

warnings.filterwarnings("ignore")
import tvm  # noqa: E402
from tvm import relax  # noqa: E402
from tvm.relax.frontend.torch import from_exported_program  # noqa: E402


class Fn(torch.nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, *args):
        return self.fn(*args)


def flat(x):
    if hasattr(x, "numpy"):
        return [x.numpy()]
    if isinstance(x, (tuple, list)) or hasattr(x, "__iter__"):
        return [y for v in x for y in flat(v)]
    return [np.asarray(x)]


def check(name, model, *args):
    expected = flat(model(*args))
    try:
        ep = torch.export.export(model, args)
        mod = from_exported_program(ep)
        vm = relax.VirtualMachine(tvm.compile(mod, target="llvm"), tvm.cpu())
        got = flat(vm["main"](*[tvm.runtime.tensor(a.numpy()) for a in args]))
    except Exception as exc:  # noqa: BLE001
        print(f"FAIL {name}: {type(exc).__name__}: {str(exc).strip().splitlines()[-1][:240]}")
        return False
    ok = len(got) == len(expected) and all(
        g.shape == e.shape and np.allclose(g.astype(np.float64), e.astype(np.float64), equal_nan=True, atol=1e-5)
        for g, e in zip(got, expected)
    )
    print(("ok   " if ok else "FAIL ") + f"{name}" + ("" if ok else f": expected {expected}, got {got}"))
    return ok


results = []

i = torch.tensor([[-8], [6], [9]])          # int64
f = torch.tensor([3.6, -8.0, 0.5])          # float32
results.append(check("floor_divide(int64, float32)", Fn(torch.floor_divide), i, f))
results.append(check("div(int64, float32, rounding_mode='trunc')", Fn(lambda a, b: torch.div(a, b, rounding_mode="trunc")), i, f))
results.append(check("fmod(float32, int64)", Fn(torch.fmod), f, torch.tensor([3, -2, 2])))
results.append(check("clamp_min(float32, int64 tensor)", Fn(torch.clamp_min), f, torch.tensor(1)))
results.append(check("clamp_max(int64, float32 tensor)", Fn(torch.clamp_max), i, torch.tensor(2.5)))
results.append(check("cat([int64, float32])", Fn(lambda a, b: torch.cat([a, b])), torch.tensor([1, 2]), torch.tensor([0.5])))
results.append(check("slice_scatter(float32, int64 src)", Fn(lambda a, b: a.slice_scatter(b, 0, 0, 2)), torch.zeros(4), torch.tensor([1, 2])))
results.append(check("control: add(int64, float32) (promoted by _binary_op)", Fn(torch.add), i, f))

if all(results):
    print("not reproduced: every case matches torch")
    sys.exit(0)
print("REPRODUCED")
sys.exit(1)
