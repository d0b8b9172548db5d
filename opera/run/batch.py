"""Batched compilation (issue 16, section 2): many tests of one target compiled as one model.

For a ``batchable`` target (a per-model fixed cost, ``torch.export`` and the frontend's
conversion, dominates a test), a worker takes K tests at once: it builds each instance and
computes its reference as a single test would, combines the models into one
(``Template.combine``: independent sub-computations, the parts' inputs in order), converts,
compiles and runs that once, and judges each part's outputs against its own reference.

A batch decides passes, and the coverage gaps a target can attribute exactly. A part whose
outputs pass is recorded as passing; every other test (its reference failed or disagreed with
itself, it is a random operator or its reference drew from torch's generator, its part was
inconsistent) goes back to the queue to run alone, so
its verdict, signature, stage and reproducer are exactly those of a single run. A batch that fails
as a whole to convert, compile or run (one part the compiler rejects) first asks the target which
parts' own conversions would fail on a gap (``Target.batch_gaps``: TVM's torch frontend checks
every op for a converter before converting any, and each op of the combined program belongs to
one part): those are ``unsupported`` with the exception their own run raises, and the rest is
tried again. Otherwise the parts the failure names run alone (``Target.batch_culprits``, else the
message's words), or the batch is halved and each half tried again, down to single parts, which
run alone; the references are computed once. A build of some of an earlier build's parts starts
from that build's work where the target can show it is the same (``Target.batch_cut``: the
decomposed torch program, cut). Parts are judged for a pass only (``judge_outputs(pass_only=True)``): whatever else a
part is, its single run says, with the probes that explain a difference. A batch that kills or
hangs its worker sends all its tests back to run alone (the executor's part).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from opera.model import OperatorInstance
from opera.outcomes import Outcome, Stage, TestResult
from opera.run.executors import TaskOutcome, TestTask
from opera.values import ObjectSpec, TensorSpec

__all__ = ["BatchOutcome", "computes_from_empty", "execute_batch", "failing_operators", "known_failing", "operator_name", "remember_failure"]


def operator_name(api: str) -> str:
    """``torch.add`` and ``torch.Tensor.add`` are one operator to a frontend: ``add``."""
    return api.rsplit(".", 1)[-1].rstrip("_")


def failing_operators(state: Any) -> set[str]:
    """The operators that did not pass in this worker so far (its history), or drew random numbers
    in a batch (``Target.batch_random_parts``): a batch holding one would most likely fail as a
    whole, or not decide it, so such tests run alone from the start."""
    found: set[str] | None = getattr(state, "failing_operators", None)
    if found is None:
        found = set()
        state.failing_operators = found
    return found


def gap_operators(state: Any) -> set[str]:
    """The operators whose tests were gaps a batch decides (``Target.batch_gaps``) in this worker:
    their next tests are batched among themselves, so the parts that would pass are not exported
    and decomposed once more after the gaps are decided."""
    found: set[str] | None = getattr(state, "gap_operators", None)
    if found is None:
        found = set()
        state.gap_operators = found
    return found


def known_failing(state: Any) -> frozenset[tuple[str, str]]:
    """The (target, operator) pairs that did not pass in the store's earlier runs
    (``WorkerSettings.batch_known_failing``, the runner's ``known_failing_operators``)."""
    found: frozenset[tuple[str, str]] | None = getattr(state, "known_failing", None)
    if found is None:
        found = frozenset(state.settings.batch_known_failing)
        state.known_failing = found
    return found


def remember_failure(state: Any, task: TestTask, outcome: TaskOutcome) -> None:
    """After a single test: keep its operator when it did not pass (a gap its target decides in a
    batch, ``Target.batch_gap_message``, does not keep it out of batches)."""
    result = outcome.result
    if task.kind != "test" or result is None or result.outcome is Outcome.PASS:
        return
    if result.outcome is Outcome.UNSUPPORTED and decided_in_batch(state.target(task.target), result.message):
        gap_operators(state).add(operator_name(task.instance.api))
        return
    failing_operators(state).add(operator_name(task.instance.api))


def decided_in_batch(target: Any, message: str | None) -> bool:
    """Is this ``unsupported`` message one a batch of ``target`` decides (``batch_gaps``)?"""
    prefix = getattr(target, "batch_gap_message", "")
    return bool(prefix) and (message or "").startswith(prefix)


def holds_empty_tensor(inst: OperatorInstance) -> bool:
    """Does the instance hold a tensor with no elements (an input or a constant)? Such a part runs
    alone: several judged defects compute results on empty tensors from uninitialized memory
    (OpenVINO's empty matmul, TVM's empty-set reductions), whose garbage can compare equal in one
    build and not in another, so a batch could decide ``pass`` where the single run says
    ``inconsistent`` (measured: ``linalg.multi_dot`` of a 2x0 by a 0x2 matrix on ov-torch)."""

    def empty(value: Any) -> bool:
        if isinstance(value, np.ndarray):
            return value.size == 0
        if isinstance(value, TensorSpec):
            return 0 in value.shape
        if isinstance(value, ObjectSpec):
            return empty(value.args) or empty(value.kwargs)
        if isinstance(value, (list, tuple)):
            return any(empty(v) for v in value)
        if isinstance(value, dict):
            return any(empty(v) for v in value.values())
        return False

    return empty([inst.args, inst.kwargs, inst.inputs])


def computes_from_empty(inst: OperatorInstance, reference: list[Any]) -> bool:
    """An instance holding an empty tensor (``holds_empty_tensor``) whose reference has values:
    those values are what a compiler may take from uninitialized memory. Where every reference
    output is empty too (a pad, an unfold, a division of empty tensors) only shapes and dtypes
    are compared, which the part's own program decides in a batch as alone: it is batched."""
    return holds_empty_tensor(inst) and any(np.asarray(r).size > 0 for r in reference)


@dataclass
class BatchOutcome:
    """What a batch decided: the members it judged (passes, and gaps ``batch_gaps`` attributes),
    and the members to run alone."""

    decided: list[TaskOutcome]
    alone: list[TestTask]
    note: str = ""  # why nothing (or not everything) was decided in the batch


@dataclass
class _Part:
    task: TestTask
    built: Any
    pristine: list[np.ndarray]
    reference: list[np.ndarray]
    reference_s: float


def execute_batch(tasks: list[TestTask], state: Any, report_stage: Callable[[Stage], None]) -> BatchOutcome:
    from opera.run.execution import library_reference
    from opera.templates import get_template
    from opera.verdict.judge import judge_domain

    state.load_configs()
    target = state.target(tasks[0].target)
    library = tasks[0].instance.library
    template = get_template(library)
    parts: list[_Part] = []
    alone: list[TestTask] = []
    report_stage(Stage.REFERENCE)
    for task in tasks:
        inst = task.instance
        started = time.perf_counter()
        if (
            task.kind != "test"
            or inst.library != library
            or state.oracle.is_random(inst.api)
            or state.settings.rules
            or operator_name(inst.api) in failing_operators(state)
            or (task.target, operator_name(inst.api)) in known_failing(state)
        ):
            alone.append(task)
            continue
        try:
            built, pristine, reference, again = library_reference(inst, state)
        except Exception:  # invalid: its own run says so, with its message
            alone.append(task)
            continue
        if (
            not again.consistent
            or built.details.get("draws_random")  # its reference drew random numbers
            or computes_from_empty(inst, reference)  # compilers' results on empty tensors: uninitialized memory
            or built.details.get("library_rejects")  # invalid: its own run says so
            or not all(isinstance(x, np.ndarray) for x in pristine)
            or judge_domain(state.oracle, built, pristine, reference) is not None
        ):
            alone.append(task)
            continue
        parts.append(_Part(task, built, pristine, reference, time.perf_counter() - started))
    run = _BatchRun(target, template, state, report_stage, alone=alone)
    gaps_seen = gap_operators(state)
    likely_gaps = [p for p in parts if operator_name(p.task.instance.api) in gaps_seen]
    if len(likely_gaps) >= 2:  # one build decides them together; the rest gets a build of its own
        _bisect(likely_gaps, run)
        parts = [p for p in parts if p not in likely_gaps]
    _bisect(parts, run)
    alone.sort(key=lambda t: t.seq)
    return BatchOutcome(run.decided, alone, "; ".join(run.notes))


@dataclass
class _BatchRun:
    """What every build of one batch shares, and what the builds decided."""

    target: Any
    template: Any
    state: Any
    report_stage: Callable[[Stage], None]
    decided: list[TaskOutcome] = field(default_factory=list)
    alone: list[TestTask] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    last_attempt_s: float = 0.0  # how long the last failed build of a batch took
    last_exception: BaseException | None = None  # what it raised (for ``batch_culprits``)
    last_combined: Any = None  # the combined model of the last build
    # the combined models built from scratch so far, with their parts: a later build of some of
    # those parts starts from their work (``Target.batch_cut``)
    wholes: list[tuple[list[_Part], Any]] = field(default_factory=list)


def _bisect(parts: list[_Part], run: _BatchRun) -> None:
    """Compile ``parts`` as one model and judge each part; when the whole fails (a part the
    compiler rejects), split it in halves and try each (a single part goes to run alone)."""
    if len(parts) < 2:
        run.alone.extend(p.task for p in parts)
        return
    failure = _compile_and_judge(parts, run)
    if failure is None:
        return
    gaps = _decide_gaps(parts, failure, run)
    if gaps:
        run.notes.append(f"a batch of {len(parts)} failed on the gaps of {len(gaps)} part(s): decided in the batch")
        _bisect([p for p in parts if p not in gaps], run)
        return
    # the parts the target finds named in its failure; else those the message names in words
    # (the latter exports each part: dearer)
    blamed = _culprits(parts, run) or [p for p in parts if _blames(run.target, p, failure)]
    failing_operators(run.state).update(operator_name(p.task.instance.api) for p in blamed)
    if blamed and len(blamed) < len(parts):
        run.notes.append(f"a batch of {len(parts)} failed naming {len(blamed)} part(s): those run alone")
        run.alone.extend(p.task for p in blamed)
        _bisect([p for p in parts if p not in blamed], run)
        return
    run.notes.append(f"a batch of {len(parts)} failed ({failure.splitlines()[0][:80]}): halved")
    half = len(parts) // 2
    _bisect(parts[:half], run)
    _bisect(parts[half:], run)


def _culprits(parts: list[_Part], run: _BatchRun) -> list[_Part]:
    """The parts the target was converting when the batch's last build raised
    (``Target.batch_culprits``); a wrong one only runs alone."""
    exc, run.last_exception = run.last_exception, None
    if exc is None:
        return []
    try:
        found = run.target.batch_culprits(exc, run.last_combined)
    except Exception:
        return []
    return [parts[k] for k in sorted(found) if 0 <= k < len(parts)]


def _blames(target: Any, part: _Part, failure: str) -> bool:
    """Does the batch's failure name this part: an operator of its program (``aten.<op>``,
    ``'<op>.`` or ``aten::<op>`` in the message, as the frontends name what they cannot convert),
    a rare dtype of its inputs (``torch.complex64``), or can its program not even be made (the
    export fails)? Cheap attribution before halving; a part wrongly blamed only runs alone."""
    try:  # the target's own words (TVM's TFLite frontend: "KeyError: 10", the type code of float64)
        if target.batch_blames(part.built, [*part.pristine, *part.reference], failure):
            return True
    except Exception:
        pass
    for value in part.pristine:  # a dtype the frontend names ("input_type torch.complex64 is not handled")
        dtype = np.asarray(value).dtype.name
        if dtype not in ("float32", "int64", "bool") and f"torch.{dtype}" in failure:
            return True
    try:
        names = target.converter_name(part.built)
    except Exception:
        return True
    if not names:
        return False
    for name in names.split("+"):
        base = name.split(".")[1] if name.startswith("aten.") and name.count(".") >= 1 else name
        # TVM: "Unsupported function types ['addmv.default']"; OpenVINO: "aten::addmv"
        if any(mark in failure for mark in (f"aten.{base}.", f"'{base}.", f"aten::{base}")):
            return True
    return False


def _finisher(part: _Part, size: int, share: float) -> Callable[..., TestResult]:
    """``finish(outcome, stage, **fields)`` for a part of a batch of ``size``: its result as a
    single test's, with its own reference time plus its share of the batch's compiler time."""
    inst = part.task.instance
    base: dict[str, Any] = {"instance_id": inst.id, "api": inst.api, "target": part.task.target, "source_suite": inst.source.suite, "source_test": inst.source.test}
    reference_name = {"reference": str(part.built.details["reference"])} if part.built.details.get("reference") else {}

    def finish(outcome: Outcome, stage: Stage, **kw: Any) -> TestResult:
        extra = {**reference_name, "batched": size, **kw.pop("extra", {})}
        return TestResult(**base, outcome=outcome, stage=stage, duration=part.reference_s + share, extra=extra, **kw)

    return finish


def _decide_gaps(parts: list[_Part], failure: str, run: _BatchRun) -> list[_Part]:
    """The parts of a failed batch that the target shows would fail alone on a coverage gap
    (``Target.batch_gaps``), recorded ``unsupported`` as their single runs would be; [] when the
    target cannot say (then the batch is blamed or halved)."""
    from opera.verdict.judge import judge_exception

    started = time.perf_counter()
    combined = run.last_combined  # the model whose build failed (its conversion may have kept work)
    try:
        gaps = run.target.batch_gaps(combined, failure) if combined is not None else None
    except Exception:
        gaps = None
    if not gaps or any(not 0 <= k < len(parts) for k in gaps):
        return []
    share = (run.last_attempt_s + time.perf_counter() - started) / len(parts)
    decided: list[_Part] = []
    for k, exc in sorted(gaps.items()):
        part = parts[k]
        result = judge_exception(exc, run.state.unsupported, run.target, Stage.CONVERT, _finisher(part, len(parts), share), part.built)
        if result.outcome is Outcome.UNSUPPORTED:  # else its own run says what it is
            run.decided.append(TaskOutcome(part.task, result=result))
            decided.append(part)
            gap_operators(run.state).add(operator_name(part.task.instance.api))
    return decided


def _combined(parts: list[_Part], run: _BatchRun) -> Any:
    """The combined model of ``parts``; where an earlier build of this batch held them all, the
    target may let it start from that build's work (``Target.batch_cut``: tvm-torch cuts the
    decomposed program instead of exporting and decomposing again)."""
    combined = run.template.combine([p.built for p in parts])
    if combined is None:
        return None
    for whole_parts, whole in reversed(run.wholes):
        position = {id(p): k for k, p in enumerate(whole_parts)}
        keep = [position.get(id(p), -1) for p in parts]
        if -1 in keep or keep != sorted(keep):
            continue
        try:
            if run.target.batch_cut(whole, keep, combined):
                return combined
        except Exception:  # Opera's cut failed: the parts are combined from scratch
            pass
        break
    run.wholes.append((list(parts), combined))
    return combined


def _compile_and_judge(parts: list[_Part], run: _BatchRun) -> str | None:
    """One build of the combined parts; its passes to ``decided``, other parts to ``alone``. Returns
    why the batch as a whole failed (nothing recorded then), or None."""
    from opera.verdict.judge import judge_outputs

    target, state, report_stage = run.target, run.state, run.report_stage
    run.last_exception = None
    combined = run.last_combined = _combined(parts, run)
    if combined is None:
        return "the parts cannot be combined"
    started = time.perf_counter()
    try:
        report_stage(Stage.CONVERT)
        converted = target.convert(combined)
        report_stage(Stage.COMPILE)
        compiled = target.compile(converted)
        report_stage(Stage.RUN)
        outputs = target.run(compiled, [x.copy() for x in combined.inputs])
    except Exception as exc:  # which part failed, and how, is for each test alone to say
        run.last_attempt_s = time.perf_counter() - started
        run.last_exception = exc
        return f"{type(exc).__name__}: {exc}"[:4000]
    if getattr(compiled, "masked_crash", None) is not None:
        return "the batch needed a fallback pipeline"
    counts = [len(p.reference) for p in parts]
    if len(outputs) != sum(counts):
        return f"{len(outputs)} outputs for {sum(counts)} expected"
    try:
        drawing = target.batch_random_parts(combined)
    except Exception:
        drawing = set()
    share = (time.perf_counter() - started) / len(parts)
    report_stage(Stage.COMPARE)
    start = 0
    for k, (part, count) in enumerate(zip(parts, counts, strict=True)):
        mine = outputs[start : start + count]
        start += count
        if k in drawing:  # random draws decide its verdict: as a single test's, alone
            failing_operators(state).add(operator_name(part.task.instance.api))
            run.alone.append(part.task)
            continue
        finish = _finisher(part, len(parts), share)
        try:
            result = judge_outputs(state.oracle, target, part.built, part.pristine, part.reference, mine, None, finish, pass_only=True)
        except Exception:  # NotAPass, or the judge failed: what it is, its single run says
            result = None
        if result is not None and result.outcome is Outcome.PASS:
            run.decided.append(TaskOutcome(part.task, result=result))
        else:
            run.alone.append(part.task)
    return None
