"""Executing one test inside a worker: build -> reference (x2) -> convert -> compile -> run -> oracle.

What the outcome is, is decided in ``opera.verdict.judge`` (an exception: unsupported or crash;
outputs: pass, inconsistent, nondeterministic, undefined, unstable-reference). Decided here:
``invalid`` (the library could not build or run the instance, or could not produce the artifact
the frontend consumes) and ``harness-error`` (Opera's own code failed around a compiler call:
input preparation, output decoding, comparison).

This is the code every executor runs per task (the local pool's worker processes, Ray actors);
it catches Python exceptions and turns them into verdicts. Native crashes, hangs and
memory blow-ups cannot be caught here: the executor watching the worker records those
(``dead_worker_result``).
"""

from __future__ import annotations

import dataclasses
import functools
import gc
import os
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from opera.model import OperatorInstance
from opera.outcomes import Outcome, Stage, TestResult
from opera.run.executors import TaskOutcome, TestTask, WorkerSettings
from opera.verdict.judge import (
    first_lines,
    input_dtypes,
    judge_domain,
    judge_exception,
    judge_outputs,
    judge_undefined_values,
    traceback_text,
)
from opera.verdict.oracles import OracleConfig, compare_outputs, load_oracle_config
from opera.verdict.signature import (
    harness_signature,
    native_signature,
    target_crash_signature,
)
from opera.verdict.unsupported import UnsupportedPatterns, exception_text, load_unsupported

__all__ = [
    "WorkerState",
    "dead_worker_result",
    "execute_task",
    "rule_death_result",
    "instance_size",
    "invalid_result",
    "warm_up_instance",
]

def instance_size(inst: OperatorInstance) -> int:
    """How big an instance is, to keep the smallest reproducer per bug: its JSON length."""
    return len(inst.to_line())


def _base(inst: OperatorInstance, target: str) -> dict[str, Any]:
    return {"instance_id": inst.id, "api": inst.api, "target": target, "source_suite": inst.source.suite, "source_test": inst.source.test}


def invalid_result(inst: OperatorInstance, target: str, reason: str) -> TestResult:
    """An instance the validity gate rejected (or not migratable): recorded without running."""
    return TestResult(**_base(inst, target), outcome=Outcome.INVALID, stage=Stage.REFERENCE, message=reason)


def dead_worker_result(
    task: TestTask, cause: str, stage: Stage, duration: float, message: str, library: bool = False
) -> TestResult:
    """The verdict for a test whose worker died (``cause`` = signal name or ``memory``) or hung
    (``cause="timeout"``). A death while the *library* ran the reference, or made the artifact the
    frontend consumes (``library``: inside a target's ``library_step``, e.g. torch.export), is the
    library's fault: the instance is ``invalid``, not a compiler bug."""
    inst = task.instance
    if stage is Stage.REFERENCE or library:
        where = "on the reference run" if stage is Stage.REFERENCE else "making what the frontend consumes (its exporter)"
        what = "did not finish" if cause == "timeout" else f"failed natively ({cause})"
        return TestResult(
            **_base(inst, task.target),
            outcome=Outcome.INVALID,
            stage=stage,
            duration=duration,
            message=f"the library itself {what} {where}: {message}",
        )
    outcome = Outcome.TIMEOUT if cause == "timeout" else Outcome.NATIVE_CRASH
    return TestResult(
        **_base(inst, task.target),
        outcome=outcome,
        stage=stage,
        signature=native_signature(task.target, inst.api, cause),
        duration=duration,
        message=message,
    )


def rule_death_result(
    partial: TestResult, rule: str, cause: str, duration: float, message: str, step: str = ""
) -> TestResult:
    """The verdict for a test whose worker died (``cause``: a signal name, ``memory``) or hung
    (``timeout``) inside one of the run's rules: the test's own verdict stands (``partial``, sent
    before the rule began, with the rules done), and the rule gets a crash of its own, signed like
    a native crash with the rule's name (``native-crash:<target>:rule=<name>:<api>:<cause>``).
    Where the library's side of the rule was running (``step`` "library": tf2onnx exporting a
    mixed_float16 attention for minutes under load), the rule does not apply: no compiler ran."""
    found: dict[str, Any] = {"rule": rule, "duration": max(0.0, duration - partial.duration)}
    if step == "library":
        found["outcome"] = "not-applicable"
        found["message"] = first_lines(
            f"the library's side of rule {rule} (the export, or its reference) did not finish: the worker died ({cause}); {message}",
            500,
        )
    else:
        kind = "timeout" if cause == "timeout" else "native-crash"
        found["outcome"] = "crash"
        found["signature"] = f"{kind}:{partial.target}:rule={rule}:{partial.api}" + ("" if kind == "timeout" else f":{cause}")
        found["message"] = first_lines(f"the worker died ({cause}) in rule {rule}; the test's own verdict stands: {message}", 2000)
    rules = {**(partial.extra.get("rules") or {}), rule: found}
    return dataclasses.replace(partial, duration=duration, extra={**partial.extra, "rules": rules})


