"""Compiler targets (compiler x frontend), each a module behind one small interface (docs/design.md, Targets).

A target consumes single-operator models of one source library (``library``) and runs them through
one compiler frontend in three stages, so a failure can be attributed to a stage:

    converted = target.convert(built)     # frontend: library model -> compiler IR      ("convert")
    compiled  = target.compile(converted) # compiler build                                ("compile")
    outputs   = target.run(compiled, built.inputs)  # execute on the inputs               ("run")

A target is one module: it registers itself with ``@register_target`` and declares everything
else Opera needs to know about it on its class (``Target`` lists the hooks: its unsupported
patterns, tolerances, converter naming, crash attribution, reproducer steps). The runner, the
verdict and the reproducers only know this interface. A target in a third-party package registers
through the ``opera.targets`` entry point group (its value: the module to import).
"""

from __future__ import annotations

import abc
import importlib
import os
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

import numpy as np

from opera.registry import Registry
from opera.templates import SingleOpModel

if TYPE_CHECKING:
    from opera.reproduce.steps import ReproducerSteps

__all__ = [
    "TARGETS",
    "ArtifactError",
    "HarnessError",
    "NotApplicable",
    "Target",
    "all_targets",
    "fixed_cost_undone",
    "get_target",
    "harness_step",
    "library_step",
    "register_target",
    "set_library_reporter",
    "target_classes",
]

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


class NotApplicable(Exception):
    """A metamorphic or differential rule does not apply here (``opera.run.rules``): the target has
    no such variant, the instance has no batch dimension, the other path cannot take the model.
    The message is the reason; recorded as ``not-applicable``, never as a failure."""


def fixed_cost_undone(fix: str) -> bool:
    """Does ``OPERA_FIXED_COSTS_UNDO`` (benchmarks only: benchmarks/fixed_costs.py, batched.py) name
    this issue-16 fix, to be left out: ``warm-up-op``, ``gc-freeze``, ``cia-scan-cache``,
    ``py-impl-annotations``, ``inductor-graph-caches``?"""
    return fix in os.environ.get("OPERA_FIXED_COSTS_UNDO", "").split(",")


_library_reporter: Callable[[bool], None] | None = None
_library_depth = 0


def set_library_reporter(report: Callable[[bool], None] | None) -> None:
    """In a worker: ``report(True)`` when the library starts working for a target inside its
    conversion (``library_step``), ``report(False)`` when it is done. The executor then knows that
    a death or a hang there is the library's (``dead_worker_result``), not the compiler's."""
    global _library_reporter
    _library_reporter = report


@contextmanager
def library_step() -> Iterator[None]:
    """Mark a block where the source library makes what the frontend consumes (``torch.export``,
    torch's decompositions, the TFLite converter, the ONNX exporter): like its exceptions
    (``ArtifactError``), its hangs and deaths are not the compiler's (a 65537-way ``tensor_split``
    that torch.export needs four minutes to trace was an ov-torch "timeout")."""
    global _library_depth
    report = _library_reporter
    _library_depth += 1
    if report is not None and _library_depth == 1:
        report(True)
    try:
        yield
    finally:
        _library_depth -= 1
        if report is not None and _library_depth == 0:
            report(False)


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


