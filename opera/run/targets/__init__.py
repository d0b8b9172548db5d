"""Compiler targets (compiler x frontend), each a module behind one small interface (DESIGN.md s. 6).

A target consumes single-operator models of one source library (``library``) and runs them through
one compiler frontend in three stages, so a failure can be attributed to a stage:

    converted = target.convert(built)     # frontend: library model -> compiler IR      ("convert")
    compiled  = target.compile(converted) # compiler build                                ("compile")
    outputs   = target.run(compiled, built.inputs)  # execute on the inputs               ("run")

A target registers itself with ``@register_target``; the runner only knows this interface. Targets
in third-party packages register through the ``opera.run.targets`` entry point group. What counts as
"unsupported" (not a bug) is a list of message patterns per target in ``opera/verdict/unsupported.toml``.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from importlib.metadata import entry_points
from typing import Any

import numpy as np

from opera.errors import OperaError
from opera.templates import SingleOpModel

__all__ = [
    "TARGET_MODULES",
    "ArtifactError",
    "HarnessError",
    "Target",
    "all_targets",
    "get_target",
    "harness_step",
    "register_target",
]

# Modules imported to fill the registry. Importing one must be cheap: a target imports its
# compiler lazily (in availability/convert), never at module import time.
TARGET_MODULES: tuple[str, ...] = (
    "opera.run.targets.tvm",
    "opera.run.targets.openvino",
    "opera.run.targets.tensorrt",
    "opera.run.targets.inductor",
    "opera.run.targets.testing",
)


class ArtifactError(Exception):
    """The source library could not produce the artifact this frontend consumes.

    Raised (chained to the library's exception) by ``convert`` when e.g. ``torch.export`` rejects
    the model or the TFLite converter fails on a Keras model. Not a compiler bug: the runner
    records the instance as ``invalid`` for this target.
    """


class HarnessError(Exception):
    """Opera's own code failed around a compiler call: preparing its inputs or decoding its outputs.

    Raised (chained to the original exception) by ``harness_step``. The runner records the test as
    ``harness-error``: Opera's defect, listed on its own and never signed as a compiler crash.
    """


@contextmanager
def harness_step(what: str) -> Iterator[None]:
    """Mark a block of a target's own code (not the compiler's): whatever it raises is Opera's fault.

    ``with harness_step("decode outputs"): outputs = [decode(t) for t in raw]``
    """
    try:
        yield
    except HarnessError:
        raise
    except Exception as exc:
        raise HarnessError(f"{what}: {type(exc).__name__}: {exc}") from exc


class Target:
    name: str = ""  # e.g. "tvm-onnx"
    library: str = ""  # source library of the instances it consumes: torch / keras / onnx
    compiler: str = ""  # tvm / openvino / tensorrt / inductor
    needs_gpu: bool = False
    # Package path fragments of the compiler's frontend code, e.g. ("tvm/relax/frontend/onnx",): the
    # crash signature is the innermost traceback frame inside one of them (DESIGN.md section 7).
    frontend_paths: tuple[str, ...] = ()
    # Stages whose Python code is the frontend, for the coverage baselines: torch.compile is lazy,
    # so Inductor's frontend work (Dynamo tracing, lowering) happens in ``compile``.
    coverage_stages: tuple[str, ...] = ("convert",)
    test_only: bool = False  # fault-injecting / deliberately wrong targets used by Opera's own tests

    def availability(self) -> str | None:
        """None when usable here, else the reason it is not (missing package, no GPU, ...)."""
        return None

    def versions(self) -> dict[str, str]:
        return {}

    def convert(self, built: SingleOpModel) -> Any:
        raise NotImplementedError

    def compile(self, converted: Any) -> Any:
        return converted

    def run(self, compiled: Any, inputs: list[np.ndarray]) -> list[np.ndarray]:
        raise NotImplementedError


_REGISTRY: dict[str, Callable[[], Target]] = {}
_loaded = False


def register_target(cls: type[Target]) -> type[Target]:
    if not cls.name:
        raise ValueError(f"{cls.__name__} has no name")
    _REGISTRY[cls.name] = cls
    return cls


def _load_all() -> None:
    global _loaded
    if _loaded:
        return
    for module in TARGET_MODULES:
        importlib.import_module(module)
    for ep in entry_points(group="opera.targets"):
        ep.load()
    _loaded = True


def all_targets(include_test_only: bool = False) -> list[Target]:
    _load_all()
    targets = [factory() for _, factory in sorted(_REGISTRY.items())]
    return [t for t in targets if include_test_only or not t.test_only]


def get_target(name: str) -> Target:
    _load_all()
    factory = _REGISTRY.get(name)
    if factory is None:
        known = ", ".join(t.name for t in all_targets()) or "none"
        raise OperaError(f"unknown target {name!r}; known targets: {known}")
    return factory()
