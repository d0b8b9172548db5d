"""``paths``: two frontends of one compiler must agree on one model (Isra's and issue 14's
differential oracle: no reference needed).

A torch instance reaches a compiler through its torch frontend (``tvm-torch``, ``ov-torch``: the
program ``torch.export`` gives) and, exported by torch itself (``torch.onnx.export`` of the same
program), through the compiler's ONNX frontend (``tvm-onnx``, ``ov-onnx``). A Keras instance
likewise through ``tvm-keras`` / ``ov-keras`` and, converted by tf2onnx from the inference
``tf.function`` both Keras frontends consume, through the ONNX frontend. The exported model must
first compute the torch reference on onnxruntime: where it does not, the export is not the same
computation and the rule does not apply. Then, when both frontends accept the model, their outputs
must agree; the result says which one the library's reference agrees with. A crash of the ONNX
frontend on the exported model (which onnxruntime runs) is a finding of this rule too, unless the
ONNX target says, in its own words, that it does not implement it, or its code shows a gap at one
of the export's nodes (``Target.unimplemented_feature``, node by node).
"""

from __future__ import annotations

import contextlib
import io
from typing import Any

import numpy as np

from opera.outcomes import Stage
from opera.run.rules import RULES, Rule, RuleContext, RuleEvidence, RuleResult, build_and_run, which_agrees

# The compiler -> the name of its ONNX target.
ONNX_TARGET = {"tvm": "tvm-onnx", "openvino": "ov-onnx"}


def export_onnx(built: Any) -> Any:
    """The torch model of ``built`` as an ONNX ``ModelProto``: ``torch.onnx.export`` (the dynamo
    exporter) of the same ``torch.export`` program the torch targets convert."""
    import torch

    from opera.run.targets._artifacts import export_torch

    program = export_torch(built)
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        exported = torch.onnx.export(program, (), dynamo=True, verbose=False)
    if exported is None:
        raise ValueError("torch.onnx.export returned no program")
    return exported.model_proto


def export_keras_onnx(built: Any) -> Any:
    """The Keras model of ``built`` as an ONNX ``ModelProto``: tf2onnx of ``model(inputs,
    training=False)`` as a ``tf.function`` (the graph TFLite and OpenVINO convert), inputs named
    ``input_<k>`` in the model's order."""
    import tensorflow as tf
    import tf2onnx

    model = built.model
    spec = [tf.TensorSpec(np.shape(x), tf.as_dtype(np.asarray(x).dtype), name=f"input_{k}") for k, x in enumerate(built.inputs)]
    function = tf.function(lambda *xs: model(list(xs), training=False))
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        proto, _ = tf2onnx.convert.from_function(function, input_signature=spec, opset=17)
    return proto


def _invalid_onnx(proto: Any) -> str:
    """Why ``onnx.checker`` with ``full_check`` (strict shape inference) rejects the export; ""
    when it accepts it. onnxruntime alone is no proof: it follows torch's MaxPool output-size rule
    at opsets whose MaxPool computes another size, and the exporter declares torch's size."""
    import onnx

    try:
        onnx.checker.check_model(proto, full_check=True)
    except Exception as exc:
        return f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"
    return ""


def _changed_input_types(proto: Any, inputs: list[Any]) -> str:
    """The exported graph inputs whose element type is not the model input's (tf2onnx writes a
    bfloat16 input as float16): such an export is another model."""
    from onnx import helper

    inits = {i.name for i in proto.graph.initializer}
    declared = [vi for vi in proto.graph.input if vi.name not in inits]
    changes = []
    for vi, value in zip(declared, inputs, strict=False):
        try:
            exported = np.dtype(helper.tensor_dtype_to_np_dtype(vi.type.tensor_type.elem_type)).name
        except Exception:
            continue
        given = np.asarray(value).dtype.name
        if exported != given:
            changes.append(f"{vi.name}: {given} -> {exported}")
    return ", ".join(changes)


EXPORTERS = {"torch": ("torch.onnx.export", export_onnx), "keras": ("tf2onnx", export_keras_onnx)}


