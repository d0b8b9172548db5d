"""What the Inductor targets and their reproducer scripts share: reading a compiled call's outputs.

Standalone by contract (numpy; torch and ml_dtypes imported inside): reproducer scripts embed this
file verbatim.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["inductor_to_numpy"]


def inductor_to_numpy(value: Any) -> np.ndarray:
    """A compiled call's output leaf as numpy (bfloat16 kept as ml_dtypes' bfloat16)."""
    import torch

    if isinstance(value, torch.Tensor):
        value = value.detach().cpu()
        if value.dtype == torch.bfloat16:
            import ml_dtypes

            return value.contiguous().view(torch.uint16).numpy().view(ml_dtypes.bfloat16)
        return value.resolve_conj().resolve_neg().numpy()
    return np.asarray(value)
