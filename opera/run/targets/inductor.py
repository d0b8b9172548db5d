"""``torch.compile`` with the Inductor backend: ``inductor-torch`` (CPU), ``inductor-torch-cuda``.

``torch.compile`` is lazy: nothing is traced until the first call. So ``convert`` wraps the module
(after ``torch._dynamo.reset()``, so no state leaks between tests and the recompile limit is never
hit), ``compile`` makes the first call on the example inputs (Dynamo tracing + Inductor codegen:
crashes here are compile-stage crashes) and ``run`` calls it again. ``fullgraph=True``: a graph
break would silently fall back to eager and compare eager with eager; Dynamo's refusal is reported
instead (an "unsupported" pattern).

Inductor's FX graph cache and AOT-autograd cache are switched off (``inductor_graph_caches_off``,
in the target and in its reproducer scripts): with them on, a graph compiled before (in the same
worker: ``torch.X`` and ``torch.Tensor.X`` give one graph; on a later night: the on-disk cache)
skips code generation entirely, so the code generation under test would not run.
"""

from __future__ import annotations

import copy
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from opera.outputs import flatten_outputs
from opera.reproduce.steps import EAGER_LOAD, TORCH_LOAD, ReproducerSteps, eager_call, exported_program
from opera.run.targets import (
    ArtifactError,
    NotApplicable,
    Target,
    fixed_cost_undone,
    harness_step,
    register_target,
)
from opera.run.targets._artifacts import aten_ops, export_torch, torch_inputs, torch_tensor
from opera.run.targets._inductor_io import call_kwargs_on, inductor_graph_caches_off, inductor_to_numpy
from opera.templates import SingleOpModel

__all__ = ["InductorCudaTarget", "InductorTarget"]


@dataclass
class CompiledCall:
    fn: Any
    example_inputs: tuple[Any, ...]
    device: str
    built: SingleOpModel | None = None  # what was compiled: its library's own checks, on a failure


