#!/usr/bin/env python3
"""TVM Relax: squeeze(expand_dims(x, [0]), [0]) on an empty x (shape [0, 1, 3]) fails to compile:
RewriteDataflowReshape (in tvm.compile's default CPU pipeline) emits a reshape to [1, 1, 1, 3].

Found by Opera's `transforms` oracle: torch `x.unsqueeze(0).squeeze(0) * c` (the view round trip
TorchProbe's rewrites add) on tvm-torch, while `x * c` alone runs
(signature crash:tvm-torch:rule=transforms:tvm/ir/transform.py:__call__:ValueError).
Needs numpy, torch, tvm. Exit status 1: the failure reproduces; 0: it does not.
"""
import sys

import numpy as np
import torch
import tvm
from tvm import relax
from tvm.relax.frontend.torch import from_exported_program


class RoundTrip(torch.nn.Module):
    def forward(self, x):
        return x.unsqueeze(0).squeeze(0) * 2.0


x = torch.zeros(0, 1, 3)
expected = RoundTrip()(x)
mod = from_exported_program(torch.export.export(RoundTrip(), (x,)))
try:
    vm = relax.VirtualMachine(tvm.compile(mod, target="llvm"), tvm.cpu())
    actual = vm["main"](tvm.runtime.tensor(x.numpy()))
except Exception as exc:
    print("TVM:", type(exc).__name__, str(exc).strip().splitlines()[-1][:300])
    print("REPRODUCED")
    sys.exit(1)
print("torch:", tuple(expected.shape), "TVM ran: not reproduced")
sys.exit(0)
