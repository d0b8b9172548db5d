"""Where a verdict is decided: what the compiler did -> an outcome.

``judge_exception``: a frontend's exception is ``unsupported`` (its own words for "not implemented",
``opera.verdict.unsupported``) or a ``crash`` with a signature. ``judge_outputs``: outputs are
``pass`` / ``inconsistent`` where the values are defined and the library agrees with itself;
``nondeterministic`` (the two reference runs disagree: count, shapes and dtypes still compared),
``undefined`` (they differ only where the operator's specification leaves them undefined,
``opera.verdict.undefined``), ``unstable-reference`` (a second reference of the library disagrees
with the first). ``opera.run.execution`` calls these after running a test; the thresholds are
``opera.verdict.oracles``.
"""

from __future__ import annotations

import traceback
from collections.abc import Callable
from typing import Any

import numpy as np

from opera.outcomes import Outcome, Stage, TestResult
from opera.verdict.oracles import Comparison, OracleConfig, compare_outputs
from opera.verdict.signature import converter_of, inconsistency_signature, target_crash_signature
from opera.verdict.undefined import Undefinedness, find_undefined, mask_undefined, outside_domain
from opera.verdict.unsupported import UnsupportedPatterns, exception_text

__all__ = [
    "MESSAGE_LIMIT",
    "first_lines",
    "input_dtypes",
    "judge_domain",
    "judge_exception",
    "judge_outputs",
    "traceback_text",
    "unimplemented",
]

MESSAGE_LIMIT = 2000


def first_lines(text: str, limit: int = MESSAGE_LIMIT) -> str:
    """A message as stored: stripped, at most ``limit`` characters."""
    return text.strip()[:limit]


def traceback_text(exc: BaseException, limit: int = 4000) -> str:
    """A crash's stored message: the last frames and the exception. Cut from the front when too
    long, so that the exception's own text (the last lines, what a maintainer and the root-cause
    clustering read) is always kept."""
    text = "".join(traceback.format_exception(exc, limit=-8)).strip()
    return text if len(text) <= limit else "...\n" + text[-(limit - 4) :]


def input_dtypes(arrays: list[Any]) -> list[str]:
    return [a.dtype.name for a in arrays if isinstance(a, np.ndarray)]


def _tolerance(inst: Any) -> tuple[float | None, float | None] | None:
    return (inst.tolerance.atol, inst.tolerance.rtol) if inst.tolerance is not None else None


def unimplemented(target: Any, built: Any) -> str | None:
    """The target's ``unimplemented_feature`` of the model; an error there says nothing."""
    if built is None:
        return None
    try:
        return target.unimplemented_feature(built)
    except Exception:
        return None


def judge_exception(
    exc: Exception,
    unsupported: UnsupportedPatterns,
    target: Any,
    stage: Stage,
    finish: Callable[..., TestResult],
    built: Any = None,
) -> TestResult:
    """The verdict on an exception the compiler raised: ``unsupported`` when the target's own words
    say it does not implement this, or its code shows that it does not implement a feature the model
    uses (a coverage gap), else a ``crash`` signed by where it happened."""
    matched = unsupported.match(exc, target.name, target.compiler)
    if matched is not None:
        return finish(Outcome.UNSUPPORTED, stage, message=first_lines(exception_text(exc)))
    gap = unimplemented(target, built)
    if gap is not None:
        return finish(Outcome.UNSUPPORTED, stage, message=first_lines(f"{gap}; {exception_text(exc)}"))
    signature = target_crash_signature(exc, target.name, target)
    return finish(Outcome.CRASH, stage, signature=signature, message=traceback_text(exc))


class NotAPass(Exception):
    """``judge_outputs(pass_only=True)``: the outputs cannot pass; what else they are is for the
    test alone to say."""


