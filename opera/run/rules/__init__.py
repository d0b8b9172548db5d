"""Oracles beyond the reference: metamorphic and differential rules (issue 14; docs/design.md, Rules).

The reference oracle compares a compiler with the source library. A *rule* compares the compiler
with itself or with another path into a compiler, on a transformed but equivalent computation, so
it sees bugs the reference cannot: in what the compiler does after loading (its optimizations,
serialization), and where the library has no defined answer. Each rule is one module of this
package that registers a ``Rule`` subclass under its name (``opera run --oracle NAME,...``):

    optlevel   the same converted model compiled at another optimization level
    reload     the converted model serialized and read back, then compiled
    batch      a batch's outputs equal the concatenation of its slices' outputs
    paths      a torch model through the compiler's ONNX frontend (torch.onnx export) agrees
               with the same model through its torch frontend
    compilers  where the library is no judge (nondeterministic, unstable reference), this
               compiler agrees with the majority of the others
    transforms semantics-preserving rewrites of a torch model (TorchProbe) agree with it

A rule runs after the test's own verdict, only where the target's default pipeline produced
outputs; its result is a ``RuleResult`` with an outcome of its own (``RULE_OUTCOMES``), stored per
(test, rule) and, when it fails, a bug of its own whose signature names the rule
(``inconsistent:<target>:rule=<name>:...``, ``crash:<target>:rule=<name>:...``). A rule that does
not apply to an instance says why (``not-applicable``); it is never a failure.
"""

from __future__ import annotations

import abc
import functools
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np

from opera.model import OperatorInstance
from opera.outcomes import Outcome, Stage
from opera.registry import Registry
from opera.verdict.judge import first_lines, input_dtypes, traceback_text, unimplemented
from opera.verdict.oracles import Comparison, OracleConfig, compare_outputs
from opera.verdict.signature import converter_of, target_crash_signature
from opera.verdict.undefined import Undefinedness, mask_undefined
from opera.verdict.unsupported import UnsupportedPatterns

__all__ = [
    "REFERENCE",
    "RULES",
    "RULE_OUTCOMES",
    "Rule",
    "RuleContext",
    "RuleEvidence",
    "RuleResult",
    "VariantRule",
    "build_and_run",
    "parse_oracles",
    "which_agrees",
    "rule_names",
    "run_rules",
]

REFERENCE = "reference"  # the library's reference: every test's own verdict, always on

# What a rule concluded. Failures (a bug row, a signature): inconsistent, crash. Not judged:
# not-applicable (with the reason), nondeterministic (the default pipeline disagrees with itself),
# unsupported (the variant says it does not implement something), harness-error (Opera's code).
RULE_OUTCOMES = ("pass", "inconsistent", "crash", "not-applicable", "nondeterministic", "unsupported", "harness-error")


@dataclass
class RuleEvidence:
    """What shows a rule's finding on its own: ``target`` given ``built`` must compute
    ``expected`` (the library's reference). The worker writes it as a standalone reproducer, like a
    test's (``opera.reproduce.write``): ``paths`` gives the compiler's ONNX target with the exported
    model, ``transforms`` the test's target with the rewritten model."""

    target: Any
    built: Any
    expected: list[np.ndarray]
    stage: Stage = Stage.COMPARE  # where the target failed on it: a crash's stage, compare for a difference


def build_and_run(target: Any, built: Any, inputs: list[Any], reached: list[Stage]) -> tuple[Any, list[Any]]:
    """``built`` converted, compiled and run on ``target``: (compiled, outputs). ``reached[0]`` is
    the stage under way, for a caller that catches the compiler's exception (a crash's stage)."""
    reached[:] = [Stage.CONVERT]
    converted = target.convert(built)
    reached[:] = [Stage.COMPILE]
    compiled = target.compile(converted)
    reached[:] = [Stage.RUN]
    return compiled, target.run(compiled, inputs)