@dataclass
class WorkerState:
    """What a worker keeps between tests: targets, configs (loaded once per process)."""

    settings: WorkerSettings
    oracle: OracleConfig | None = None
    unsupported: UnsupportedPatterns | None = None
    targets: dict[str, Any] = field(default_factory=dict)

    def target(self, name: str) -> Any:
        if name not in self.targets:
            from opera.run.targets import get_target

            self.targets[name] = get_target(name)
        return self.targets[name]

    def load_configs(self) -> None:
        if self.oracle is None:
            self.oracle = load_oracle_config(self.settings.oracle_config)
        if self.unsupported is None:
            self.unsupported = load_unsupported(self.settings.unsupported_config)

    def warm_up(self, target_name: str, library: str, dummy_op: bool = True) -> None:
        """Pay a target's first-call costs before the first test's clock starts (the executor times
        warm-up apart, under ``warmup_timeout_s``): import the template and the compiler, then
        (``dummy_op``) take one tiny real operator of the library through the whole test (build,
        reference, convert, compile, run, compare), which loads what only a first compile loads
        (TVM's LLVM, Inductor's C++ toolchain and precompiled header, OpenVINO's plugins, TensorFlow's
        converter). Its outcome is only logged: it is never a verdict. Last, the objects alive now
        are moved out of the garbage collector's sight (``gc.freeze``): every later full collection
        would otherwise walk the frameworks' hundreds of thousands of objects again."""
        from opera.run.targets import fixed_cost_undone
        from opera.templates import get_template

        self.load_configs()
        get_template(library)
        target = self.target(target_name)
        reason = target.availability()
        if reason is not None:
            raise RuntimeError(f"target {target_name} is not available in this worker: {reason}")
        if dummy_op and not fixed_cost_undone("warm-up-op"):
            self._warm_up_op(target_name, library)
        from opera.reproduce.source import pin_loaded_sources

        pin_loaded_sources()  # reproducers embed Opera's source as loaded, not as the disk holds it later
        if not fixed_cost_undone("gc-freeze"):
            gc.collect()  # what is garbage now is not frozen with the rest
            gc.freeze()

    def _warm_up_op(self, target_name: str, library: str) -> None:
        inst = warm_up_instance(library)
        if inst is None:
            return
        try:
            result, _ = _execute_test(TestTask(-1, inst, target_name), self, lambda stage: None)
        except Exception as exc:  # never a verdict: the test that follows is judged on its own
            print(f"opera worker: warm-up op {inst.api} on {target_name} failed: {type(exc).__name__}: {exc}", flush=True)
            return
        if result.outcome is not Outcome.PASS:
            print(
                f"opera worker: warm-up op {inst.api} on {target_name}: {result.outcome.value} "
                f"({first_lines(result.message or '', 300)})",
                flush=True,
            )


def warm_up_instance(library: str) -> OperatorInstance | None:
    """The tiny operator a worker takes through a target before its first test: ReLU on a float32
    2x3 tensor, in the library's own form (None: no such operator known for this library)."""
    from opera.model import InstanceKind, Source

    x = np.array([[-1.0, 0.5, 2.0], [3.0, -0.25, 0.0]], np.float32)
    source = Source(suite="opera-warm-up", test="warm-up")
    if library == "torch":
        return OperatorInstance(
            library=library, api="torch.nn.functional.relu", kind=InstanceKind.FUNCTION, args=(x,), source=source
        )
    if library == "keras":
        return OperatorInstance(library=library, api="keras.layers.ReLU", kind=InstanceKind.MODULE, inputs=(x,), source=source)
    if library == "onnx":
        return OperatorInstance(
            library=library,
            api="onnx::Relu",
            kind=InstanceKind.ONNX_NODE,
            inputs=(x,),
            extra={"domain": "", "n_outputs": 1, "opset": 17},
            source=source,
        )
    return None