class Target(abc.ABC):
    """A compiler frontend under test. Everything Opera knows about a target lives in its module:
    the three stages, and the declared hooks below (each with a default that means "nothing to say").

    Required: ``name``, ``library``, ``compiler``, ``convert`` and ``run`` (``compile`` defaults to
    nothing). Declared, optional:

    - ``requires``: modules ``availability`` imports and ``versions`` reports (top-level ones);
    - ``frontend_paths`` / ``native_frontend``: where a crash is attributed (docs/design.md, Signatures);
    - ``unsupported_patterns``: the target's own words for "not implemented" (a coverage gap, never
      a bug), collected along the class hierarchy, so a compiler's base class holds those common to
      its targets;
    - ``tolerances``: oracle threshold overrides, shaped like a ``[target."<name>"]`` table of
      ``oracles.toml`` (which can still override them);
    - ``converter_name(built)``: the frontend converter an instance goes through (inconsistency
      signatures are one per converter);
    - ``reproducer_steps(built)``: the artifact, inputs and code a standalone reproducer runs
      (``opera.reproduce.steps`` has the building blocks); None: no reproducer;
    - ``unimplemented_feature(built)``: a feature the frontend's own code shows it does not
      implement (a failure on it is ``unsupported``, not a bug);
    - ``compile_variant(converted, variant)``: the converted model compiled another way that must
      compute the same outputs (the metamorphic rules of ``opera.run.rules``: ``optlevel``, ``reload``);
    - ``batch_blames(built, arrays, failure)``: whether a failed batch's message names this part in
      the frontend's own words (``opera run --batch``);
    - ``batch_gaps(combined, failure)``: the exception each part's own conversion would raise, for
      the parts whose coverage gap a failed batch shows exactly (the batch decides them);
    - ``batch_culprits(exc)``: the parts the frontend was converting when a batch's conversion
      raised (they run alone, the rest is tried again);
    - ``batch_random_parts(combined)``: the parts of a built batch that draw random numbers (they
      run alone: their verdict depends on the library's random draws).
    """

    name: str = ""  # e.g. "tvm-onnx"
    library: str = ""  # source library of the instances it consumes: torch / keras / onnx
    compiler: str = ""  # tvm / openvino / tensorrt / inductor
    needs_gpu: bool = False
    requires: tuple[str, ...] = ()
    # Package path fragments of the compiler's frontend code, e.g. ("tvm/relax/frontend/onnx",): the
    # crash signature is the innermost traceback frame inside one of them.
    frontend_paths: tuple[str, ...] = ()
    # The frontend is C++ (OpenVINO, TensorRT): a crash's location is the C++ source file named in
    # the message, not a Python frame.
    native_frontend: bool = False
    # Stages whose Python code is the frontend, for the coverage baselines: torch.compile is lazy,
    # so Inductor's frontend work (Dynamo tracing, lowering) happens in ``compile``.
    coverage_stages: tuple[str, ...] = ("convert",)
    unsupported_patterns: tuple[str, ...] = ()
    tolerances: Mapping[str, Any] = MappingProxyType({})
    test_only: bool = False  # fault-injecting / deliberately wrong targets used by Opera's own tests
    # Worth compiling many tests as one model (``opera run --batch``): a per-model fixed cost (export,
    # conversion) dominates a test and the library's template can ``combine`` models.
    batchable: bool = False
    # ... and batches pay on a random slice of the corpus, failures included (docs/results.md,
    # batched compilation): ``opera run`` batches this target by default (``--batch auto``).
    batch_pays: bool = False
    # Words that begin the message of a gap ``batch_gaps`` decides in a batch: a store's earlier
    # ``unsupported`` tests with such a message do not keep their operator out of batches.
    batch_gap_message: str = ""
    # The frontend converts the library's own lowering of the model (torch's run_decompositions), so
    # a lowering that disagrees with the library itself is the library's inconsistency.
    converts_library_lowering: bool = False
    # Whether the frontend's converters read the library's own keyword arguments (an ONNX node's
    # attributes, an ATen op's arguments): then a wrong result equal to the library's with one at its
    # default is that argument ignored, a gap. Not so where a converter of another format stands
    # between (TFLite: Keras's arguments became operators and option fields, whose unread ones the
    # target names itself), so the same coincidence says nothing there.
    library_keywords_reach_converter: bool = True
    issue_tracker: str = ""  # where its bugs are reported upstream (``opera triage`` names it)

    def availability(self) -> str | None:
        """None when usable here, else the reason it is not (missing package, no GPU, ...)."""
        for module in self.requires:
            try:
                importlib.import_module(module)
            except Exception as exc:  # ImportError, or a broken native library
                return f"{module} is not importable: {type(exc).__name__}: {exc}"
        return None

    def versions(self) -> dict[str, str]:
        """Version of each top-level module in ``requires`` (stored with every run)."""
        return {
            module: str(getattr(importlib.import_module(module), "__version__", "?"))
            for module in self.requires
            if "." not in module
        }

    @abc.abstractmethod
    def convert(self, built: SingleOpModel) -> Any:
        """The frontend: the library model -> the compiler's IR."""

    def compile(self, converted: Any) -> Any:
        return converted

    @abc.abstractmethod
    def run(self, compiled: Any, inputs: list[np.ndarray]) -> list[np.ndarray]:
        """Execute on ``inputs``; the outputs flat, in the source model's order."""

    def converter_name(self, built: SingleOpModel) -> str | None:
        """The frontend converter ``built`` goes through; None: cannot tell (the API is used)."""
        return None

    def reproducer_steps(self, built: SingleOpModel) -> ReproducerSteps | None:
        """(artifact bytes, inputs, code) for a standalone reproducer; None: this target has none."""
        return None

    def unimplemented_feature(self, built: SingleOpModel) -> str | None:
        """What in ``built`` the frontend plainly does not implement, read from the frontend itself
        (e.g. an attribute its converter never reads), or None. A crash or a wrong result on such a
        model is a coverage gap (``unsupported``, with this reason), not a bug."""
        return None

    def gap_only_in_output_types(self, built: SingleOpModel) -> bool:
        """Whether everything ``unimplemented_feature`` names for ``built`` only sets an output's
        type (TFLite's ``ARG_MAX.OutputType``): such a gap explains a dtype, never a value, so a
        value that also differs is still a wrong result."""
        return False

    def device_reference(self, built: SingleOpModel, inputs: list[Any]) -> tuple[str, list[np.ndarray]] | None:
        """The library itself on the device this target compiles for, on ``inputs`` (copies of the
        test's), named: asked only after the compiler's outputs differ from the reference, which is
        the library on the CPU. Where the library's own kernels for that device disagree with its
        CPU kernels and the compiler agrees with them, the reference is unstable, not the compiler
        wrong. None: the target compiles for the CPU (the default), or the call fails there."""
        return None

    def unimplemented_outputs(self, built: SingleOpModel) -> tuple[frozenset[int], str] | None:
        """Outputs of ``built`` (by position) that the frontend, by its own words, does not compute
        (a placeholder in their place), with the reason; None when it computes them all. A test whose
        only differences are there is a coverage gap; the other outputs are still judged."""
        return None

    def batch_blames(self, built: SingleOpModel, arrays: list[np.ndarray], failure: str) -> bool:
        """Does the failure of a batch (``opera run --batch``) name this part, in words only this
        target's frontend uses (``arrays``: the part's inputs and reference outputs)? A part
        blamed runs alone at once instead of halving the batch down to it. Default: no."""
        return False

    def batch_gaps(self, combined: SingleOpModel, failure: str) -> dict[int, Exception] | None:
        """After the combined model of a batch failed with ``failure``: for each part (by position)
        whose own conversion would fail on a coverage gap, the exception it would raise, exactly as
        a single test's conversion raises it (the batch records those parts ``unsupported`` without
        running them alone). Only where the frontend checks the whole model for the gap before
        converting anything, so the part's own run cannot fail otherwise first. None: not known
        (the default; the batch is blamed or halved as before)."""
        return None

    def batch_culprits(self, exc: BaseException, combined: SingleOpModel | None = None) -> set[int]:
        """The parts (by position in the combined model) whose conversion was under way when the
        batch's conversion raised ``exc``: they run alone at once, and the rest of the batch is
        tried again, instead of halving it. Default: none known."""
        return set()

    def batch_cut(self, whole: SingleOpModel, keep: list[int], combined: SingleOpModel) -> bool:
        """Prepare ``combined`` (the parts ``keep`` of the combined model ``whole``, by position,
        ascending) for ``convert`` from the work ``whole``'s conversion already did, so that a
        batch tried again without some parts does not redo it; False where it cannot (the default:
        ``combined`` converts from scratch). Its conversion must be what converting ``combined``
        from scratch gives."""
        return False

    def batch_random_parts(self, combined: SingleOpModel) -> set[int]:
        """The parts of a combined model, after its conversion, that draw random numbers inside
        (an operator the random list does not name: dropout in training mode within
        ``multi_head_attention_forward``). They run alone, so their verdict is decided as a single
        test's. Default: none known."""
        return set()

    def compile_variant(self, converted: Any, variant: str) -> Any:
        """``converted`` compiled another way that must give the outputs ``compile`` gives, for
        ``run``: ``"optlevel"`` (another optimization level: optimizations off, or on where the default has them off) or
        ``"reload"`` (the converted model serialized, read back, then compiled). Raise
        ``NotApplicable`` (with the reason) where the target has no such way; the default has none."""
        raise NotApplicable(f"{self.name} has no '{variant}' variant")

    @classmethod
    def declared_unsupported_patterns(cls) -> tuple[str, ...]:
        """``unsupported_patterns`` of this class and every base class, base first."""
        seen: list[str] = []
        for klass in reversed(cls.__mro__):
            for pattern in vars(klass).get("unsupported_patterns", ()):
                if pattern not in seen:
                    seen.append(pattern)
        return tuple(seen)


# Every module of this package (but the ``_private`` helpers) is imported to fill the registry, so
# importing one must be cheap: a target imports its compiler lazily (in availability/convert),
# never at module import time.
TARGETS: Registry[type[Target]] = Registry("target", __name__, group="opera.targets")


def register_target(cls: type[Target]) -> type[Target]:
    """Class decorator: register a target under its ``name`` (checked for the required attributes)."""
    if not cls.name:
        raise ValueError(f"{cls.__name__} has no name")
    if not cls.library or not cls.compiler:
        raise ValueError(f"target {cls.name}: library and compiler must be declared")
    return TARGETS.add(cls.name, cls)


def target_classes(include_test_only: bool = True) -> list[type[Target]]:
    """The registered target classes by name, without instantiating them."""
    return [cls for _, cls in TARGETS.items() if include_test_only or not cls.test_only]


def all_targets(include_test_only: bool = False) -> list[Target]:
    return [cls() for cls in target_classes(include_test_only)]


def get_target(name: str) -> Target:
    return TARGETS.get(name)()
