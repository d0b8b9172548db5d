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
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from opera.errors import OperaError
from opera.outcomes import FAILURE_OUTCOMES

__all__ = ["OperatorHistory"]


@dataclass
class OperatorHistory:
    target: str
    tests: Counter[str] = field(default_factory=Counter)  # operator -> tests with a verdict
    bugs: Counter[str] = field(default_factory=Counter)  # operator -> tests that revealed a bug
    source: str = ""  # where it came from, for notes and order-file headers

    def score(self, api: str) -> float:
        """Laplace estimate of the chance that a test of ``api`` reveals a bug on the target."""
        api = api.split("@", 1)[0]  # an operator key names a non-default ONNX domain after "@"
        return (self.bugs[api] + 1) / (self.tests[api] + 2)

    def knows(self, apis: Iterable[str]) -> int:
        """How many of ``apis`` ran on the target before."""
        return sum(1 for a in set(apis) if self.tests[a])

    @classmethod
    def from_results(cls, target: str, results: Iterable[object], source: str = "") -> OperatorHistory:
        """Counts from ``TestResult``s (the last one per instance of the target wins)."""
        latest: dict[str, object] = {}
        for r in results:
            if getattr(r, "target", None) == target:
                latest[r.instance_id] = r  # type: ignore[attr-defined]
        history = cls(target, source=source)
        for r in latest.values():
            api = r.api  # type: ignore[attr-defined]
            history.tests[api] += 1
            if r.outcome in FAILURE_OUTCOMES and r.signature:  # type: ignore[attr-defined]
                history.bugs[api] += 1
        return history

    @classmethod
    def from_store(
        cls, path: str | Path, target: str, runs: Sequence[int] | None = None, exclude: Sequence[int] = ()
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
                ids = [r.id for r in store.runs()] if runs is None else list(runs)
                results = [r for run in ids if run not in exclude for r in store.results(run)]
        except OperaError:
            raise
        except Exception as exc:
            raise OperaError(f"history store {p} cannot be read: {type(exc).__name__}: {exc}") from None
        history = cls.from_results(target, results, source=str(p))
        if not history.tests:
            raise OperaError(f"history store {p} has no test on target {target}: nothing to learn from")
        return history