def _build_options(inst: OperatorInstance, settings: WorkerSettings) -> dict[str, Any]:
    """The run's choices about how a template builds its model (torch: weights as constants or as
    graph inputs, ``--torch-tensor-args``; ONNX: integer data operands as runtime inputs or
    constants, ``--onnx-data-inputs``)."""
    if inst.library == "torch":
        return {"tensor_args": settings.torch_tensor_args}
    if inst.library == "onnx":
        return {"data_inputs": settings.onnx_data_inputs}
    return {}


def _copies(arrays: list[Any]) -> list[Any]:
    return [a.copy() if isinstance(a, np.ndarray) else a for a in arrays]


def execute_task(
    task: TestTask,
    state: WorkerState,
    report_stage: Callable[[Stage], None],
    report_rule: Callable[[str, TestResult, str], None] | None = None,
) -> TaskOutcome:
    """One task in a worker. ``report_rule(name, result so far, step)``: told before each rule of
    the run's oracles, with the test's own verdict and the rules done, and at each step the rule
    reports (``"library"`` or ``""``; ``rule_death_result``)."""
    if task.kind == "reproduce":
        return TaskOutcome(task, reproducer=_reproduce_only(task, state))
    result, context = _execute_test(task, state, report_stage, report_rule)
    reproducer = None
    if result.is_failure and state.settings.reproducer_dir and context is not None:
        reproducer = _write_reproducer(task, state, result, context)
    return TaskOutcome(task, result=result, reproducer=reproducer)


@dataclass
class _Context:
    built: Any
    reference: list[np.ndarray]


def library_reference(inst: OperatorInstance, state: WorkerState) -> tuple[Any, list[Any], list[np.ndarray], Any]:
    """The instance built with the run's options and run twice in its library: (the built model
    with fresh inputs, the pristine inputs, the reference, the comparison of the two runs). What
    the library raises propagates: the caller calls the instance invalid (or runs it alone)."""
    from opera.templates import get_template

    assert state.oracle is not None
    template = get_template(inst.library)
    built = template.build(inst, state.settings.seed, **_build_options(inst, state.settings))
    pristine = _copies(built.inputs)
    built.inputs = _copies(pristine)
    reference = template.reference(built)
    built.inputs = _copies(pristine)
    second = template.reference(built)
    built.inputs = _copies(pristine)  # in-place ops must not leak into the compiler's inputs
    again = compare_outputs(reference, second, state.oracle, target=None, input_dtypes=input_dtypes(pristine))
    return built, pristine, reference, again


