"""Executors: where tests run (docs/design.md, Executors).

The runner only talks to the ``Executor`` protocol: it ``submit``s ``TestTask``s and ``poll``s
for ``TaskOutcome``s; how tests are isolated (persistent local worker processes, ``local``; the
actors of a Ray cluster, ``ray``) is the executor's business. An executor must turn a hung test
into a ``timeout`` result and a dead worker into a ``native-crash`` result (see
``opera.run.execution.dead_worker_result``), and keep going with the other tests.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from opera.model import OperatorInstance
from opera.outcomes import TestResult
from opera.registry import Registry

__all__ = [
    "EXECUTORS",
    "Executor",
    "ExecutorFactory",
    "ExecutorRequest",
    "TaskOutcome",
    "TaskQueue",
    "TestTask",
    "WorkerSettings",
    "prepare_executor",
]


@dataclass(frozen=True)
class WorkerSettings:
    """What every test needs to know besides its instance and target (picklable)."""

    seed: int = 0
    timeout_s: float = 60.0
    # Time allowed for a worker's first contact with a target (framework + compiler imports),
    # before the per-test timeout starts counting.
    warmup_timeout_s: float = 300.0
    max_rss_bytes: int | None = None
    oracle_config: str | None = None
    unsupported_config: str | None = None
    reproducer_dir: str | None = None  # None: no reproducers
    log_dir: str | None = None  # worker stdout/stderr go to files here (None: inherit)
    # torch function instances: "constants" (the data tensor is the graph input, weights, bias,
    # indices, ... are constants) or "inputs" (every tensor argument a graph input); see
    # templates/torch_template.py
    torch_tensor_args: str = "constants"
    # ONNX integer/bool data operands: "runtime" graph inputs or "constants" (initializers, which a
    # frontend may fold away at conversion); see opera/run/targets/_onnx_prep.py
    onnx_data_inputs: str = "runtime"
    # metamorphic / differential rules run after each test's own verdict (opera.run.rules); ():
    # the reference oracle only
    rules: tuple[str, ...] = ()
    # batched compilation (opera.run.batch): up to ``batch`` tests of one of ``batch_targets`` per
    # worker task; 1: every test alone
    batch: int = 1
    batch_targets: tuple[str, ...] = ()
    # (target, operator) pairs that did not pass in the store's earlier runs: their tests run alone
    # from the start instead of failing a batch first (opera.run.batch)
    batch_known_failing: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class TestTask:
    """One test (``kind="test"``), several tests of one target compiled together (``kind="batch"``,
    ``members``), or, after a worker died on a test, a reproducer request (``kind="reproduce"``:
    rebuild the instance and write the script, no compiler call)."""

    __test__ = False

    seq: int
    instance: OperatorInstance
    target: str
    kind: str = "test"
    failed: TestResult | None = None  # for kind="reproduce": the result the script must show
    # kind="batch": the tests compiled together (``instance``/``seq`` are the first one's)
    members: tuple[TestTask, ...] = ()
    alone: bool = False  # a batch sent it back: it runs on its own, never in a batch again
    # a worker that had run other tests died on it (a signal, or past its memory limit): it runs
    # again alone in a fresh worker, and this says how the first worker died (docs/design.md)
    confirm: str | None = None

    @property
    def size(self) -> int:
        """How many tests this task stands for."""
        return len(self.members) if self.kind == "batch" else 1


@dataclass
class TaskOutcome:
    task: TestTask
    result: TestResult | None = None  # kind="test"
    reproducer: str | None = None  # a reproducer file the worker wrote (temporary name)
    extra: dict[str, object] = field(default_factory=dict)


class TaskQueue:
    """The tasks an executor holds until a worker is free, per target: a reproducer request
    goes ahead of its target's tests; a worker keeps to the target it ran last while that one
    has tasks (its imports and caches stay warm)."""

    def __init__(self) -> None:
        self._by_target: dict[str, deque[TestTask]] = {}
        self._count = 0

    def __len__(self) -> int:
        return self._count

    def add(self, task: TestTask) -> None:
        queue = self._by_target.setdefault(task.target, deque())
        if task.kind == "reproduce":
            queue.appendleft(task)
        else:
            queue.append(task)
        self._count += 1

    def take_more(self, target: str, n: int) -> list[TestTask]:
        """Up to ``n`` more tests (not reproducer requests) of ``target``, in queue order."""
        queue = self._by_target.get(target)
        out: list[TestTask] = []
        while queue and len(out) < n and queue[0].kind == "test" and not queue[0].alone:
            out.append(queue.popleft())
            self._count -= 1
        return out

    def put_back(self, task: TestTask) -> None:
        """A task whose worker was lost: first in line again."""
        self._by_target.setdefault(task.target, deque()).appendleft(task)
        self._count += 1

    def targets(self) -> list[str]:
        """The targets that have tasks waiting."""
        return [t for t, q in self._by_target.items() if q]

    def take(
        self,
        affinity: str | None,
        taken: set[str],
        allowed: Callable[[str], bool] = lambda target: True,
        rank: Callable[[str], Any] = lambda target: 0,
    ) -> TestTask | None:
        """The next task for a worker that last ran ``affinity``: more of that target, else the
        target whose first task is the earliest planned (reproducers first) among those not
        ``taken`` by other workers (any when all are), lowest ``rank`` before that; only targets
        ``allowed`` on this worker."""
        target: str | None = None
        if affinity and self._by_target.get(affinity) and allowed(affinity):
            target = affinity
        else:
            options = [
                (rank(t), q[0].seq if q[0].kind == "test" else -1, t)
                for t, q in self._by_target.items()
                if q and allowed(t)
            ]
            if not options:
                return None
            free = [o for o in options if o[2] not in taken]
            target = min(free or options)[2]
        self._count -= 1
        return self._by_target[target].popleft()

    def drop_tests(self) -> list[TestTask]:
        """Remove the tests no worker has taken yet (reproducer requests stay), in planned order."""
        dropped: list[TestTask] = []
        for target, queue in self._by_target.items():
            kept = deque(t for t in queue if t.kind == "reproduce")
            dropped.extend(t for t in queue if t.kind != "reproduce")
            self._by_target[target] = kept
        self._count -= len(dropped)
        return sorted(dropped, key=lambda t: t.seq)

    def clear(self) -> None:
        self._by_target.clear()
        self._count = 0


class Executor(Protocol):
    def submit(self, task: TestTask) -> None:
        """Queue a task; it runs when a worker is free (tasks of one target go to the same worker)."""

    def free_slots(self) -> int:
        """How many more tasks the executor wants queued now (the runner keeps it fed)."""

    def poll(self, timeout_s: float) -> list[TaskOutcome]:
        """Wait up to ``timeout_s`` and return the tasks that finished meanwhile."""

    def in_flight(self) -> int:
        """Tasks submitted and not yet returned by ``poll``."""

    def drop_queued(self) -> int:
        """Forget the tests submitted that no worker has started (the run's budget is spent: they
        stay unrun, for ``--resume``); how many. Tests under way finish."""

    def close(self) -> None:
        """Stop every worker (killing the ones still busy)."""


ExecutorFactory = Callable[[int, WorkerSettings], Executor]

@dataclass(frozen=True)
class ExecutorRequest:
    """What a run asks of an executor before it starts (``prepare`` checks it: one clear
    ``OperaError`` for an unreachable cluster, a missing GPU, ... before the store is touched)."""

    targets: dict[str, Any]  # name -> Target (opera.run.targets)
    address: str | None = None  # cluster executors: where the cluster is (None: start one here)
    workers: int = 0  # 0: the executor's default (one per core of the machine or the cluster)
    max_rss_bytes: int | None = None  # None: the executor's per-machine default


# An executor is a module of this package named after it (``local.py``, ``ray.py``), or of a
# third-party package in the ``opera.executors`` entry point group, that registers its
# ``prepare(ExecutorRequest) -> ExecutorFactory`` with ``@EXECUTORS.register("<name>")``. Modules are
# imported only when their executor is asked for (Ray is an optional dependency).
EXECUTORS: Registry[Callable[[ExecutorRequest], ExecutorFactory]] = Registry(
    "executor", __name__, group="opera.executors", module_suffix=""
)


def prepare_executor(name: str, request: ExecutorRequest) -> ExecutorFactory:
    return EXECUTORS.get(name)(request)