def judge_outputs(
    oracle: OracleConfig,
    target: Any,
    built: Any,
    pristine: list[Any],
    reference: list[np.ndarray],
    outputs: list[np.ndarray],
    nondeterministic: Comparison | None,
    finish: Callable[..., TestResult],
    rerun: Callable[[list[Any]], list[np.ndarray]] | None = None,
    pass_only: bool = False,
) -> TestResult:
    """The verdict on outputs the compiler produced: pass, inconsistent, or one of the outcomes that
    say the values could not be judged (nondeterministic, undefined, unstable-reference).
    ``rerun(inputs)``: the compiled model run again on other inputs (no recompilation), which
    shows an optional input the frontend drops.

    ``built``: the single-op model (its instance, input names, reference name); ``pristine``: the
    inputs as fed; ``nondeterministic``: the comparison of the library's two reference runs when
    they disagreed; ``finish(outcome, stage, **fields)`` makes the ``TestResult``.
    ``pass_only``: raise ``NotAPass`` as soon as the verdict cannot be ``pass``, before the probes
    that explain a difference (the target's gap checks, the attribute defaults, the second
    reference: each converts or runs the model again). A batch decides passes only; every other
    part runs alone, where the probes run (opera/run/batch.py).
    """
    from opera.templates import get_template

    inst = built.instance
    target_name = target.name

    def compare(ref: list[np.ndarray], act: list[np.ndarray], values: bool = True) -> Any:
        return compare_outputs(
            ref,
            act,
            oracle,
            target=target_name,
            input_dtypes=input_dtypes(pristine),
            tolerance=_tolerance(inst),
            compare_values=values,
        )

    def inconsistent(verdict: Any, note: str = "") -> TestResult:
        if pass_only:
            raise NotAPass
        gap = unimplemented(target, built)
        if gap is not None and getattr(target, "gap_only_in_output_types", lambda _b: False)(built):
            # the ignored option explains the outputs' types: values that differ once the types
            # agree are a wrong result of their own
            values = compare(reference, _as_types_of(outputs, reference))
            if not values.consistent:
                note += f" (beyond the output type(s) the frontend ignores: {gap})"
                gap = None
        if gap is None and getattr(target, "library_keywords_reach_converter", True):
            # an attribute the frontend ignores: its outputs are exactly the library's with that
            # attribute at its documented default (a gap, as an attribute a converter never reads)
            for what, default_outputs in get_template(inst.library).default_attribute_references(built, pristine):
                if compare(_like(default_outputs, reference), outputs).consistent:
                    gap = f"attribute {what} ignored: the outputs are the operator's with that attribute at its default"
                    break
        if gap is None:
            gap = _older_version(get_template(inst.library).older_version_shapes(built), reference, outputs)
        if gap is None and rerun is not None:
            gap = _ignored_optional_input(built, pristine, reference, outputs, rerun, compare)
        if gap is not None:  # wrong because the frontend ignores what the model asks: a coverage gap
            return finish(
                Outcome.UNSUPPORTED,
                Stage.COMPARE,
                distance=verdict.distance,
                message=first_lines(f"{gap}; {verdict.reason}"),
            )
        return finish(
            Outcome.INCONSISTENT,
            Stage.COMPARE,
            signature=inconsistency_signature(target_name, inst.api, converter_of(target, built)),
            distance=verdict.distance,
            message=(verdict.reason + note)[:MESSAGE_LIMIT],
        )

    # A random operator (by specification) or a reference that disagrees with itself (a Comparison
    # of the two reference runs): values are not comparable, the rest is.
    if nondeterministic is not None or oracle.is_random(inst.api):
        verdict = compare(reference, outputs, values=False)
        if not verdict.consistent:
            return inconsistent(verdict)
        if nondeterministic is not None:
            return finish(
                Outcome.NONDETERMINISTIC,
                Stage.COMPARE,
                distance=nondeterministic.distance,
                message=(
                    f"two reference runs disagree: {nondeterministic.reason[: MESSAGE_LIMIT // 2]}; "
                    "the compiler's output count, shapes and dtypes match"
                ),
            )
        return finish(Outcome.PASS, Stage.COMPARE, distance=verdict.distance)

    names = dict(zip(_names(built, pristine), pristine, strict=True))
    undefined = judge_undefined_values(oracle, built, pristine, reference)
    if undefined is not None and undefined.whole:
        verdict = compare(reference, outputs, values=False)
        if not verdict.consistent:
            return inconsistent(verdict)
        return finish(Outcome.UNDEFINED, Stage.COMPARE, message=f"values not compared: {undefined.reason}")

    verdict = compare(reference, outputs)
    if verdict.consistent:
        return finish(Outcome.PASS, Stage.COMPARE, distance=verdict.distance)
    drawn = get_template(inst.library).draws_random(built)
    if drawn:  # random numbers drawn inside the model: a compiler may draw other ones
        shapes = compare(reference, outputs, values=False)
        if not shapes.consistent:
            return inconsistent(shapes)
        return finish(Outcome.PASS, Stage.COMPARE, distance=verdict.distance, message=f"values not compared: {drawn}")
    if pass_only:  # nothing below passes
        raise NotAPass
    if undefined is not None:
        defined = compare(reference, mask_undefined(reference, outputs, undefined))
        if defined.consistent:
            return finish(
                Outcome.UNDEFINED,
                Stage.COMPARE,
                distance=verdict.distance,
                message=f"differs only where undefined ({verdict.reason[:300]}): {undefined.reason}",
            )
        verdict = defined  # the defined values differ too: judged on those

    # A known defect of the library's references (both agree, against the specification's text).
    known = find_undefined(oracle.undefined, inst.api, dict(inst.kwargs), names, reference, _opset(inst), kind="library")
    if known is not None:
        return finish(
            Outcome.UNSTABLE_REFERENCE,
            Stage.COMPARE,
            distance=verdict.distance,
            message=first_lines(f"a known defect of the library's reference: {known.reason}; compiler vs reference: {verdict.reason}"),
        )

    # Outputs the frontend says it does not compute (a placeholder): a gap when only those differ.
    partial = _unimplemented_outputs(target, built)
    if partial is not None:
        missing, why = partial
        others = [ref if k in missing else out for k, (ref, out) in enumerate(zip(reference, outputs, strict=False))]
        rest = compare(reference, others + list(outputs[len(others) :]))
        if rest.consistent:
            return finish(Outcome.UNSUPPORTED, Stage.COMPARE, distance=verdict.distance, message=first_lines(f"{why}; {verdict.reason}"))
        verdict = rest  # the outputs it does compute differ too: judged on those

    # A second, independent reference of the library (onnx.reference beside onnxruntime, torch in
    # float64): when the library's own references disagree, this is no compiler verdict.
    template = get_template(inst.library)
    second = template.second_reference(built, pristine)
    if second is not None:
        name, other = second
        other = _like(other, reference)
        check = compare_outputs(
            reference, other, oracle, target=None, input_dtypes=input_dtypes(pristine), tolerance=_tolerance(inst)
        )
        if not check.consistent:
            agrees = compare(other, outputs).consistent
            return finish(
                Outcome.UNSTABLE_REFERENCE,
                Stage.COMPARE,
                distance=verdict.distance,
                message=(
                    f"the references disagree: {_reference_name(built)} vs {name}: {check.reason[:300]}; "
                    f"the compiler {'agrees' if agrees else 'does not agree'} with {name}; "
                    f"compiler vs reference: {verdict.reason[:300]}"
                ),
            )
    # The library's own lowering that the frontend converts (torch's run_decompositions for
    # tvm-torch and ov-torch): where it disagrees with the library itself and the compiler follows
    # it, the library is inconsistent, not the compiler.
    lowered = template.lowered_reference(built, pristine) if getattr(target, "converts_library_lowering", False) else None
    if lowered is not None:
        name_low, low_raw = lowered
        # the lowering computes in the library's own precision: its dtypes are the library's word
        # too (_like would hide eager's bfloat16 against its decomposition's float32)
        split = _dtype_split(reference, low_raw)
        low = _like(low_raw, reference)
        check = compare_outputs(reference, low, oracle, target=None, input_dtypes=input_dtypes(pristine), tolerance=_tolerance(inst))
        differs = split or (None if check.consistent else check.reason)
        if differs and compare(low_raw if split else low, outputs).consistent:
            return finish(
                Outcome.UNSTABLE_REFERENCE,
                Stage.COMPARE,
                distance=verdict.distance,
                message=(
                    f"the library disagrees with itself: {_reference_name(built)} vs {name_low}, which the frontend "
                    f"converts and the compiler agrees with: {differs[:300]}; compiler vs reference: {verdict.reason[:300]}"
                ),
            )
    # The library on the compiler's own device (eager torch on CUDA for a GPU target): kernels of
    # one library that disagree across devices, with the compiler following its device's, are the
    # library's inconsistency, not the compiler's.
    device_reference = getattr(target, "device_reference", None)
    on_device = device_reference(built, [x.copy() if isinstance(x, np.ndarray) else x for x in pristine]) if device_reference else None
    if on_device is not None:
        name_dev, dev_raw = on_device
        dev = _like(dev_raw, reference)
        check = compare_outputs(reference, dev, oracle, target=None, input_dtypes=input_dtypes(pristine), tolerance=_tolerance(inst))
        if not check.consistent and compare(dev, outputs).consistent:
            return finish(
                Outcome.UNSTABLE_REFERENCE,
                Stage.COMPARE,
                distance=verdict.distance,
                message=(
                    f"the library disagrees with itself across devices: {_reference_name(built)} vs {name_dev}, which "
                    f"the compiler agrees with: {check.reason[:300]}; compiler vs reference: {verdict.reason[:300]}"
                ),
            )
    if second is not None:
        return inconsistent(verdict, f" (confirmed by a second reference: {second[0]})")
    return inconsistent(verdict)