def _execute_test(
    task: TestTask,
    state: WorkerState,
    report_stage: Callable[[Stage], None],
    report_rule: Callable[[str, TestResult, str], None] | None = None,
) -> tuple[TestResult, _Context | None]:
    from opera.run.targets import ArtifactError, HarnessError

    state.load_configs()
    assert state.oracle is not None and state.unsupported is not None
    inst = task.instance
    target = state.target(task.target)
    base = _base(inst, task.target)
    started = time.perf_counter()

    reference_name: dict[str, str] = {}  # what computed the expected outputs, once known

    def finish(outcome: Outcome, stage: Stage, **kw: Any) -> TestResult:
        extra = {**reference_name, **kw.pop("extra", {})}
        return TestResult(
            **base, outcome=outcome, stage=stage, duration=time.perf_counter() - started, extra=extra, **kw
        )

    # -- the library: build and run the reference twice (nondeterminism check) ------------------
    report_stage(Stage.REFERENCE)
    try:
        built, pristine, reference, again = library_reference(inst, state)
    except Exception as exc:
        return finish(
            Outcome.INVALID, Stage.REFERENCE, message=first_lines(f"{type(exc).__name__}: {exc}")
        ), None
    if built.details.get("reference"):  # e.g. onnxruntime, or onnx.reference where ORT cannot run it
        reference_name["reference"] = str(built.details["reference"])
    outside = judge_domain(state.oracle, built, pristine, reference)
    if outside is not None:  # nothing a compiler does with it is a deviation
        return finish(Outcome.UNDEFINED, Stage.REFERENCE, message=first_lines(outside)), None
    rejected = built.details.get("library_rejects")
    if rejected:  # the library refuses the model as the frontends get it (the ONNX template's check)
        return finish(Outcome.INVALID, Stage.REFERENCE, message=first_lines(str(rejected))), None
    # A reference that disagrees with itself (a random operator, uninitialized memory) still goes
    # through the compiler: its crashes are findings; only count, shapes and dtypes are compared.
    nondeterministic = None if again.consistent else again
    context = _Context(built, reference)

    # -- the compiler: convert, compile, run --------------------------------------------------
    stage = Stage.CONVERT
    try:
        report_stage(stage)
        converted = target.convert(built)
        stage = Stage.COMPILE
        report_stage(stage)
        compiled = target.compile(converted)
        stage = Stage.RUN
        report_stage(stage)
        outputs = target.run(compiled, _copies(pristine))
    except ArtifactError as exc:
        return finish(Outcome.INVALID, stage, message=first_lines(f"artifact: {exc}")), None
    except HarnessError as exc:
        return _harness_error(finish, stage, exc, task.target), context
    except Exception as exc:
        result = judge_exception(exc, state.unsupported, target, stage, finish, built)
        return result, (None if result.outcome == Outcome.UNSUPPORTED else context)

    # -- the oracle ---------------------------------------------------------------------------
    report_stage(Stage.COMPARE)
    masked = _masked_crash(compiled, task.target, target, state.unsupported)
    try:
        result = judge_outputs(
            state.oracle,
            target,
            built,
            pristine,
            reference,
            outputs,
            nondeterministic,
            finish,
            rerun=lambda inputs: target.run(compiled, _copies(inputs)),
        )
        if masked is not None and "gap" in masked:  # the default pipeline lacks it: said, not a bug
            note = f"the default pipeline does not implement this (a gap): {masked['gap']}"
            result.message = first_lines(f"{result.message}; {note}" if result.message else note)
        elif masked is not None:  # the default pipeline's crash, reported once as its own finding
            result.extra["masked_crash"] = masked
    except Exception as exc:  # Opera could not compare what it got back: our defect, said as such
        wrapped = HarnessError(f"compare the outputs: {type(exc).__name__}: {exc}")
        wrapped.__cause__ = exc
        return _harness_error(finish, Stage.COMPARE, wrapped, task.target), context
    if state.settings.rules:

        def before(name: str, done: dict[str, dict[str, Any]], step: str, _result: TestResult = result) -> None:
            if report_rule is not None:
                partial = dataclasses.replace(_result, extra={**_result.extra, "rules": done})
                partial.duration = time.perf_counter() - started
                report_rule(name, partial, step)

        rules = _run_rules(state, target, built, converted, compiled, pristine, reference, outputs, result, before)
        result.extra["rules"] = rules
        result.duration = time.perf_counter() - started
    return result, context


def _run_rules(
    state: WorkerState,
    target: Any,
    built: Any,
    converted: Any,
    compiled: Any,
    pristine: list[Any],
    reference: list[np.ndarray],
    outputs: list[np.ndarray],
    result: TestResult,
    before: Callable[[str, dict[str, dict[str, Any]], str], None] | None = None,
) -> dict[str, dict[str, Any]]:
    """The run's metamorphic/differential rules on a test whose default pipeline gave outputs."""
    from opera.run.rules import RuleContext, run_rules
    from opera.templates import get_template

    assert state.oracle is not None and state.unsupported is not None
    inst = built.instance
    template = get_template(inst.library)
    options = _build_options(inst, state.settings)
    comparable = result.outcome not in (Outcome.NONDETERMINISTIC, Outcome.UNDEFINED, Outcome.UNSTABLE_REFERENCE)
    ctx = RuleContext(
        target=target,
        built=built,
        converted=converted,
        compiled=compiled,
        inputs=pristine,
        reference=reference,
        outputs=outputs,
        verdict=result.outcome,
        oracle=state.oracle,
        unsupported=state.unsupported,
        build=lambda sliced: template.build(sliced, state.settings.seed, **options),
        values_comparable=comparable and not state.oracle.is_random(inst.api),
        undefined=judge_undefined_values(state.oracle, built, pristine, reference),
    )
    write = functools.partial(_write_rule_reproducer, state, result) if state.settings.reproducer_dir else None
    return run_rules(state.settings.rules, ctx, before, write)


