"""What earlier runs on a target say about its operators: the ``opera`` strategy's learning across nights.

Issue 15 measured what holds an order back: operators a frontend does not implement (a third of
tvm-onnx's tests are ``unsupported``) and operators that never fail take the first positions as
readily as the buggy ones, because parameter diversity cannot tell them apart. A results store
can: for each operator, how many of its tests ran on the target, and how many revealed a bug.

``OperatorHistory`` holds those counts (the latest verdict of each instance on the target, over
every run of the store, or only the runs asked for). Its ``score`` is the Laplace estimate of an
operator's chance that a test reveals a bug, ``(bugs + 1) / (tests + 2)``, the posterior mean of a
Beta(1, 1) bandit arm: an operator never run scores 1/2, above every operator whose tests mostly
passed or were gaps (the bandit's exploration: each night tries what it has not seen), an operator
whose every test was a gap or a pass sinks as its tests accumulate, and one that fails keeps its
place. The store is the
bandit's state: a nightly adds its results and the next night's order follows. In the ``opera``
strategy this score replaces the equipped corpus's ``Num_DLL / Num_DLC`` as the operator score,
and diversity still orders each operator's tests.

The same estimate one level down orders an operator's tests: each parameter partition of an
operator (``instance_singles``: a dtype and rank, an attribute's value class) gets its Laplace bug
rate among the earlier tests that had it, with the operator's score as the prior, and a test's
``weight`` is the best of its partitions' rates over the operator's score. It multiplies the test's
diversity in the greedy order: a float16 convolution goes ahead of the float32 ones when float16
convolutions failed before. It needs the earlier runs' instances (their corpus files); without
them only the operator scores are learned.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from opera.corpus import instances_by_id
from opera.errors import OperaError
from opera.model import OperatorInstance
from opera.outcomes import FAILURE_OUTCOMES, TestResult
from opera.prioritize.partitions import instance_singles, operator_key

__all__ = ["OperatorHistory"]


@dataclass
class OperatorHistory:
    target: str
    tests: Counter[str] = field(default_factory=Counter)  # operator -> tests with a verdict
    bugs: Counter[str] = field(default_factory=Counter)  # operator -> tests that revealed a bug
    # (operator key, parameter partition) -> tests that had it / that revealed a bug
    element_tests: Counter[tuple[str, Hashable]] = field(default_factory=Counter)
    element_bugs: Counter[tuple[str, Hashable]] = field(default_factory=Counter)
    source: str = ""  # where it came from, for notes and order-file headers

    def score(self, api: str) -> float:
        """Laplace estimate of the chance that a test of ``api`` reveals a bug on the target."""
        api = api.split("@", 1)[0]  # an operator key names a non-default ONNX domain after "@"
        return (self.bugs[api] + 1) / (self.tests[api] + 2)

    def partition_rate(self, op: str, single: Hashable, prior: float) -> float:
        """Laplace estimate of the bug rate of tests of operator ``op`` with the partition ``single``,
        with ``prior`` (the operator's score) as the prior mean, worth two tests."""
        key = (op, single)
        return (self.element_bugs[key] + 2 * prior) / (self.element_tests[key] + 2)

    def weight(self, inst: OperatorInstance) -> float:
        """How much likelier than its operator's average ``inst`` is to reveal a bug: the best
        Laplace rate of its parameter partitions (prior: the operator's score) over that score.
        (The strategy computes the same from the interned corpus: ``_greedy.history_weights``.)"""
        op = operator_key(inst)
        prior = self.score(op)
        rates = [self.partition_rate(op, s, prior) for s in set(instance_singles(inst))]
        return max(rates) / prior if rates else 1.0

    def knows(self, apis: Iterable[str]) -> int:
        """How many of ``apis`` ran on the target before."""
        return sum(1 for a in set(apis) if self.tests[a])

    @classmethod
    def from_results(
        cls,
        target: str,
        results: Iterable[TestResult],
        source: str = "",
        instances: Mapping[str, OperatorInstance] | None = None,
    ) -> OperatorHistory:
        """Counts from ``TestResult``s (the last one per instance of the target wins); partition
        counts for those whose instance ``instances`` holds."""
        latest: dict[str, TestResult] = {}
        for r in results:
            if r.target == target:
                latest[r.instance_id] = r
        history = cls(target, source=source)
        for r in latest.values():
            bug = r.outcome in FAILURE_OUTCOMES and bool(r.signature)
            history.tests[r.api] += 1
            history.bugs[r.api] += bug
            inst = instances.get(r.instance_id) if instances else None
            if inst is not None:
                op = operator_key(inst)
                for single in set(instance_singles(inst)):
                    history.element_tests[(op, single)] += 1
                    history.element_bugs[(op, single)] += bug
        return history

    def merged(self, other: OperatorHistory) -> OperatorHistory:
        """The counts of both (the results of two stores: two machines, or nights kept apart)."""
        if other.target != self.target:
            raise OperaError(f"cannot merge the history of {other.target} into that of {self.target}")
        return OperatorHistory(
            self.target,
            self.tests + other.tests,
            self.bugs + other.bugs,
            self.element_tests + other.element_tests,
            self.element_bugs + other.element_bugs,
            source=", ".join(s for s in (self.source, other.source) if s),
        )

    @classmethod
    def from_stores(
        cls,
        paths: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
        target: str,
        evaluated: tuple[Path, int] | None = None,
    ) -> OperatorHistory:
        """The merged history of ``target`` over one store or several; ``evaluated``: a (store, run)
        that must not count (the run an order is judged on), left out where one of ``paths`` is that store."""
        paths = [paths] if isinstance(paths, (str, os.PathLike)) else list(paths)
        histories = []
        for path in paths:
            same = evaluated is not None and Path(path).resolve() == evaluated[0].resolve()
            try:
                histories.append(cls.from_store(path, target, exclude=[evaluated[1]] if same and evaluated else ()))
            except OperaError:
                if not same or len(paths) == 1:
                    raise
                # the evaluated store holds nothing else: the other stores are the history
        if not histories:
            raise OperaError("no history store given")
        merged = histories[0]
        for other in histories[1:]:
            merged = merged.merged(other)
        return merged

    @classmethod
    def from_store(
        cls, path: str | os.PathLike[str], target: str, runs: Sequence[int] | None = None, exclude: Sequence[int] = ()
    ) -> OperatorHistory:
        """The history of ``target`` in the store at ``path`` (``runs``: only those; ``exclude``:
        not those, e.g. the run being evaluated). ``OperaError`` (one line) on a store that cannot
        be read or holds no test of the target."""
        from opera.store import ResultStore

        p = Path(path)
        if not p.exists():
            raise OperaError(f"history store not found: {p}")
        try:
            with ResultStore(p) as store:
                chosen = [r for r in store.runs() if (runs is None or r.id in runs) and r.id not in exclude]
                results = [r for run in chosen for r in store.results(run.id) if r.target == target]
        except OperaError:
            raise
        except Exception as exc:
            raise OperaError(f"history store {p} cannot be read: {type(exc).__name__}: {exc}") from None
        instances = instances_by_id((c for run in chosen for c in run.corpus), {r.instance_id for r in results})
        history = cls.from_results(target, results, source=str(p), instances=instances)
        if not history.tests:
            raise OperaError(f"history store {p} has no test on target {target}: nothing to learn from")
        return history
