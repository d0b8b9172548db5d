"""``opera nightly``: a prioritized, budgeted run of the corpus against every installed target,
compared with the previous nightly run in the store (docs/design.md, Nightly).

Modules: ``budget`` (splitting the time budget across targets), ``history`` (tagging nightly runs
and finding the previous one; opening an older store), ``compare`` (new / fixed / still failing /
changed symptom / newly unsupported / now supported, tied to version changes), ``junit`` and
``html`` (the outputs), ``heatmap`` (the per-operator outcome plot), ``pipeline`` (the whole job).
"""

from __future__ import annotations

from opera.nightly.compare import Change, ChangeKind, TargetComparison, Verdict, compare_results
from opera.nightly.pipeline import NightlyConfig, NightlyOutcome, TargetNight, render_text, run_nightly

__all__ = [
    "Change",
    "ChangeKind",
    "NightlyConfig",
    "NightlyOutcome",
    "TargetComparison",
    "TargetNight",
    "Verdict",
    "compare_results",
    "render_text",
    "run_nightly",
]
