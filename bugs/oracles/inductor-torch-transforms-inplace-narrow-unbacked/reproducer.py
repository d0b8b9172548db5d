#!/usr/bin/env python3
"""torch.compile: torch.narrow with a 0-d tensor `start`, applied to a tensor that was mutated in
place (a clone, then neg_() or add_()), fails to compile with fullgraph=True:
BackendCompilerFailed / PendingUnbackedSymbolNotFound "Pending unbacked symbols {u4, u3} not in
returned outputs". The failure is in AOTAutograd's tracing (backend='aot_eager' fails the same way);
the same narrow without the in-place op, or with the out-of-place -(-x), compiles, and eager runs
all of them. An in-place op on a fresh clone does not change what the program computes.

Opera signature crash:inductor-torch:rule=transforms:torch/_dynamo/eval_frame.py:_fn:BackendCompilerFailed
(instance 5f9578abcc3dd8d5bb0f, torch.narrow(x[5,5,5], 1, tensor(0), 0), rewrite 'negate-twice').
Needs torch. Exit 1: the failure shows; 0: it does not.
"""
import sys

import torch

x = torch.randn(5, 5, 5)
start = torch.tensor(0)


def plain(x, s):
    return torch.narrow(x.clone(), 1, s, 2)


def out_of_place(x, s):
    return torch.narrow(-(-x), 1, s, 2)


def in_place(x, s):
    y = x.clone()
    y.neg_()
    y.neg_()
    return torch.narrow(y, 1, s, 2)


failed = False
for backend in ("inductor", "aot_eager"):
    for fn in (plain, out_of_place, in_place):
        torch._dynamo.reset()
        expected = fn(x, start)
        try:
            got = torch.compile(fn, backend=backend, fullgraph=True, dynamic=False)(x, start)
            ok = torch.equal(got, expected)
            print(f"{backend:9} {fn.__name__:12}: eager {tuple(expected.shape)}, compiled {tuple(got.shape)}{'' if ok else '  <- WRONG'}")
            failed |= not ok
        except Exception as e:  # noqa: BLE001
            line = next((l for l in str(e).splitlines() if "PendingUnbacked" in l), str(e).splitlines()[0])
            print(f"{backend:9} {fn.__name__:12}: eager {tuple(expected.shape)}, compile RAISES {type(e).__name__}: {line[:150]}  <- WRONG")
            failed = True
print("REPRODUCED" if failed else "not reproduced")
sys.exit(1 if failed else 0)
