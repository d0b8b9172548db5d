"""Baseline FAST (Miranda et al., ICSE 2018): similarity-based prioritization with MinHash + LSH.

Each test's canonical text (operator, then each named parameter with tensors written as
``dtype[shape]``) is shingled into token 3-grams and MinHashed (``datasketch``); an LSH index groups
tests whose estimated Jaccard similarity exceeds ``THRESHOLD``. Following FAST-one, tests are visited
in a seeded random order; a test is picked unless it shares an LSH bucket with a test picked since
the last reset; when every remaining test does, the picked set is reset. So each pass takes tests
dissimilar to the ones already taken, and similar tests wait for later passes.
"""

from __future__ import annotations

import random as _random
import re
from collections.abc import Iterable
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from datasketch import MinHash

from opera.model import OperatorInstance
from opera.prioritize.partitions import named_parameters
from opera.prioritize.strategies import PrioritizeContext, Strategy, register_strategy
from opera.values import TensorSpec

NUM_PERM = 64
THRESHOLD = 0.8
_TOKEN = re.compile(r"\w+|[^\w\s]")


def _text(value: object) -> str:
    if isinstance(value, TensorSpec):
        return f"{value.dtype}[{','.join('?' if d is None else str(d) for d in value.shape)}]"
    if isinstance(value, np.ndarray):
        if value.size <= 16:
            return f"{value.dtype}{value.tolist()}"
        return f"{value.dtype}[{','.join(str(d) for d in value.shape)}]"
    if isinstance(value, (list, tuple)):
        inner = ",".join(_text(v) for v in value)
        return f"[{inner}]" if isinstance(value, list) else f"({inner})"
    if isinstance(value, bytes):
        return f"bytes{len(value)}"
    return repr(value)


def canonical_text(inst: OperatorInstance) -> str:
    return inst.api + "(" + ", ".join(f"{name}={_text(v)}" for name, v in named_parameters(inst)) + ")"


def minhash(text: str, num_perm: int = NUM_PERM) -> MinHash:
    from datasketch import MinHash  # imported here: datasketch pulls in scipy (seconds)

    tokens = _TOKEN.findall(text)
    shingles = {" ".join(tokens[i : i + 3]) for i in range(max(1, len(tokens) - 2))}
    m = MinHash(num_perm=num_perm, seed=1)
    m.update_batch([s.encode() for s in shingles])
    return m


@register_strategy
class FastStrategy(Strategy):
    name = "fast"
    description = "FAST-one: MinHash + LSH dissimilarity passes (datasketch)"
    uses_seed = True

    def order(self, instances: Iterable[OperatorInstance], ctx: PrioritizeContext) -> list[str]:
        from datasketch import MinHashLSH

        ids: list[str] = []
        hashes: dict[str, MinHash] = {}
        for inst in instances:
            iid = inst.id
            if iid not in hashes:
                ids.append(iid)
                hashes[iid] = minhash(canonical_text(inst))
        lsh = MinHashLSH(threshold=THRESHOLD, num_perm=NUM_PERM)
        with lsh.insertion_session() as session:
            for iid in ids:
                session.insert(iid, hashes[iid])
        remaining = list(ids)
        _random.Random(ctx.seed).shuffle(remaining)
        order: list[str] = []
        passes = 0
        while remaining:
            passes += 1
            near_picked: set[str] = set()
            later: list[str] = []
            for iid in remaining:
                if iid in near_picked:
                    later.append(iid)
                    continue
                order.append(iid)
                near_picked.update(lsh.query(hashes[iid]))
            remaining = later
        ctx.notes.update(fast_passes=passes, num_perm=NUM_PERM, threshold=THRESHOLD)
        return order
