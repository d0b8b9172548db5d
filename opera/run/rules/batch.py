"""``batch``: for an operator that acts on each batch element alone, the compiler's output on a
batch must equal its outputs on the batch's slices (EAGLE's batch-split rule).

Which operators act per element is measured, not listed: the instance is rebuilt with its first
operand cut to its first and to its last element along axis 0, and the *library* must give
exactly the full batch's output rows on them (every output with the batch as its first axis).
Where it does not (a reduction over the batch, a shape argument tied to the batch, a random
operator), the rule does not apply, with the reason. Where it does, the compiler's outputs on the
two slice models must equal the rows of its output on the whole batch.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from opera.model import InstanceKind, OperatorInstance
from opera.outcomes import Outcome
from opera.run.rules import RULES, Rule, RuleContext, RuleResult
from opera.values import TensorSpec


def _operand_field(inst: OperatorInstance) -> tuple[str, int] | None:
    """Where the instance keeps the operand that becomes the model's first runtime input."""
    if inst.kind is InstanceKind.FUNCTION:
        return ("args", 0) if inst.args else None
    return ("inputs", 0) if inst.inputs else None


def sliced_instance(inst: OperatorInstance, first: np.ndarray, index: int, *, all_batched: bool = False) -> OperatorInstance:
    """``inst`` with the operand that is ``first`` (the built model's first input) cut to
    ``first[index:index + 1]`` (exact values from here on); ``all_batched``: every other tensor
    operand of the same list whose first axis is the batch too (both operands of an Add)."""
    where = _operand_field(inst)
    if where is None:
        raise ValueError("no operand")
    name, pos = where
    values = list(getattr(inst, name))
    batch = first.shape[0]
    for k, value in enumerate(values):
        if k == pos:
            values[k] = np.ascontiguousarray(first[index : index + 1])
        elif all_batched:
            array = value.materialize() if isinstance(value, TensorSpec) else value
            if isinstance(array, np.ndarray) and array.ndim and array.shape[0] == batch:
                values[k] = np.ascontiguousarray(array[index : index + 1])
    if name == "args":
        return dataclasses.replace(inst, args=tuple(values))
    return dataclasses.replace(inst, inputs=tuple(values))


def _rows(outputs: list[Any], index: int) -> list[Any]:
    return [np.asarray(o)[index : index + 1] for o in outputs]


