"""``compilers``: where the library cannot judge, the compilers judge each other (Isra's
cross-compiler differential testing, ``../shared/papers/000_*``).

Applies to the tests whose own verdict says the library is no judge: ``nondeterministic`` (two
runs of the library disagree) and ``unstable-reference`` (two implementations of the library
disagree). Voters: every other available CPU target of the same library, on the same model and
inputs, and, for an unstable reference, the library's two references. Voters that agree (within
the target's thresholds) form groups; when one group holds a strict majority of at least two
voters and this target is not in it, this target is the outlier: a finding. Random operators are
left out (their outputs need not agree) and ``undefined`` outputs too (the specification allows
any value there).
"""

from __future__ import annotations

from typing import Any

from opera.outcomes import Outcome
from opera.run.rules import RULES, Rule, RuleContext, RuleResult


@RULES.register("compilers")
class CompilersRule(Rule):
    name = "compilers"

    def check(self, ctx: RuleContext) -> RuleResult:
        from opera.run.targets import NotApplicable, all_targets
        from opera.templates import get_template

        if ctx.verdict not in (Outcome.NONDETERMINISTIC, Outcome.UNSTABLE_REFERENCE):
            raise NotApplicable(f"the library judged this test ({ctx.verdict.value}): no vote needed")
        inst = ctx.built.instance
        if ctx.oracle.is_random(inst.api):
            raise NotApplicable("a random operator: compilers need not agree")
        drawn = get_template(inst.library).draws_random(ctx.built)
        if drawn:  # dropout in training mode inside multi_head_attention_forward, ...
            raise NotApplicable(f"{drawn}: compilers need not agree")
        voters: dict[str, list[Any]] = {ctx.target_name: ctx.outputs}
        if ctx.verdict is Outcome.UNSTABLE_REFERENCE:
            voters["reference"] = ctx.reference
            second = get_template(inst.library).second_reference(ctx.built, ctx.fresh_inputs())
            if second is not None:
                voters[second[0]] = second[1]
        for other in all_targets():
            if other.library != inst.library or other.name == ctx.target_name or other.needs_gpu:
                continue
            if other.availability() is not None:
                continue
            try:
                voters[other.name] = other.run(other.compile(other.convert(ctx.built)), ctx.fresh_inputs())
            except Exception:  # a voter that cannot run the model abstains
                continue
        if len(voters) < 3:
            raise NotApplicable(f"too few voters ({', '.join(voters)}): a majority needs three")
        groups: list[list[str]] = []
        for name, outputs in voters.items():
            for group in groups:
                if ctx.compare(voters[group[0]], outputs, values=True).consistent:
                    group.append(name)
                    break
            else:
                groups.append([name])
        groups.sort(key=len, reverse=True)
        described = "; ".join("{" + ", ".join(g) + "}" for g in groups)
        majority = groups[0]
        if len(majority) < 2 or 2 * len(majority) <= len(voters) or (len(groups) > 1 and len(groups[1]) == len(majority)):
            return RuleResult(self.name, "pass", message=f"no majority among the voters: {described}")
        if ctx.target_name in majority:
            return RuleResult(self.name, "pass", message=f"with the majority: {described}")
        comparison = ctx.compare(voters[majority[0]], ctx.outputs, values=True)
        return self.differs(ctx, comparison, f"an outlier against the majority {{{', '.join(majority)}}} ({described})")
