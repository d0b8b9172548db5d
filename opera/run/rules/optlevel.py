"""``optlevel``: the same converted model compiled with the compiler's optimizations off must give
the default build's outputs (EAGLE's most productive rule: one computation, two execution modes).
What "off" means is each target's (``Target.compile_variant``): TVM's CPU pipeline without
FoldConstant/FuseOps/FuseTIR at TIR opt_level 0; OpenVINO's CPU plugin without snippets, in
accuracy mode; Inductor without vectorization, fusion or pattern rewrites."""

from __future__ import annotations

from opera.run.rules import RULES, VariantRule


@RULES.register("optlevel")
class OptLevelRule(VariantRule):
    name = "optlevel"
    summary = "the model compiled with the compiler's optimizations off agrees with the default build"
    what = "the build with optimizations off"