class InductorTarget(Target):
    name = "inductor-torch"
    library = "torch"
    compiler = "inductor"
    issue_tracker = "https://github.com/pytorch/pytorch/issues"
    frontend_paths = ("torch/_dynamo", "torch/_inductor", "torch/_functorch", "torch/_subclasses")
    coverage_stages = ("convert", "compile")
    requires = ("torch",)
    device = "cpu"
    # Inductor's fixed cost per compiled graph (C++ compile, link and load: ~0.8 s) dwarfs the
    # kernel of one operator; independent parts keep one loop nest each in one C++ function.
    batchable = True
    batch_pays = True  # 1,000 random torch instances: docs/results.md (batched compilation)
    unsupported_patterns: tuple[str, ...] = (
        # fullgraph=True: Dynamo refuses a graph break instead of silently running eager
        r"^torch\._dynamo\.exc\.Unsupported:",
        # a data-dependent size or value torch.compile documents it cannot specialize on (one_hot
        # without num_classes, tensor_split by a tensor, gaussian_nll_loss's value check):
        # "GuardOnDataDependentSymNode: Could not extract specialized integer from data-dependent expression u0"
        r"Could not (extract specialized integer from|guard on) data-dependent expression",
        # "TypeError: Got unsupported ScalarType ComplexHalf"
        r"Got unsupported ScalarType ",
    )

    def availability(self) -> str | None:
        reason = super().availability()
        if reason is not None:
            return reason
        import torch

        if self.device == "cuda" and not torch.cuda.is_available():
            return "no CUDA device"
        import shutil

        if self.device == "cpu" and shutil.which("g++") is None and shutil.which("c++") is None:
            return "no C++ compiler (g++) for Inductor's CPU code generation"
        forced = [name for name in _CACHE_FORCING_ENV if os.environ.get(name) == "1"]
        if forced:
            return f"{', '.join(forced)}=1 forces an Inductor graph cache on (code generation would be skipped)"
        return None

    def versions(self) -> dict[str, str]:
        import torch

        out = super().versions()
        try:
            import triton

            out["triton"] = triton.__version__
        except Exception:
            pass
        if self.device == "cuda":
            out["cuda"] = str(torch.version.cuda)
        return out

    def converter_name(self, built: SingleOpModel) -> str | None:
        return aten_ops(built)

    def batch_culprits(self, exc: BaseException, combined: SingleOpModel | None = None) -> set[int]:
        """The parts whose operator's Python function Dynamo was tracing when it gave up on the
        batch: the functions of the "from user code:" stack its message prints (``File ..., in
        linear_cross_entropy``), matched to each part's API by name."""
        parts = getattr(getattr(combined, "model", None), "parts", None)
        frames = dynamo_user_frames(str(exc))
        if parts is None or not frames:
            return set()
        return {k for k, part in enumerate(parts) if str(getattr(part, "api", "")).rsplit(".", 1)[-1] in frames}

    def reproducer_steps(self, built: SingleOpModel) -> ReproducerSteps:
        """The same eager call the target compiles (``torch.compile`` of the operator call, not of an
        exported program: ``program.module()`` fails differently, e.g. "Attempt to trace generator"
        for ``torch.unique``); the export path only when the call cannot be pickled without Opera."""
        from opera import outputs
        from opera.reproduce.steps import embed
        from opera.run.targets import _inductor_io

        device = self.device
        eager = eager_call(built)
        on_device = ""  # as Opera: the model, and its call's device keyword, on the target's device
        if device != "cpu":
            on_device = f"model = model.to({device!r})\n"
            if eager is not None:
                on_device += f"spec['kwargs'] = call_kwargs_on(spec['kwargs'], {device!r})\n"
        run = (
            embed(outputs, _inductor_io)
            + on_device
            + f"args = tuple(_to_torch(x).to({device!r}) for x in INPUTS)\n"
            "torch._dynamo.reset()\n"
            "inductor_graph_caches_off()  # as Opera: a graph compiled before must not skip code generation\n"
            "compiled = torch.compile(model, backend='inductor', fullgraph=True, dynamic=False)\n"
            "with torch.no_grad():\n"
            "    compiled(*[a.clone() for a in args])  # the first call traces and generates code\n"
            "    result = compiled(*args)\n"
            "outputs = flatten_outputs(result, to_numpy=inductor_to_numpy)\n"
        )
        if eager is None:
            return exported_program(built), list(built.inputs), TORCH_LOAD + "model = program.module()\n" + run
        load = TORCH_LOAD.replace("program = torch.export.load(io.BytesIO(ARTIFACT))", EAGER_LOAD)
        return eager, list(built.inputs), load + run


    def convert(self, built: SingleOpModel) -> CompiledCall:
        import torch

        torch._dynamo.reset()
        if not fixed_cost_undone("inductor-graph-caches"):
            with harness_step("switch Inductor's graph caches off"):
                inductor_graph_caches_off()
        model = built.model
        if self.device != "cpu" and hasattr(model, "to"):
            model = placed_on(model, self.device)
        fn = torch.compile(model, backend="inductor", fullgraph=True, dynamic=False)
        return CompiledCall(fn, _inputs_on(built, self.device), self.device, built)

    def compile_variant(self, converted: CompiledCall, variant: str) -> CompiledCall:
        """``optlevel``: the same call compiled again with Inductor's optimizations off
        (``UNOPTIMIZED_OPTIONS``: scalar C++ loops, no fusion, no pattern rewrites). ``reload`` does
        not apply: a ``torch.compile``d function has no serialized form (AOTInductor packages are
        another compiler entry point)."""
        import torch

        if variant == "reload":
            raise NotApplicable("torch.compile has no serialized form to reload (AOTInductor is not this target)")
        if variant != "optlevel":
            return super().compile_variant(converted, variant)
        torch._dynamo.reset()
        model = converted.fn._orig_mod if hasattr(converted.fn, "_orig_mod") else None
        if model is None:
            raise NotApplicable("the compiled call does not expose its original function")
        fn = torch.compile(model, backend="inductor", fullgraph=True, dynamic=False, options=dict(UNOPTIMIZED_OPTIONS))
        return self.compile(CompiledCall(fn, converted.example_inputs, converted.device, converted.built))

    def compile(self, converted: CompiledCall) -> CompiledCall:
        import torch

        with torch.no_grad():
            try:
                converted.fn(*_fresh(converted.example_inputs))
            except Exception as exc:
                if converted.built is not None and _fake_tensor_call_failed(exc):
                    _library_rejects_too(converted.built)
                broken = corrupt_cache_entries(exc)
                if not broken:
                    raise
                # a kernel library an interrupted compile left empty in the shared cache (a killed
                # worker, a full disk): not the operator's failure. Remove it and compile again.
                with harness_step("remove a corrupt Inductor cache entry and compile again"):
                    for path in broken:
                        path.unlink(missing_ok=True)
                    torch._dynamo.reset()
                converted.fn(*_fresh(converted.example_inputs))
        return converted

    def run(self, compiled: CompiledCall, inputs: list[np.ndarray]) -> list[np.ndarray]:
        import torch

        args = tuple(torch_tensor(x).to(compiled.device) if isinstance(x, np.ndarray) else x for x in inputs)
        with torch.no_grad():
            result = compiled.fn(*args)
        return flatten_outputs(result, to_numpy=inductor_to_numpy)


# The ``optlevel`` variant's Inductor options: no vectorization (one lane), no fusion of kernels or
# epilogues, no pattern-matcher rewrites: plain loops per operation, which must compute the same.
UNOPTIMIZED_OPTIONS: dict[str, Any] = {
    "cpp.simdlen": 1,
    "max_fusion_size": 1,
    "epilogue_fusion": False,
    "pattern_matcher": False,
}


# Environment variables with which torch forces a graph cache on, over ``inductor_graph_caches_off``.
_CACHE_FORCING_ENV = ("TORCHINDUCTOR_FX_GRAPH_CACHE", "TORCHINDUCTOR_AUTOGRAD_CACHE")


_CORRUPT_LIBRARY = re.compile(r"(/\S+?\.so): (?:file too short|invalid ELF header)")


