"""``optlevel``: the same converted model compiled at another optimization level must give
the default build's outputs (EAGLE's most productive rule: one computation, two execution modes).
What the other level is, is each target's (``Target.compile_variant``): TVM's optimizing CPU
pipeline (constant folding and fusion, which ``tvm.compile``'s default on a CPU leaves out);
OpenVINO's CPU plugin without snippets, in accuracy mode; Inductor without vectorization, fusion
or pattern rewrites."""

from __future__ import annotations

from opera.run.rules import RULES, VariantRule


@RULES.register("optlevel")
class OptLevelRule(VariantRule):
    name = "optlevel"
    what = "the build at the other optimization level"
