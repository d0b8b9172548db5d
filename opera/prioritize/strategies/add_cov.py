"""Baseline additional-coverage: greedily the test covering the most statements not yet covered.

When no remaining test adds a new statement, the covered set is reset and the greedy starts over on
the remaining tests (the usual "additional" strategy of Rothermel et al.); tests that cover nothing
at all come last, in corpus order. Lazy re-scoring: a test's gain only shrinks while coverage grows.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable

from opera.model import OperatorInstance
from opera.prioritize.coverage_data import collection_seconds, load_coverage
from opera.prioritize.strategies import PrioritizeContext, Strategy, register_strategy
from opera.prioritize.strategies.total_cov import corpus_ids


def additional_order(ids: list[str], coverage: dict[str, list[str]]) -> tuple[list[str], int]:
    """(order, resets). Statements are interned to ints; ties go to the test seen first."""
    intern: dict[str, int] = {}
    stmts = [frozenset(intern.setdefault(s, len(intern)) for s in coverage.get(iid, ())) for iid in ids]
    remaining = [k for k in range(len(ids)) if stmts[k]]
    empty = [k for k in range(len(ids)) if not stmts[k]]
    order: list[int] = []
    resets = 0
    while remaining:
        covered: set[int] = set()
        heap = [(-len(stmts[k]), k) for k in remaining]
        heapq.heapify(heap)
        taken: set[int] = set()
        while heap:
            neg, k = heap[0]
            gain = len(stmts[k] - covered)
            if gain != -neg:
                heapq.heapreplace(heap, (-gain, k))
                continue
            if gain == 0:
                break  # nothing new left: reset
            heapq.heappop(heap)
            order.append(k)
            taken.add(k)
            covered |= stmts[k]
        remaining = [k for k in remaining if k not in taken]
        if remaining:
            resets += 1
    return [ids[k] for k in order + empty], resets


@register_strategy
class AdditionalCoverageStrategy(Strategy):
    name = "add-cov"
    description = "greedy additional statement coverage with resets (needs --coverage)"

    def check(self, ctx: PrioritizeContext) -> None:
        load_coverage(ctx.coverage, self.name)

    def order(self, instances: Iterable[OperatorInstance], ctx: PrioritizeContext) -> list[str]:
        coverage = load_coverage(ctx.coverage, self.name)
        ctx.notes["charged_seconds"] = collection_seconds(ctx.coverage)  # the coverage pass it needs
        ids = corpus_ids(instances)
        order, resets = additional_order(ids, coverage)
        ctx.notes.update(resets=resets, tests_without_coverage=sum(1 for iid in ids if iid not in coverage))
        return order
