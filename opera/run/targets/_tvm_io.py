"""What the TVM targets and their reproducer scripts share: the layout conversion tried when a
compile fails (tvm-keras), reading the VM's results as numpy, and the complex64 encoding of TVM's
TFLite frontend.

Standalone by contract (the standard library, numpy, and tvm imported inside the functions): a
reproducer script embeds this file verbatim, so it compiles, feeds and decodes exactly as the
target did.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["legalizable_layouts", "tflite_complex_to_pairs", "tflite_pairs_to_complex", "tvm_to_numpy"]


def legalizable_layouts(mod: Any) -> Any:
    """``mod`` with every Relax op whose legalization accepts only channels-first layouts
    (``tvm/relax/transform/legalize_ops/nn.py``, ``_nn_conv{1,2,3}d_transpose``) converted to those
    layouts (data, kernel), ``permute_dims`` around it; the same object when nothing changed.
    """
    import tvm
    import tvm_ffi
    from tvm import relax

    desired = {
        "relax.nn.conv1d_transpose": ["NCW", "IOW"],
        "relax.nn.conv2d_transpose": ["NCHW", "IOHW"],
        "relax.nn.conv3d_transpose": ["NCDHW", "IODHW"],
    }
    converted = tvm.transform.Sequential(
        [relax.transform.ConvertLayout(desired), relax.transform.Normalize()]
    )(mod)
    return mod if tvm_ffi.structural_equal(converted, mod) else converted


def tvm_to_numpy(value: Any) -> np.ndarray:
    if hasattr(value, "numpy"):
        return value.numpy()
    return np.asarray(value)


def tflite_complex_to_pairs(x: Any) -> Any:
    """complex64[...] -> float32[..., 2] (real, imaginary), as TVM's TFLite frontend types it."""
    arr = np.asarray(x)
    if arr.dtype.kind != "c":
        return x
    return np.ascontiguousarray(arr.astype(np.complex64)).view(np.float32).reshape((*arr.shape, 2))


def tflite_pairs_to_complex(y: Any) -> Any:
    """float32[..., 2] -> complex64[...]: a complex output of TVM's TFLite frontend read back."""
    arr = np.asarray(y)
    if arr.dtype != np.float32 or arr.ndim == 0 or arr.shape[-1] != 2:
        return y
    return np.ascontiguousarray(arr).view(np.complex64)[..., 0]
