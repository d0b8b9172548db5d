"""``transforms``: semantics-preserving rewrites of a torch model that the compiler must see through
(TorchProbe, ``../shared/papers/002_*``). The single-op torch model is wrapped in a module that
computes the same thing another way, and each wrapped model goes through the target like the test:

    helper       the call made from a nested helper function (a closure over the model)
    branch       the call inside an always-taken, shape-dependent branch (the other arm differs)
    view-trip    the first input taken through unsqueeze(0).squeeze(0) (an exact view round trip)
    negate-twice the first float input negated in place twice on a clone (mutate, then recover)
    resolution   ``torch.X(t, ...)`` called as ``t.X(...)`` or the reverse (operator resolution),
                 rebuilt as an instance of the other API where the library accepts it

Each variant's outputs must equal the plain model's on the target (compared with the run's
thresholds); a variant that fails where the plain model ran is a finding. A variant that does
not apply (no tensor input, no float input, no other API) is skipped; the rule is not applicable
when none applies. Runs on the torch targets (through ``torch.export`` on TVM and OpenVINO,
``torch.compile`` on Inductor).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import numpy as np

from opera.outcomes import Outcome, Stage
from opera.run.rules import RULES, Rule, RuleContext, RuleEvidence, RuleResult, build_and_run


def _wrap(model: Any, kind: str) -> Any:
    import torch

    class Transformed(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.inner = model

        def forward(self, *xs: Any) -> Any:
            if kind == "helper":

                def helper(*args: Any) -> Any:
                    return self.inner(*args)

                return helper(*xs)
            if kind == "branch":
                if xs[0].dim() >= 0:  # always true: decided on the shape, at trace time
                    return self.inner(*xs)
                return self.inner(*xs[::-1])
            if kind == "view-trip":
                return self.inner(xs[0].unsqueeze(0).squeeze(0), *xs[1:])
            if kind == "negate-twice":
                y = xs[0].clone()
                y.neg_()
                y.neg_()
                return self.inner(y, *xs[1:])
            raise ValueError(kind)

    return Transformed()


def _resolution_variant(api: str) -> str | None:
    """The other spelling of a torch operator: ``torch.X`` <-> ``torch.Tensor.X`` (None: none)."""
    import torch

    if api.startswith("torch.Tensor."):
        name = api[len("torch.Tensor.") :]
        return f"torch.{name}" if not name.endswith("_") and callable(getattr(torch, name, None)) else None
    if api.startswith("torch.") and api.count(".") == 1:
        name = api[len("torch.") :]
        return f"torch.Tensor.{name}" if callable(getattr(torch.Tensor, name, None)) else None
    return None


@RULES.register("transforms")
class TransformsRule(Rule):
    name = "transforms"

    def check(self, ctx: RuleContext) -> RuleResult:
        from opera.run.targets import NotApplicable

        if ctx.built.instance.library != "torch":
            raise NotApplicable(f"torch models only (this is {ctx.built.instance.library})")
        variants = self._variants(ctx)
        if not variants:
            raise NotApplicable("no rewrite applies (no tensor input and no other spelling of the operator)")
        distances = []
        for name, make in variants:
            built = make()
            if built is None:
                continue
            reached = [Stage.CONVERT]
            try:
                _, outputs = build_and_run(ctx.target, built, [a.copy() if isinstance(a, np.ndarray) else a for a in built.inputs], reached)
            except Exception as exc:
                from opera.run.targets import ArtifactError, HarnessError

                if isinstance(exc, (HarnessError, NotApplicable)):
                    raise
                if isinstance(exc, ArtifactError):  # the library cannot export the rewrite: skip it
                    continue
                result = self.crashed(ctx, exc, f"the model rewritten by '{name}' failed")
                result.message = f"rewrite {name}: " + result.message
                result.evidence = _evidence(ctx, built, reached[0])
                return result
            comparison = ctx.compare(ctx.outputs, outputs, inputs=built.inputs)
            if not comparison.consistent:
                result = self.differs(ctx, comparison, f"rewrite {name} vs the plain model")
                result.evidence = _evidence(ctx, built)
                return result
            distances.append(comparison.distance or 0.0)
        if not distances:
            raise NotApplicable("the library rejects every rewrite")
        return RuleResult(self.name, "pass", distance=max(distances), message=f"{len(distances)} rewrite(s)")

    def _variants(self, ctx: RuleContext) -> list[tuple[str, Callable[[], Any]]]:
        built = ctx.built
        inputs = list(built.inputs)
        tensor_first = bool(inputs) and isinstance(inputs[0], np.ndarray)
        out: list[tuple[str, Callable[[], Any]]] = []

        def wrapped(kind: str) -> Callable[[], Any]:
            return lambda: dataclasses.replace(built, model=_wrap(built.model, kind), inputs=ctx.fresh_inputs())

        if tensor_first:
            out += [("helper", wrapped("helper")), ("branch", wrapped("branch")), ("view-trip", wrapped("view-trip"))]
            if inputs[0].dtype.kind == "f" and inputs[0].size:
                out.append(("negate-twice", wrapped("negate-twice")))
        other = _resolution_variant(built.instance.api)
        if other is not None:
            out.append(("resolution", lambda: self._rebuilt(ctx, other)))
        return out

    @staticmethod
    def _rebuilt(ctx: RuleContext, api: str) -> Any:
        """The instance as a call of ``api`` (the other spelling), or None where the library
        rejects it or it is not the same computation in the library."""
        from opera.templates import get_template

        inst = dataclasses.replace(ctx.built.instance, api=api)
        try:
            built = ctx.build(inst)
            inputs = [a.copy() if isinstance(a, np.ndarray) else a for a in built.inputs]
            reference = get_template("torch").reference(built)
            built.inputs = inputs
        except Exception:
            return None
        if not ctx.compare(ctx.reference, reference, inputs=inputs).consistent:
            return None
        return built


def _evidence(ctx: RuleContext, built: Any, stage: Stage = Stage.COMPARE) -> RuleEvidence | None:
    """The rewritten model on the test's own target must compute the library's reference (every
    rewrite is the same computation). Only where the plain model passed: then the reproducer shows
    the rule's finding, not the test's own failure again."""
    if ctx.verdict is not Outcome.PASS:
        return None
    return RuleEvidence(ctx.target, dataclasses.replace(built, inputs=ctx.fresh_inputs()), list(ctx.reference), stage)