@dataclass
class RuleResult:
    rule: str
    outcome: str
    signature: str | None = None
    distance: float | None = None
    message: str = ""
    duration: float = 0.0
    # which side agrees with the library's reference, when the rule compared two compiler runs
    agrees_with_reference: str | None = None
    # a failing rule's reproducer material (not stored: the worker turns it into a script)
    evidence: RuleEvidence | None = field(default=None, repr=False, compare=False)

    def to_dict(self) -> dict[str, Any]:
        values = ((f.name, getattr(self, f.name)) for f in fields(self) if f.name != "evidence")
        return {k: v for k, v in values if v is not None and v != ""}


@dataclass
class RuleContext:
    """Everything a rule may use about one test that reached the compiler's outputs."""

    target: Any  # the Target object
    built: Any  # SingleOpModel as the test built it
    converted: Any  # target.convert(built)
    compiled: Any  # target.compile(converted)
    inputs: list[Any]  # the pristine inputs (copy before feeding: ops may write in place)
    reference: list[np.ndarray]  # the library's outputs
    outputs: list[np.ndarray]  # the default pipeline's outputs
    verdict: Outcome  # the test's own (reference oracle) verdict
    oracle: OracleConfig
    unsupported: UnsupportedPatterns
    build: Callable[[OperatorInstance], Any]  # the template's build with the run's seed and options
    values_comparable: bool = True  # False: random op / nondeterministic / undefined values
    undefined: Undefinedness | None = None  # positions whose values the specification leaves undefined
    # what the running rule does now, for the executor: "library" while the library works for it
    # (an exporter, onnxruntime on the export), "" while the compiler does (``run_rules`` sets it)
    report_step: Callable[[str], None] = field(default=lambda step: None, repr=False)

    @property
    def target_name(self) -> str:
        return str(self.target.name)

    def fresh_inputs(self) -> list[Any]:
        return [a.copy() if isinstance(a, np.ndarray) else a for a in self.inputs]

    def compare(
        self,
        expected: Sequence[Any],
        actual: Sequence[Any],
        inputs: Sequence[Any] | None = None,
        values: bool | None = None,
    ) -> Comparison:
        """Two output lists under the run's oracle thresholds for this target (values only where
        the test's values were comparable at all, unless ``values`` says)."""
        inst = self.built.instance
        tolerance = (inst.tolerance.atol, inst.tolerance.rtol) if inst.tolerance is not None else None
        expected, actual = list(expected), list(actual)
        # two runs may differ where the specification allows anything (a test whose values are all
        # undefined has values_comparable False already)
        if self.undefined is not None and not self.undefined.whole:
            expected = mask_undefined(self.reference, expected, self.undefined)
            actual = mask_undefined(self.reference, actual, self.undefined)
        return compare_outputs(
            expected,
            actual,
            self.oracle,
            target=self.target_name,
            input_dtypes=input_dtypes(list(inputs if inputs is not None else self.inputs)),
            tolerance=tolerance,
            compare_values=self.values_comparable if values is None else values,
        )


