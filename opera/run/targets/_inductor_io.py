"""What the Inductor targets and their reproducer scripts share: switching Inductor's graph caches
off, pointing a call's ``device="cpu"`` at the target's device, and reading a compiled call's outputs.

Standalone by contract (numpy; torch and ml_dtypes imported inside): reproducer scripts embed this
file verbatim.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["call_kwargs_on", "inductor_graph_caches", "inductor_graph_caches_off", "inductor_to_numpy"]


# torch's own configuration flags of the caches that let a graph seen before skip code generation:
# Inductor's FX graph cache (local and remote) and AOT-autograd's cache (local and remote).
_GRAPH_CACHES = (
    ("torch._inductor.config", "fx_graph_cache"),
    ("torch._inductor.config", "fx_graph_remote_cache"),
    ("torch._functorch.config", "enable_autograd_cache"),
    ("torch._functorch.config", "enable_remote_autograd_cache"),
)


def inductor_graph_caches() -> dict[str, object]:
    """The current value of each graph cache flag, by ``module.flag`` name."""
    import importlib

    return {f"{module}.{flag}": getattr(importlib.import_module(module), flag) for module, flag in _GRAPH_CACHES}


def inductor_graph_caches_off() -> None:
    """Switch off the caches through which a graph compiled before (in this process, or on an
    earlier day from the on-disk cache) skips Inductor's code generation: the code generation
    under test must run on every compile. An environment variable that forces a cache on
    (``TORCHINDUCTOR_FX_GRAPH_CACHE=1``, ``TORCHINDUCTOR_AUTOGRAD_CACHE=1``) wins over these
    settings in torch: then this raises rather than test with a cache on."""
    import importlib

    for module, flag in _GRAPH_CACHES:
        setattr(importlib.import_module(module), flag, False)
    still_on = [name for name, value in inductor_graph_caches().items() if value]
    if still_on:
        raise RuntimeError(f"Inductor graph caches still on (forced by the environment?): {', '.join(still_on)}")


def call_kwargs_on(kwargs: dict[str, Any], device: str) -> dict[str, Any]:
    """A call's keyword arguments with a ``device="cpu"`` (``torch.logspace(..., device="cpu")``,
    as the CPU test suite wrote it) pointed at ``device``: what a user moving the test to a GPU
    writes. Left as it was, the compiled graph mixes devices and Dynamo rejects it ("Unhandled
    FakeTensor Device Propagation ... found two different devices cuda:0, cpu")."""
    if "device" in kwargs and str(kwargs["device"]) == "cpu":
        return {**kwargs, "device": device}
    return kwargs


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