def _older_version(
    found: tuple[str, list[tuple[int, ...]]] | None, reference: list[np.ndarray], outputs: list[np.ndarray]
) -> str | None:
    """A compiler whose output shapes are exactly those the operator's previous version defines for
    this model (``Template.older_version_shapes``), where the selected version defines others,
    implements the older version: a coverage gap, said so."""
    if found is None:
        return None
    name, shapes = found
    actual = [tuple(np.shape(x)) for x in outputs]
    expected = [tuple(np.shape(x)) for x in reference]
    if actual != [tuple(s) for s in shapes] or actual == expected:
        return None
    return (
        f"the output shapes {actual} are the ones {name} defines for this model (its own version "
        f"defines {expected}): the frontend implements the older version"
    )


def _ignored_optional_input(
    built: Any,
    pristine: list[Any],
    reference: list[np.ndarray],
    outputs: list[np.ndarray],
    rerun: Callable[[list[Any]], list[np.ndarray]],
    compare: Callable[..., Any],
) -> str | None:
    """An optional input the frontend drops (OpenVINO's LSTM and its peephole ``P``): the compiler's
    outputs are the library's with that input omitted, and they stay put when the input takes
    another value that moves the library's. Both, because a wrong result can match the omitted
    input's by chance (NonMaxSuppression's strict IoU comparison matches its omitted threshold on
    the test's boxes, but its outputs move with the threshold)."""
    from opera.templates import get_template

    for probe in get_template(built.instance.library).optional_input_references(built, pristine):
        if not compare(_like(probe.omitted_outputs, reference), outputs).consistent:
            continue
        if compare(_like(probe.moved_outputs, reference), reference).consistent:
            continue  # the library does not move with it here: no evidence either way
        moved = list(pristine)  # ``rerun`` feeds copies
        moved[probe.position] = probe.moved
        try:
            again = rerun(moved)
        except Exception:
            continue
        if compare(outputs, again).consistent:
            return (
                f"optional input {probe.name} ignored: the outputs are the operator's with it omitted, "
                "and they do not change when it does"
            )
    return None