class Rule(abc.ABC):
    """One metamorphic or differential oracle. ``check`` raises ``NotApplicable`` (from
    ``opera.run.targets``) when the rule does not apply; any other exception out of it is Opera's
    own defect (``harness-error``): a rule turns the compiler's own exceptions into results itself
    (``crashed``)."""

    name: str = ""

    @abc.abstractmethod
    def check(self, ctx: RuleContext) -> RuleResult:
        """Run the rule on one test."""

    # -- helpers for rules ---------------------------------------------------------------------
    def passed(self, comparison: Comparison | None = None, message: str = "") -> RuleResult:
        return RuleResult(self.name, "pass", distance=comparison.distance if comparison else None, message=message)

    def crashed(
        self, ctx: RuleContext, exc: BaseException, where: str, via: Any = None, via_built: Any = None
    ) -> RuleResult:
        """The compiler raised on the variant where the default pipeline did not: a crash of the
        rule (or ``unsupported`` in the target's own words, or where its code shows it does not
        implement a feature ``via_built`` uses). ``via``: the other target the variant went through
        (``paths``) with the model it was given, whose frames, patterns and gaps judge the
        exception; its name joins the signature, which stays one of the test's target."""
        crashed_on = via if via is not None else ctx.target
        if isinstance(exc, Exception) and ctx.unsupported.match(exc, crashed_on.name, crashed_on.compiler) is not None:
            return RuleResult(self.name, "unsupported", message=first_lines(f"{where}: {exc}", 2000))
        gap = unimplemented(via, via_built) if via is not None else None
        if isinstance(exc, Exception) and gap is not None:
            return RuleResult(self.name, "unsupported", message=first_lines(f"{where}: {gap}; {exc}", 2000))
        kind, _, rest = target_crash_signature(exc, crashed_on.name, crashed_on).split(":", 2)
        through = f"{via.name}:" if via is not None else ""
        return RuleResult(
            self.name,
            "crash",
            signature=f"{kind}:{ctx.target_name}:rule={self.name}:{through}{rest}",
            message=first_lines(f"{where}; the default pipeline ran this model\n{traceback_text(exc)}", 4000),
        )

    def own_gap(self, comparison: Comparison, what: str, agrees: str, why: str) -> RuleResult:
        """``unsupported``: a difference that is the test's own coverage gap (``why``), not a
        finding of the rule's."""
        return RuleResult(
            self.name,
            "unsupported",
            distance=comparison.distance,
            message=first_lines(f"{what}: {comparison.reason}; the library's reference agrees with {agrees}: {why}", 2000),
            agrees_with_reference=agrees,
        )

    def differs(
        self,
        ctx: RuleContext,
        comparison: Comparison,
        what: str,
        agrees: str | None = None,
    ) -> RuleResult:
        """The two computations that must agree did not: ``inconsistent``, signed by the rule and
        the target's converter (or the API), like the reference oracle's signatures. Where the test's
        own verdict is a coverage gap (``unsupported``) and the library agrees with the other side,
        the difference is that gap in the default pipeline's outputs, already judged: the rule says
        ``unsupported``, not a finding of its own."""
        if ctx.verdict is Outcome.UNSUPPORTED and agrees not in (None, "neither", "default", ctx.target_name):
            return self.own_gap(comparison, what, agrees, "the difference is the test's own coverage gap in the default pipeline's outputs")
        converter = converter_of(ctx.target, ctx.built)
        where = f"converter={converter}" if converter else ctx.built.instance.api
        note = f"; the library's reference agrees with {agrees}" if agrees else ""
        return RuleResult(
            self.name,
            "inconsistent",
            signature=f"inconsistent:{ctx.target_name}:rule={self.name}:{where}",
            distance=comparison.distance,
            message=first_lines(f"{what}: {comparison.reason}{note}", 2000),
            agrees_with_reference=agrees,
        )

    def compare_with_default(
        self, ctx: RuleContext, outputs: list[Any], what: str, rerun: Callable[[], list[Any]] | None = None
    ) -> RuleResult:
        """The shared verdict of the variant rules: the variant's outputs against the default
        pipeline's. When they differ, the default pipeline runs twice more and the variant
        (``rerun``) once more: if either disagrees with itself (uninitialized memory, a racy
        kernel), the rule cannot judge (``nondeterministic``)."""
        comparison = ctx.compare(ctx.outputs, outputs)
        if comparison.consistent:
            return self.passed(comparison)
        reruns = [(ctx.outputs, ctx.target.run(ctx.compiled, ctx.fresh_inputs())) for _ in range(2)]
        if rerun is not None:
            reruns.append((outputs, rerun()))
        if any(not ctx.compare(first, again).consistent for first, again in reruns):
            return RuleResult(
                self.name,
                "nondeterministic",
                distance=comparison.distance,
                message=f"the default pipeline or the variant disagrees with itself on another run; {what}: {comparison.reason}"[:2000],
            )
        return self.differs(ctx, comparison, what, agrees=which_agrees(ctx, ctx.outputs, outputs, ("default", self.name)))


def which_agrees(ctx: RuleContext, first: list[Any], second: list[Any], names: tuple[str, str]) -> str | None:
    """Which of two compiler computations the library's reference agrees with (None: both or none,
    or the values are not comparable)."""
    if not ctx.values_comparable:
        return None
    a = ctx.compare(ctx.reference, first).consistent
    b = ctx.compare(ctx.reference, second).consistent
    if a == b:
        return "neither" if not a else None
    return names[0] if a else names[1]


