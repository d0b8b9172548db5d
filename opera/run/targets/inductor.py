"""``torch.compile`` with the Inductor backend: ``inductor-torch`` (CPU), ``inductor-torch-cuda``.

``torch.compile`` is lazy: nothing is traced until the first call. So ``convert`` wraps the module
(after ``torch._dynamo.reset()``, so no state leaks between tests and the recompile limit is never
hit), ``compile`` makes the first call on the example inputs (Dynamo tracing + Inductor codegen:
crashes here are compile-stage crashes) and ``run`` calls it again. ``fullgraph=True``: a graph
break would silently fall back to eager and compare eager with eager; Dynamo's refusal is reported
instead (an "unsupported" pattern).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

import numpy as np

from opera.run.targets import Target, register_target
from opera.run.targets._artifacts import flatten_outputs, torch_inputs
from opera.templates import SingleOpModel

__all__ = ["InductorCudaTarget", "InductorTarget"]


@dataclass
class CompiledCall:
    fn: Any
    example_inputs: tuple[Any, ...]
    device: str


class InductorTarget(Target):
    name = "inductor-torch"
    library = "torch"
    compiler = "inductor"
    frontend_paths = ("torch/_dynamo", "torch/_inductor", "torch/_functorch", "torch/_subclasses")
    coverage_stages = ("convert", "compile")
    device = "cpu"

    def availability(self) -> str | None:
        try:
            import torch
        except Exception as exc:
            return f"torch is not importable: {type(exc).__name__}: {exc}"
        if self.device == "cuda" and not torch.cuda.is_available():
            return "no CUDA device"
        import shutil

        if self.device == "cpu" and shutil.which("g++") is None and shutil.which("c++") is None:
            return "no C++ compiler (g++) for Inductor's CPU code generation"
        return None

    def versions(self) -> dict[str, str]:
        import torch

        out = {"torch": str(torch.__version__)}
        try:
            import triton

            out["triton"] = triton.__version__
        except Exception:
            pass
        if self.device == "cuda":
            out["cuda"] = str(torch.version.cuda)
        return out

    def convert(self, built: SingleOpModel) -> CompiledCall:
        import torch

        torch._dynamo.reset()
        model = built.model
        if self.device != "cpu" and hasattr(model, "to"):
            model = copy.deepcopy(model).to(self.device)  # .to() is in place: keep the CPU reference intact
        args = tuple(x.to(self.device) if isinstance(x, torch.Tensor) else x for x in torch_inputs(built))
        fn = torch.compile(model, backend="inductor", fullgraph=True, dynamic=False)
        return CompiledCall(fn, args, self.device)

    def compile(self, converted: CompiledCall) -> CompiledCall:
        import torch

        with torch.no_grad():
            converted.fn(*_fresh(converted.example_inputs))
        return converted

    def run(self, compiled: CompiledCall, inputs: list[np.ndarray]) -> list[np.ndarray]:
        import torch

        args = tuple(
            torch.from_numpy(np.asarray(x, order="C")).to(compiled.device) if isinstance(x, np.ndarray) else x for x in inputs
        )
        with torch.no_grad():
            result = compiled.fn(*args)
        return flatten_outputs(result, to_numpy=_to_numpy)


def _fresh(args: tuple[Any, ...]) -> tuple[Any, ...]:
    """Clones, so an in-place operator in the compile call does not change the run's inputs."""
    import torch

    return tuple(a.clone() if isinstance(a, torch.Tensor) else a for a in args)


def _to_numpy(value: Any) -> np.ndarray:
    import torch

    if isinstance(value, torch.Tensor):
        value = value.detach().cpu()
        if value.dtype == torch.bfloat16:
            import ml_dtypes

            return value.contiguous().view(torch.uint16).numpy().view(ml_dtypes.bfloat16)
        return value.resolve_conj().resolve_neg().numpy()
    return np.asarray(value)


register_target(InductorTarget)


@register_target
class InductorCudaTarget(InductorTarget):
    name = "inductor-torch-cuda"
    needs_gpu = True
    device = "cuda"