def corrupt_cache_entries(exc: BaseException) -> list[Path]:
    """Kernel libraries in Inductor's own cache directory that the exception says cannot be loaded
    because they are truncated or not a library at all (``ImportError: ....main.so: file too
    short``): what an interrupted compile leaves behind, which every later compile of the same
    kernel would load again."""
    from torch._inductor.runtime.cache_dir_utils import cache_dir

    root = Path(cache_dir()).resolve()
    found: list[Path] = []
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        for match in _CORRUPT_LIBRARY.finditer(str(exc)):
            path = Path(match.group(1))
            if path.resolve().is_relative_to(root) and path not in found:
                found.append(path)
        exc = exc.__cause__ or exc.__context__  # type: ignore[assignment]
    return found


def _fresh(args: tuple[Any, ...]) -> tuple[Any, ...]:
    """Clones, so an in-place operator in the compile call does not change the run's inputs."""
    import torch

    return tuple(a.clone() if isinstance(a, torch.Tensor) else a for a in args)


def placed_on(model: Any, device: str) -> Any:
    """A copy of ``model`` on ``device`` (``.to()`` is in place: the CPU reference stays intact),
    its calls' ``device="cpu"`` keyword pointed at ``device`` too (``call_kwargs_on``), also for a
    call a rule wrapped in a module of its own."""
    moved = copy.deepcopy(model).to(device)
    for module in moved.modules() if hasattr(moved, "modules") else [moved]:
        kwargs = getattr(module, "_kwargs_template", None)
        if isinstance(kwargs, dict):
            module._kwargs_template = call_kwargs_on(kwargs, device)
    return moved


def _fake_tensor_call_failed(exc: BaseException) -> bool:
    """Dynamo could not run a node of the graph on fake tensors: torch's own meta kernel (its
    shape and dtype checker) raised, on an input the eager kernel accepted."""
    return type(exc).__name__ == "TorchRuntimeError" and "when making fake tensor call" in str(exc)


def _library_rejects_too(built: SingleOpModel) -> None:
    """Raise ``ArtifactError`` (the test is ``invalid``) when torch's own exporter rejects the call
    as well: eager accepted the input only by skipping its checks (a mixed-dtype ``bmm`` on an empty
    batch, ``log_normal_`` of an empty complex tensor, a uint8 ``where`` predicate), and the meta
    kernels that Dynamo and ``torch.export`` share refuse it. tvm-torch and ov-torch call the same
    instance ``invalid`` for the same reason ("torch.export failed"); a meta kernel the exporter
    passes but Dynamo fails on stays Inductor's crash."""
    try:
        export_torch(built)
    except ArtifactError:
        raise
    except Exception:  # anything else (not the library's verdict on the input): the crash stands
        return


def _inputs_on(built: SingleOpModel, device: str) -> tuple[Any, ...]:
    import torch

    return tuple(x.to(device) if isinstance(x, torch.Tensor) else x for x in torch_inputs(built))


register_target(InductorTarget)


@register_target
class InductorCudaTarget(InductorTarget):
    name = "inductor-torch-cuda"
    needs_gpu = True
    device = "cuda"

    def unimplemented_feature(self, built: SingleOpModel) -> str | None:
        """torch itself has no kernel for the call on this device (``"addmm_cuda" not implemented for
        'Long'``, cuDNN without int64 convolutions): eager torch on the device fails as well, so
        the compiled model's failure is no compiler bug but a test the CPU suite never meant for
        this device. Only asked after a failure; the eager call runs on the test's own inputs."""
        import torch

        model = built.model
        if not isinstance(model, torch.nn.Module):
            return None
        try:
            moved = placed_on(model, self.device)
            with torch.no_grad():
                moved(*_inputs_on(built, self.device))
        except Exception as exc:
            text = f"{type(exc).__name__}: {exc}".strip().splitlines()
            return f"torch has no {self.device} kernel for this call: eager torch on {self.device} fails too ({text[0][:200] if text else ''})"
        return None

    def device_reference(self, built: SingleOpModel, inputs: list[Any]) -> tuple[str, list[np.ndarray]] | None:
        """Eager torch on the GPU. Its kernels may answer what the CPU's answer otherwise: eager
        ``native_batch_norm`` in eval mode returns empty ``save_mean``/``save_invstd`` on the CPU and
        the running statistics on CUDA (an H100, torch 2.11), and Inductor on CUDA follows CUDA's."""
        import torch

        model = built.model
        if not isinstance(model, torch.nn.Module):
            return None
        try:
            moved = placed_on(model, self.device)
            args = tuple(torch_tensor(x).to(self.device) if isinstance(x, np.ndarray) else x for x in inputs)
            with torch.no_grad():
                result = moved(*args)
            return f"eager torch on {self.device}", flatten_outputs(result, to_numpy=inductor_to_numpy)
        except Exception:
            return None


def dynamo_user_frames(message: str) -> set[str]:
    """The function names of the user-code stack in a Dynamo error ("from user code:\n  File
    "...", line N, in NAME"), the template's own ``forward`` left out."""
    import re

    if "from user code:" not in message:
        return set()
    stack = message.split("from user code:", 1)[1]
    return set(re.findall(r'^\s*File "[^"]*", line \d+, in (\w+)$', stack, flags=re.M)) - {"forward"}