def _as_types_of(outputs: list[np.ndarray], reference: list[np.ndarray]) -> list[np.ndarray]:
    """Each output cast to its reference's dtype where the shapes agree (any numeric dtype)."""
    out = []
    for k, value in enumerate(outputs):
        arr = np.asarray(value)
        ref = np.asarray(reference[k]) if k < len(reference) else None
        out.append(arr.astype(ref.dtype) if ref is not None and arr.shape == ref.shape else arr)
    return out


def _dtype_split(reference: list[np.ndarray], lowered: list[Any]) -> str | None:
    """Where the library's own lowering gives an output another dtype than the library itself
    (eager soft_margin_loss of a bfloat16 input is bfloat16, its decomposition float32)."""
    for k, (ref, low) in enumerate(zip(reference, lowered, strict=False)):
        a, b = np.asarray(ref), np.asarray(low)
        if a.dtype != b.dtype:
            return f"output {k}: dtype {a.dtype} vs {b.dtype}"
    return None


def _like(outputs: list[np.ndarray], reference: list[np.ndarray]) -> list[np.ndarray]:
    """A wider second reference (torch in float64) rounded to the first reference's float dtypes,
    so that the two are compared on values, not on their types."""
    out = []
    for k, value in enumerate(outputs):
        arr = np.asarray(value)
        ref = np.asarray(reference[k]) if k < len(reference) else None
        if ref is not None and arr.shape == ref.shape and _floating(arr.dtype) and _floating(ref.dtype):
            arr = arr.astype(ref.dtype)
        out.append(arr)
    return out