def _write_rule_reproducer(state: WorkerState, test: TestResult, rule: Any) -> str | None:
    """A failing rule's evidence (``RuleEvidence``) as a standalone script at a temporary name, as
    a test's own (the runner keeps the smallest per signature)."""
    assert state.settings.reproducer_dir is not None
    evidence = rule.evidence
    failed = TestResult(
        test.instance_id,
        test.api,
        evidence.target.name,
        Outcome.INCONSISTENT if rule.outcome == "inconsistent" else Outcome.CRASH,
        evidence.stage,
        signature=rule.signature,
        message=rule.message,
    )
    name = f"{test.instance_id}-{test.target}-{rule.rule}"
    return _write_script(
        state.settings.reproducer_dir, name, evidence.built.instance, evidence.target, failed, evidence.built, evidence.expected
    )


def _masked_crash(
    compiled: Any, target_name: str, target: Any, unsupported: UnsupportedPatterns | None = None
) -> dict[str, str] | None:
    """A crash of the target's default pipeline that a second pipeline worked around (tvm-keras:
    ``ConvertLayout`` after the default ``tvm.compile`` failed): its signature and message, so the
    store keeps it as one finding while the test itself goes on to the comparison. A crash the
    target's own words call unimplemented (TOPI's transposed convolutions in NHWC) is a gap:
    ``{"gap": its first lines}``, said in the result's message, not a bug."""
    exc = getattr(compiled, "masked_crash", None)
    if not isinstance(exc, BaseException):
        return None
    if unsupported is not None and unsupported.match(exc, target_name, target.compiler) is not None:
        return {"gap": first_lines(exception_text(exc))}
    signature = target_crash_signature(exc, target_name, target)
    return {"signature": signature, "stage": Stage.COMPILE.value, "message": traceback_text(exc)}


def _harness_error(finish: Callable[..., TestResult], stage: Stage, exc: Exception, target: str) -> TestResult:
    tb = "".join(traceback.format_exception(exc.__cause__ or exc, limit=-8))
    return finish(
        Outcome.HARNESS_ERROR,
        stage,
        signature=harness_signature(exc, target),
        message=first_lines(f"Opera's own defect, not the compiler's: {exc}\n{tb}", 4000),
    )


def _write_reproducer(
    task: TestTask, state: WorkerState, result: TestResult, context: _Context
) -> str | None:
    """Write the script to a temporary name; the runner keeps it only if it is the smallest."""
    assert state.settings.reproducer_dir is not None
    name = f"{task.instance.id}-{task.target}"
    return _write_script(
        state.settings.reproducer_dir, name, task.instance, state.target(task.target), result, context.built, context.reference
    )


def _write_script(
    directory: str,
    name: str,
    instance: OperatorInstance,
    target: Any,
    result: TestResult,
    built: Any,
    reference: list[np.ndarray],
) -> str | None:
    """``write_reproducer`` to ``<directory>/tmp/<name>-<pid>.py``; None where it cannot be written
    (a reproducer is a convenience: never fail the test or the rule over it; the reason is printed)."""
    from opera.reproduce.write import write_reproducer

    temp = Path(directory) / "tmp"
    try:
        path = write_reproducer(
            instance, target, result, temp, built=built, reference=reference, file_name=f"{name}-{os.getpid()}.py"
        )
    except Exception as exc:
        print(f"opera: could not write a reproducer for {result.instance_id} on {result.target}: {exc}", flush=True)
        return None
    return str(path) if path is not None else None


def _reproduce_only(task: TestTask, state: WorkerState) -> str | None:
    """After a worker died on a test: rebuild the instance and write the script (no compiler call)."""
    from opera.templates import get_template

    if task.failed is None or not state.settings.reproducer_dir:
        return None
    try:
        template = get_template(task.instance.library)
        built = template.build(task.instance, state.settings.seed, **_build_options(task.instance, state.settings))
        pristine = _copies(built.inputs)
        reference = template.reference(built)
        built.inputs = pristine
    except Exception:
        return None
    return _write_reproducer(task, state, task.failed, _Context(built, reference))
