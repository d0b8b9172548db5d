"""Results broken down by where their instances came from: human-written vs tool-generated.

The store keeps each result's ``source_suite`` (``opinfo``, ``keras-tests``, ``onnx-node-tests``,
..., or ``opera-generate`` for instances made by ``opera generate``), so the breakdown needs no
corpus: outcomes per source, unique bug signatures per source, and the signatures only one source
found (the paper's Figure 7 compares sources this way).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from opera.generate import is_generated_suite
from opera.outcomes import Outcome, TestResult

__all__ = ["HUMAN", "TOOL", "SourceBreakdown", "SourceFigures", "breakdown_by_source", "source_of"]

HUMAN = "human"
TOOL = "generated"


def source_of(suite: str) -> str:
    """``generated`` for the generator's suite, ``human`` for every harvested one."""
    return TOOL if is_generated_suite(suite) else HUMAN


@dataclass
class SourceFigures:
    source: str
    tests: int = 0
    outcomes: Counter[str] = field(default_factory=Counter)
    signatures: set[str] = field(default_factory=set)
    suites: Counter[str] = field(default_factory=Counter)


@dataclass
class SourceBreakdown:
    sources: dict[str, SourceFigures] = field(default_factory=dict)

    def only_in(self, source: str) -> list[str]:
        mine = self.sources.get(source)
        if mine is None:
            return []
        others: set[str] = set()
        for name, figures in self.sources.items():
            if name != source:
                others |= figures.signatures
        return sorted(mine.signatures - others)

    def render(self) -> str:
        if not self.sources:
            return "no results"
        outcomes = [o.value for o in Outcome]
        lines = [
            " ".join(
                [f"{'source':<10}", f"{'tests':>7}"]
                + [f"{o:>{max(len(o), 5)}}" for o in outcomes]
                + ["signatures"]
            )
        ]
        for name in sorted(self.sources):
            f = self.sources[name]
            row = [f"{name:<10}", f"{f.tests:>7}"] + [
                f"{f.outcomes.get(o, 0):>{max(len(o), 5)}}" for o in outcomes
            ]
            lines.append(" ".join([*row, f"{len(f.signatures):>10}"]))
        for name in sorted(self.sources):
            only = self.only_in(name)
            lines.append(f"signatures found only by {name} instances ({len(only)}):")
            lines.extend(f"  {s}" for s in only)
        return "\n".join(lines)

    def to_json(self) -> dict[str, Any]:
        return {
            name: {
                "tests": f.tests,
                "outcomes": dict(f.outcomes),
                "signatures": len(f.signatures),
                "suites": dict(f.suites),
                "only_here": self.only_in(name),
            }
            for name, f in sorted(self.sources.items())
        }


def breakdown_by_source(results: Iterable[TestResult]) -> SourceBreakdown:
    breakdown = SourceBreakdown()
    for r in results:
        name = source_of(r.source_suite)
        f = breakdown.sources.setdefault(name, SourceFigures(name))
        f.tests += 1
        f.outcomes[r.outcome.value] += 1
        f.suites[r.source_suite] += 1
        if r.signature:
            f.signatures.add(r.signature)
    return breakdown
