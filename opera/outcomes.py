"""Test outcomes, pipeline stages and the result record of one test (docs/design.md, Outcomes).

A *test* is one operator instance run through one target. Its verdict is an ``Outcome`` plus the
``Stage`` where the verdict was reached, so a crash while compiling is told apart from one while
converting.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any

__all__ = ["FAILURE_OUTCOMES", "NOT_JUDGED_OUTCOMES", "Outcome", "Stage", "TestResult"]


class Outcome(StrEnum):
    PASS = "pass"
    INVALID = "invalid"  # the library itself rejects the instance (or cannot produce the artifact)
    UNSUPPORTED = "unsupported"  # the frontend says it does not support it: recorded, not a bug
    CRASH = "crash"  # a Python exception while converting, compiling or running
    NATIVE_CRASH = "native-crash"  # the worker died: a signal, an abort, or killed over its memory limit
    TIMEOUT = "timeout"
    INCONSISTENT = "inconsistent"  # output differs from the library's reference
    NONDETERMINISTIC = "nondeterministic"  # the library disagrees with itself on a re-run; the compiler
    # still ran (crashes count), only output count, shapes and dtypes were compared
    UNDEFINED = "undefined"  # outputs differ only where the operator's spec leaves the values undefined
    UNSTABLE_REFERENCE = "unstable-reference"  # two references of the library disagree with each other
    HARNESS_ERROR = "harness-error"  # Opera's own code failed (input preparation, output decoding): our defect


# Outcomes that point at a compiler bug: they get a signature, a bug row and a reproducer.
FAILURE_OUTCOMES: frozenset[Outcome] = frozenset(
    {Outcome.CRASH, Outcome.NATIVE_CRASH, Outcome.TIMEOUT, Outcome.INCONSISTENT}
)

# Outcomes that say nothing about the compiler either way: no bug, but not a pass either (JUnit
# "skipped"). A harness error is listed on its own, as Opera's defect.
NOT_JUDGED_OUTCOMES: frozenset[Outcome] = frozenset(
    {
        Outcome.INVALID,
        Outcome.UNSUPPORTED,
        Outcome.NONDETERMINISTIC,
        Outcome.UNDEFINED,
        Outcome.UNSTABLE_REFERENCE,
        Outcome.HARNESS_ERROR,
    }
)


class Stage(StrEnum):
    REFERENCE = "reference"  # build the model and run it in the source library
    CONVERT = "convert"  # frontend: library model -> compiler IR
    COMPILE = "compile"
    RUN = "run"
    COMPARE = "compare"  # the oracle


@dataclass
class TestResult:
    """The verdict of one (instance, target) test, as stored in the results table.

    ``distance`` is the Chebyshev distance of the comparison that was made (reference vs target,
    or reference vs reference for ``nondeterministic``), ``None`` when no comparison happened;
    ``inf`` for a shape/dtype/NaN-pattern mismatch. ``duration`` is wall seconds.
    """

    __test__ = False  # not a pytest test class despite the name

    instance_id: str
    api: str
    target: str
    outcome: Outcome
    stage: Stage
    signature: str | None = None
    distance: float | None = None
    duration: float = 0.0
    message: str = ""
    reproducer: str | None = None
    source_suite: str = ""
    source_test: str = ""  # the library test the instance was harvested from (Source.test)
    run_id: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def is_failure(self) -> bool:
        return self.outcome in FAILURE_OUTCOMES

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["outcome"] = self.outcome.value
        out["stage"] = self.stage.value
        return out
