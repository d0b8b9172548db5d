"""Baseline total-coverage: most frontend statements covered first (coverage.py data per test)."""

from __future__ import annotations

from collections.abc import Iterable

from opera.model import OperatorInstance
from opera.prioritize.coverage_data import collection_seconds, load_coverage
from opera.prioritize.strategies import PrioritizeContext, Strategy, register_strategy


def corpus_ids(instances: Iterable[OperatorInstance]) -> list[str]:
    return list(dict.fromkeys(inst.id for inst in instances))


@register_strategy
class TotalCoverageStrategy(Strategy):
    name = "total-cov"
    description = "statement coverage of the frontend per test, most first (needs --coverage)"

    def check(self, ctx: PrioritizeContext) -> None:
        load_coverage(ctx.coverage, self.name)

    def order(self, instances: Iterable[OperatorInstance], ctx: PrioritizeContext) -> list[str]:
        coverage = load_coverage(ctx.coverage, self.name)
        ctx.notes["charged_seconds"] = collection_seconds(ctx.coverage)  # the coverage pass it needs
        ids = corpus_ids(instances)
        size = {iid: len(set(coverage.get(iid, ()))) for iid in ids}
        ctx.notes["tests_without_coverage"] = sum(1 for iid in ids if iid not in coverage)
        position = {iid: k for k, iid in enumerate(ids)}
        return sorted(ids, key=lambda iid: (-size[iid], position[iid]))