class VariantRule(Rule):
    """A rule whose other computation is the target's ``compile_variant(converted, name)``: the
    variant's outputs must equal the default pipeline's on the same inputs."""

    what = ""  # the variant, in a report's words

    def check(self, ctx: RuleContext) -> RuleResult:
        try:
            variant = ctx.target.compile_variant(ctx.converted, self.name)
            outputs = ctx.target.run(variant, ctx.fresh_inputs())
        except Exception as exc:
            from opera.run.targets import HarnessError, NotApplicable

            if isinstance(exc, (NotApplicable, HarnessError)):
                raise
            return self.crashed(ctx, exc, f"{self.what} failed")
        return self.compare_with_default(
            ctx,
            outputs,
            f"{self.what} vs the default pipeline",
            rerun=lambda: ctx.target.run(variant, ctx.fresh_inputs()),
        )


# One module per rule, named after it (``optlevel.py`` registers ``optlevel``).
RULES: Registry[type[Rule]] = Registry("oracle", __name__, group="opera.rules", module_suffix="")


def rule_names() -> list[str]:
    """The known rules, by name (read from the module names: nothing is imported)."""
    return [name for name in RULES.names() if name != REFERENCE]


def parse_oracles(text: str | Sequence[str] | None) -> tuple[str, ...]:
    """``--oracle`` -> the extra rules to run, in the given order (``reference`` is always on and
    dropped here; ``all``: every registered rule). Unknown names raise ``ValueError`` naming the
    known ones."""
    if text is None:
        return ()
    parts = [p.strip() for chunk in ([text] if isinstance(text, str) else text) for p in chunk.split(",")]
    known = rule_names()
    chosen: list[str] = []
    for part in parts:
        if not part or part == REFERENCE:
            continue
        names = known if part == "all" else [part]
        for name in names:
            if name not in known:
                raise ValueError(f"unknown oracle {name!r}; known: {', '.join([REFERENCE, *known, 'all'])}")
            if name not in chosen:
                chosen.append(name)
    return tuple(chosen)


def run_rules(
    names: Sequence[str],
    ctx: RuleContext,
    before: Callable[[str, dict[str, dict[str, Any]], str], None] | None = None,
    write_evidence: Callable[[RuleResult], str | None] | None = None,
) -> dict[str, dict[str, Any]]:
    """Run each named rule on the test; ``{rule: RuleResult.to_dict()}``. A rule's own failure
    never stops the others, and never changes the test's verdict. ``before(name, done so far,
    step)`` is told each rule before it runs, and again at each step the rule reports
    (``RuleContext.report_step``: the local executor keeps it; a rule that kills the worker is that
    rule's native crash, not the test's, unless the library's side of it was running).
    ``write_evidence``: turns a failing rule's evidence into a reproducer script, whose temporary
    path goes into the rule's dict as ``reproducer_temp`` (the runner keeps the smallest per
    signature, as for a test's own)."""
    from opera.run.targets import NotApplicable

    out: dict[str, dict[str, Any]] = {}
    for name in names:
        if before is not None:
            done = dict(out)
            before(name, done, "")
            ctx.report_step = functools.partial(before, name, done)
        started = time.perf_counter()
        try:
            result = RULES.get(name)().check(ctx)
        except NotApplicable as exc:
            result = RuleResult(name, "not-applicable", message=first_lines(str(exc), 500))
        except Exception as exc:  # the rule's own code: Opera's defect, said as such
            result = RuleResult(
                name,
                "harness-error",
                signature=f"harness:{ctx.target_name}:rule={name}:{type(exc).__name__}",
                message=first_lines(f"Opera's own defect in rule {name}: {traceback_text(exc)}", 4000),
            )
        result.duration = time.perf_counter() - started
        out[name] = result.to_dict()
        if write_evidence is not None and result.evidence is not None and result.outcome in ("crash", "inconsistent"):
            path = write_evidence(result)
            if path is not None:
                out[name]["reproducer_temp"] = path
    return out