@RULES.register("batch")
class BatchRule(Rule):
    name = "batch"

    def check(self, ctx: RuleContext) -> RuleResult:
        from opera.run.targets import ArtifactError, HarnessError, NotApplicable

        if not ctx.values_comparable:
            raise NotApplicable("the values are not comparable (a random operator, or a nondeterministic or undefined reference)")
        if not ctx.inputs or not isinstance(ctx.inputs[0], np.ndarray):
            raise NotApplicable("the model has no tensor input")
        first = ctx.inputs[0]
        batch = first.shape[0] if first.ndim else 0
        if batch < 2:
            raise NotApplicable(f"the first input has no batch axis of 2 or more (shape {list(first.shape)})")
        if _operand_field(ctx.built.instance) is None:
            raise NotApplicable("the instance has no operand to slice")
        outputs = [np.asarray(o) for o in ctx.reference]
        if not outputs or any(o.ndim == 0 or o.shape[0] != batch for o in outputs):
            shapes = [list(o.shape) for o in outputs]
            raise NotApplicable(f"not every output has the batch ({batch}) as its first axis: {shapes}")
        produced = [np.asarray(o) for o in ctx.outputs]
        if len(produced) != len(outputs) or any(o.ndim == 0 or o.shape[0] != batch for o in produced):
            raise NotApplicable(
                f"the default build's outputs do not have the batch as their first axis: {[list(o.shape) for o in produced]} "
                "(the reference oracle judges that)"
            )
        checked = []
        for index in (0, batch - 1):
            built, reference = self._per_element_slice(ctx, first, index)
            try:
                target = ctx.target
                compiled = target.compile(target.convert(built))
                actual = target.run(compiled, [a.copy() if isinstance(a, np.ndarray) else a for a in built.inputs])
            except Exception as exc:
                if isinstance(exc, (NotApplicable, HarnessError)):
                    raise
                if isinstance(exc, ArtifactError):  # the library, not the compiler, fails on the slice
                    raise NotApplicable(f"the library cannot produce the slice model's artifact: {exc}"[:400]) from None
                return self.crashed(ctx, exc, f"the model on batch slice {index} (shape {[1, *first.shape[1:]]}) failed")
            comparison = ctx.compare(_rows(ctx.outputs, index), actual, inputs=built.inputs)
            if not comparison.consistent:
                what = f"slice {index} of {batch} vs row {index} of the batch"
                # as the variant rules do (Rule.compare_with_default): the batch's build twice more
                # and the slice's once more; one that disagrees with itself (an empty-set reduction's
                # uninitialized output) leaves the rule no judge
                again = [ctx.target.run(ctx.compiled, ctx.fresh_inputs()) for _ in range(2)]
                slice_again = target.run(compiled, [a.copy() if isinstance(a, np.ndarray) else a for a in built.inputs])
                if any(not ctx.compare(ctx.outputs, o).consistent for o in again) or not ctx.compare(actual, slice_again).consistent:
                    return RuleResult(
                        self.name,
                        "nondeterministic",
                        distance=comparison.distance,
                        message=f"the batch's build or the slice's disagrees with itself on another run; {what}: {comparison.reason}"[:2000],
                    )
                slice_ok = ctx.compare(reference, actual, inputs=built.inputs).consistent
                batch_ok = ctx.compare(_rows(ctx.reference, index), _rows(ctx.outputs, index)).consistent
                agrees = "the batch" if batch_ok and not slice_ok else "the slice" if slice_ok and not batch_ok else "neither"
                if agrees == "neither" and ctx.verdict is Outcome.UNSUPPORTED:
                    # both builds carry the test's own coverage gap, whose effect depends on the batch
                    # (GATHER's batch_dims, never read by TVM's TFLite frontend, on take_along_axis)
                    return self.own_gap(comparison, what, agrees, "both carry the test's own coverage gap")
                return self.differs(ctx, comparison, what, agrees)
            checked.append(comparison.distance or 0.0)
        return RuleResult(self.name, "pass", distance=max(checked), message=f"slices 0 and {batch - 1} of {batch}")

    def _per_element_slice(self, ctx: RuleContext, first: np.ndarray, index: int) -> tuple[Any, list[Any]]:
        """The slice model whose library outputs are row ``index`` of the batch's: the first
        operand sliced alone, else every operand with the batch axis sliced together."""
        from opera.run.targets import NotApplicable

        reasons = []
        for all_batched in (False, True):
            try:
                built, reference = self._library_slice(ctx, first, index, all_batched)
            except NotApplicable as exc:
                reasons.append(str(exc))
                continue
            library = ctx.compare(_rows(ctx.reference, index), reference, inputs=built.inputs)
            if library.consistent:
                return built, reference
            reasons.append(f"the library's output on slice {index} is not row {index} of its output on the batch: {library.reason}")
        raise NotApplicable(reasons[-1] if reasons else "no slice")

    @staticmethod
    def _library_slice(ctx: RuleContext, first: np.ndarray, index: int, all_batched: bool) -> tuple[Any, list[Any]]:
        """The sliced instance built and run in its library (its own reference, as the test's)."""
        from opera.run.targets import NotApplicable
        from opera.templates import get_template

        inst = ctx.built.instance
        try:
            built = ctx.build(sliced_instance(inst, first, index, all_batched=all_batched))
            inputs = [a.copy() if isinstance(a, np.ndarray) else a for a in built.inputs]
            reference = get_template(inst.library).reference(built)
            built.inputs = inputs
        except Exception as exc:  # the library rejects the slice: the relation cannot be checked
            raise NotApplicable(f"the library rejects the model on one batch element: {type(exc).__name__}: {exc}"[:400]) from None
        got = built.inputs[0] if built.inputs else None
        if not isinstance(got, np.ndarray) or not np.array_equal(got, first[index : index + 1], equal_nan=got.dtype.kind in "fc"):
            raise NotApplicable("the first input of the sliced model is not the slice (the operand is not the first input)")
        return built, reference
