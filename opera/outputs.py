"""Flattening a model's outputs into the list of arrays the oracles compare: the one implementation.

Every reference (torch, Keras, onnxruntime, onnx.reference) and every target (the TVM VM, Inductor,
OpenVINO) returns its outputs in its own nesting: tuples, lists, dicts, ``torch.return_types``, TVM
containers, ``None`` for an absent ONNX optional. The oracle compares flat lists position by
position, so all of them flatten here, with a per-caller ``to_numpy`` for the leaves.

Standalone by contract (the standard library and numpy only): reproducer scripts embed this file
verbatim, so a reproducer reads outputs exactly as the target did (a second, hand-written copy is
how a TVM ``Shape`` false alarm once happened).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

__all__ = ["flatten_outputs"]


def _is_tvm_shape(value: Any) -> bool:
    # tvm_ffi.Shape subclasses tuple, so it must be caught before the tuple case
    return type(value).__name__ == "Shape" and type(value).__module__.startswith("tvm")


def _is_container(value: Any) -> bool:
    # tvm.ffi.Array / tvm.runtime containers: iterable, not a tensor
    return type(value).__name__ in ("Array", "ADT", "Tuple") and isinstance(value, Iterable)


def flatten_outputs(value: Any, to_numpy: Callable[[Any], Any] = np.asarray) -> list[np.ndarray]:
    """Nested tuples / lists / dicts (values in order) / containers -> a flat list of arrays, in order.

    A TVM ``Shape`` (ONNX ``Shape``'s output) is one int64 tensor, not N scalars; ``None`` (an ONNX
    optional left empty, a torch op's absent output) is skipped; every other leaf goes through
    ``to_numpy``, which may raise ``TypeError`` for a leaf it cannot compare.
    """
    out: list[np.ndarray] = []

    def walk(v: Any) -> None:
        if v is None:
            return
        if isinstance(v, dict):
            for key in v:
                walk(v[key])
        elif _is_tvm_shape(v):
            out.append(np.asarray(list(v), dtype=np.int64))
        elif isinstance(v, (list, tuple)) or _is_container(v):
            for item in v:
                walk(item)
        else:
            out.append(np.asarray(to_numpy(v)))

    walk(value)
    return out