def _floating(dtype: np.dtype) -> bool:
    """Float or complex, ml_dtypes' bfloat16 and float8 included (numpy calls their kind 'V')."""
    return dtype.kind in "fc" or dtype.name.startswith(("bfloat", "float"))


def _unimplemented_outputs(target: Any, built: Any) -> tuple[frozenset[int], str] | None:
    try:
        return target.unimplemented_outputs(built)
    except Exception:  # an error in the probe says nothing
        return None


def judge_domain(oracle: OracleConfig, built: Any, pristine: list[Any], reference: list[np.ndarray]) -> str | None:
    """Why the instance lies outside its operator's defined domain (``[[undefined]]`` rules with
    ``domain = true``: whatever a compiler does with it, it is ``undefined``), or None."""
    inst = built.instance
    names = dict(zip(_names(built, pristine), pristine, strict=True))
    reason = outside_domain(oracle.undefined, inst.api, dict(inst.kwargs), names, reference, _opset(inst), args=_operands(inst))
    return None if reason is None else f"outside the operator's domain, not run through the compiler: {reason}"


def judge_undefined_values(
    oracle: OracleConfig, built: Any, pristine: list[Any], reference: list[np.ndarray]
) -> Undefinedness | None:
    """Where the test's output values are undefined by the operator's specification (``[[undefined]]``
    value rules: a float Cast out of the integer type's range, NaN bounds, ...), as masks; None where
    every value is defined. The rules beside the reference compare two compiler runs only where the
    values are defined, as the reference oracle does."""
    inst = built.instance
    names = dict(zip(_names(built, pristine), pristine, strict=True))
    return find_undefined(oracle.undefined, inst.api, dict(inst.kwargs), names, reference, _opset(inst), args=_operands(inst))


def _operands(inst: Any) -> tuple[Any, ...]:
    """The positional operands a rule reads: a call's positional arguments, an ONNX node's inputs
    (constants included: an ONNX instance has no call arguments)."""
    return tuple(inst.args) if inst.args or inst.library != "onnx" else tuple(inst.inputs)


def _opset(inst: Any) -> int | None:
    opset = (inst.extra or {}).get("opset")
    return int(opset) if isinstance(opset, int) else None


def _names(built: Any, inputs: list[Any]) -> list[str]:
    names = list(getattr(built, "input_names", []) or [])
    return names if len(names) == len(inputs) else [f"input_{i}" for i in range(len(inputs))]


def _reference_name(built: Any) -> str:
    return str(built.details.get("reference", f"{built.instance.library} (eager)"))