@RULES.register("paths")
class PathsRule(Rule):
    name = "paths"

    def check(self, ctx: RuleContext) -> RuleResult:
        from opera.run.targets import NotApplicable, get_target
        from opera.run.targets._onnx_prep import graph_input_names
        from opera.templates import SingleOpModel, get_template

        library = ctx.built.instance.library
        if library not in EXPORTERS:
            raise NotApplicable(f"only torch and Keras instances have a second path (this is {library})")
        exporter, export = EXPORTERS[library]
        other_name = ONNX_TARGET.get(ctx.target.compiler)
        if other_name is None:
            raise NotApplicable(f"{ctx.target.compiler} has no ONNX frontend target")
        if not all(isinstance(x, np.ndarray) for x in ctx.inputs):
            raise NotApplicable("a model input is not a tensor")
        ctx.report_step("library")  # the exporter and onnxruntime: no compiler yet
        try:
            proto = export(ctx.built)
        except Exception as exc:
            raise NotApplicable(f"{exporter} rejects the model: {type(exc).__name__}: {exc}"[:400]) from None
        invalid = _invalid_onnx(proto)
        if invalid:  # e.g. MaxPool-12 with ceil_mode declaring torch's output size, not ONNX's
            raise NotApplicable(f"the {exporter} export is not a valid ONNX model (onnx.checker, full_check): {invalid}"[:400])
        names = graph_input_names(proto)
        if len(names) != len(ctx.inputs):
            raise NotApplicable(f"the exported model has inputs {names} for {len(ctx.inputs)} {library} inputs")
        changed = _changed_input_types(proto, ctx.inputs)
        if changed:
            raise NotApplicable(f"{exporter} changed the model's input types: {changed}")
        onnx_built = SingleOpModel(
            ctx.built.instance, proto, ctx.fresh_inputs(), list(names), {"data_inputs": "all-runtime", "exported": exporter}
        )
        try:
            onnx_reference = get_template("onnx").reference(onnx_built)
        except Exception as exc:
            raise NotApplicable(f"onnxruntime cannot run the exported model: {type(exc).__name__}: {exc}"[:400]) from None
        export_check = ctx.compare(ctx.reference, onnx_reference)
        if not export_check.consistent:
            raise NotApplicable(f"the exported model does not compute {library}'s reference on onnxruntime: {export_check.reason}"[:400])

        ctx.report_step("")
        other = get_target(other_name)
        reason = other.availability()
        if reason is not None:
            raise NotApplicable(f"{other_name} is not available: {reason}")
        onnx_built.inputs = ctx.fresh_inputs()
        reached = [Stage.CONVERT]
        try:
            compiled, outputs = build_and_run(other, onnx_built, ctx.fresh_inputs(), reached)
        except Exception as exc:
            from opera.run.targets import HarnessError

            if isinstance(exc, HarnessError):
                raise
            ran = onnx_built.details.get("reference") or "onnxruntime"  # onnx.reference where onnxruntime refused it
            where = f"{other.name} failed on the {exporter} export that {ran} runs and {ctx.target_name} converts"
            result = self.crashed(ctx, exc, where, via=other, via_built=onnx_built)
            result.evidence = _evidence(ctx, other, onnx_built, reached[0])
            return result
        comparison = ctx.compare(ctx.outputs, outputs)
        if comparison.consistent:
            return self.passed(comparison, f"{ctx.target_name} and {other_name} agree")
        skip, skipped = _not_computed(ctx, other, onnx_built)
        theirs = _masked(ctx, outputs, skip)
        if skipped:  # outputs a frontend says it does not compute (placeholders) are not compared
            comparison = ctx.compare(ctx.outputs, theirs)
            if comparison.consistent:
                return self.passed(comparison, f"{ctx.target_name} and {other_name} agree on the outputs both compute ({skipped})")
            outputs = theirs
        # either path disagreeing with itself on another run (uninitialized memory) is no judge
        again = [(ctx.outputs, ctx.target.run(ctx.compiled, ctx.fresh_inputs()))]
        again.append((outputs, _masked(ctx, other.run(compiled, ctx.fresh_inputs()), skip)))
        if any(not ctx.compare(first, second).consistent for first, second in again):
            return RuleResult(
                self.name,
                "nondeterministic",
                distance=comparison.distance,
                message=f"{ctx.target_name} or {other_name} disagrees with itself on another run; {comparison.reason}"[:2000],
            )
        agrees = which_agrees(ctx, ctx.outputs, outputs, (ctx.target_name, other_name))
        result = self.differs(ctx, comparison, f"{ctx.target_name} vs {other_name} on the exported model", agrees)
        if agrees == ctx.target_name:  # the ONNX path is the odd one out: it alone shows the finding
            result.evidence = _evidence(ctx, other, onnx_built)
        return result


def _evidence(ctx: RuleContext, other: Any, onnx_built: Any, stage: Stage = Stage.COMPARE) -> RuleEvidence:
    """The ONNX frontend on the export must compute the library's reference (the rule checked
    that onnxruntime does): a reproducer of the finding that needs neither the torch frontend nor
    Opera."""
    import dataclasses

    built = dataclasses.replace(onnx_built, inputs=ctx.fresh_inputs())
    return RuleEvidence(other, built, list(ctx.reference), stage)


def _not_computed(ctx: RuleContext, other: Any, onnx_built: Any) -> tuple[set[int], str]:
    """The output positions either frontend says it does not compute (``Target.unimplemented_outputs``:
    TVM's ``native_layer_norm`` returns output 0 again for the mean and rstd, its ONNX
    ``LayerNormalization`` fills them with placeholders), and why ("" when none)."""
    skip: set[int] = set()
    reasons: list[str] = []
    for target, built in ((ctx.target, ctx.built), (other, onnx_built)):
        try:
            found = target.unimplemented_outputs(built)
        except Exception:  # an error in the probe says nothing
            found = None
        if found:
            skip |= set(found[0])
            reasons.append(f"{target.name}: {found[1]}")
    return skip, "; ".join(reasons)


def _masked(ctx: RuleContext, outputs: list[Any], skip: set[int]) -> list[Any]:
    """The ONNX path's outputs with the positions in ``skip`` taken from the torch path, so only
    what both frontends compute is compared."""
    if not skip or len(outputs) != len(ctx.outputs):
        return list(outputs)
    return [ctx.outputs[k] if k in skip else value for k, value in enumerate(outputs)]
