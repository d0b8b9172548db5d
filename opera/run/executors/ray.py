"""The Ray executor: the same tests as the local pool, on the nodes of a Ray cluster (docs/design.md, Executors).

``opera run --executor ray [--address auto|HOST:PORT]``. The driver (the ``opera`` process) keeps
the plan, the queue and the one results store; the cluster only executes tests.

One Ray actor per CPU of the cluster (``num_cpus=1``; ``--workers`` sets the total), plus, when a
target that ``needs_gpu`` is requested, one actor per GPU (``num_gpus=1``): tests of a GPU target
go only to GPU actors, so only to nodes that have a GPU resource. Each actor is a node-local
supervisor that owns one persistent worker process of the local pool (``LocalExecutor(1)``),
which imports the frameworks once and runs ``opera.run.execution.execute_task`` test after test.
Why a supervisor and not ``execute_task`` in the actor process itself: a segfault must be told
apart from a lost node, and the stage a test died in must be known (a death while the library
ran the reference is ``invalid``, not a compiler bug). With the supervisor,

- a test that kills its worker (segfault, abort, over its memory limit) is recorded by the
  actor's pool exactly as locally: ``native-crash`` with the signal and stage; the actor lives on
  and starts a fresh worker. It is not retried;
- a test past its timeout: the actor's pool kills the worker and records ``timeout``;
- an actor that dies (its node was lost, its process was killed) is infrastructure, never a
  verdict: its in-flight test goes back to the front of the queue and runs on another actor, and
  a replacement actor is asked for (it starts when Ray finds room). The result is recorded once,
  by the driver, whichever actor delivers it. A test in flight on ``_LOSSES_BEFORE_BLAME`` lost
  actors in turn is the likely cause itself (e.g. it exhausts its machine's memory) and is
  recorded as ``native-crash`` with cause ``node-lost``;
- a driver-side deadline (warm-up + per-test timeout + a margin) catches an actor that stops
  answering (a partitioned node): it is killed and treated as lost.

Results travel back as return values (reproducer scripts as text: a remote node's disk is not
the driver's), and the runner commits each one to the store; the actors are owned by the driver,
so a killed driver takes them (and their workers, ``PR_SET_PDEATHSIG``) with it, and
``opera run --resume`` finishes the run. Oracle and unsupported-pattern files are shipped as text.

Bad input is refused by ``prepare`` before the run is created: Ray not installed, an unreachable
address, a Ray/Python version mismatch with the cluster, no GPU node for a GPU target, a target
available on no node.
"""

from __future__ import annotations

import contextlib
import os
import re
import socket
import sys
import tempfile
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from opera.errors import OperaError
from opera.run.executors import (
    EXECUTORS,
    ExecutorFactory,
    ExecutorRequest,
    TaskOutcome,
    TaskQueue,
    TestTask,
    WorkerSettings,
)

__all__ = ["ClusterPlan", "NodeReport", "RayExecutor", "connect", "prepare", "probe_nodes"]

RAY_EXTRA = "pip install -e '.[ray]'"
_CONNECT_TIMEOUT_S = 5.0
_PROBE_TIMEOUT_S = 300.0
_LOSSES_BEFORE_BLAME = 3
_DEADLINE_MARGIN_S = 60.0
_NO_ACTOR_PATIENCE_S = 300.0  # queued tests and no live actor able to run them for this long: give up
_ACTOR_DEATHS_IN_A_ROW = 6  # actors dying before any result: the nodes cannot run Opera
_OBJECT_STORE_BYTES = 100 << 20  # a private Ray instance: tests are small


def _ray() -> Any:
    try:
        import ray
    except ImportError as exc:
        raise OperaError(f"--executor ray needs Ray ({RAY_EXTRA}): {exc}") from None
    return ray


# ---- connecting ---------------------------------------------------------------------------------


def _host_port(address: str) -> tuple[str, int]:
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise OperaError(f"bad Ray address {address!r}: use auto or HOST:PORT (the head node's GCS port)")
    return host.strip("[]"), int(port)


def _version_mismatch(text: str, where: str) -> str:
    found = re.findall(r"Ray: (\S+)\s+Python: (\S+)", text)
    if len(found) >= 2:
        (ray_c, py_c), (ray_d, py_d) = found[0], found[1]
        detail = f"the cluster runs Ray {ray_c} / Python {py_c}, this driver Ray {ray_d} / Python {py_d}"
    else:
        detail = " ".join(text.split())[:300]
    return f"Ray version mismatch with the cluster at {where}: {detail}; install the same versions on every node ({RAY_EXTRA})"


def connect(address: str | None, num_cpus: int | None = None) -> str:
    """Connect this process to a Ray cluster (``None``: start a private one here with
    ``num_cpus``); returns a description of where. Raises ``OperaError`` with one clear line."""
    ray = _ray()
    if ray.is_initialized():
        current = ray.get_runtime_context().gcs_address
        if address in (None, "auto", current):
            return address or "the Ray instance this process already uses"
        ray.shutdown()  # another cluster than the one this process is connected to
    if address is not None and address.startswith("ray://"):
        raise OperaError("Ray Client addresses (ray://) are not supported: give the head node's HOST:PORT")
    where = address or "a private Ray instance on this machine"
    if address not in (None, "auto"):
        host, port = _host_port(address)
        try:
            with socket.create_connection((host, port), timeout=_CONNECT_TIMEOUT_S):
                pass
        except OSError as exc:
            raise OperaError(
                f"cannot reach a Ray cluster at {address}: {exc.strerror or exc} "
                "(start one with `ray start --head` and pass its GCS address)"
            ) from None
    kwargs: dict[str, Any] = {"logging_level": "WARNING", "log_to_driver": False}
    if address is None:
        kwargs.update(
            num_cpus=num_cpus or os.cpu_count() or 1,
            object_store_memory=_OBJECT_STORE_BYTES,
            include_dashboard=False,
        )
    try:
        ray.init(address=address, **kwargs)
    except Exception as exc:
        text = str(exc)
        if "version mismatch" in text.lower():
            raise OperaError(_version_mismatch(text, where)) from None
        if address == "auto":
            raise OperaError(
                "--address auto: no running Ray cluster found on this machine "
                "(start one with `ray start --head`, or give HOST:PORT)"
            ) from None
        first = text.strip().splitlines()[0] if text.strip() else type(exc).__name__
        raise OperaError(f"cannot connect to the Ray cluster at {where}: {first}") from None
    return where


# ---- what the nodes have ----------------------------------------------------------------------


@dataclass
class NodeReport:
    node_id: str
    address: str
    cpus: float
    gpus: float
    targets: dict[str, str | None] = field(default_factory=dict)  # name -> None or why unavailable
    versions: dict[str, dict[str, str]] = field(default_factory=dict)
    software: dict[str, str] = field(default_factory=dict)  # opera / ray / python on the node
    error: str | None = None  # the probe itself failed


def alive_nodes() -> list[dict[str, Any]]:
    return [n for n in _ray().nodes() if n.get("Alive")]


def _probe(names: list[str]) -> dict[str, Any]:
    """Runs in a throw-away Ray worker on one node: which of ``names`` are usable there."""
    import platform

    import ray

    from opera import __version__
    from opera.run.targets import get_target

    targets: dict[str, str | None] = {}
    versions: dict[str, dict[str, str]] = {}
    for name in names:
        try:
            target = get_target(name)
            reason = target.availability()
            if reason is None:
                versions[name] = dict(target.versions())
        except Exception as exc:
            reason = f"{type(exc).__name__}: {exc}"
        targets[name] = reason
    software = {"opera": __version__, "ray": ray.__version__, "python": platform.python_version()}
    return {"targets": targets, "versions": versions, "software": software}


def probe_nodes(names: list[str], timeout_s: float = _PROBE_TIMEOUT_S) -> list[NodeReport]:
    """Ask every live node which of the targets ``names`` it can run (one short-lived worker
    per node, pinned there, no CPU reserved, exits after the probe: its imports do not stay)."""
    ray = _ray()
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    probe = ray.remote(num_cpus=0, max_calls=1, max_retries=0)(_probe)
    reports, refs = [], []
    for node in alive_nodes():
        resources = node.get("Resources", {})
        reports.append(
            NodeReport(
                node_id=node["NodeID"],
                address=str(node.get("NodeManagerAddress", "?")),
                cpus=float(resources.get("CPU", 0)),
                gpus=float(resources.get("GPU", 0)),
            )
        )
        strategy = NodeAffinitySchedulingStrategy(node["NodeID"], soft=False)
        refs.append(probe.options(scheduling_strategy=strategy).remote(list(names)))
    deadline = time.monotonic() + timeout_s
    for report, ref in zip(reports, refs, strict=True):
        try:
            answer = ray.get(ref, timeout=max(1.0, deadline - time.monotonic()))
        except Exception as exc:
            with contextlib.suppress(Exception):
                ray.cancel(ref, force=True)
            report.error = f"probe failed: {_first_line(exc)}"
            continue
        report.targets, report.versions = answer["targets"], answer["versions"]
        report.software = answer["software"]
    return reports


@dataclass
class ClusterPlan:
    """Where the tests of each target may run, and how many actors of each kind to start."""

    where: str
    gpu_targets: frozenset[str]
    usable: dict[str, frozenset[str]]  # node id -> targets available there
    cpu_actors: int
    gpu_actors: int
    max_rss_bytes: int | None  # None: each actor's node default

    def may_run(self, node: str | None, target: str, gpu_actor: bool) -> bool:
        if target in self.gpu_targets and not gpu_actor:
            return False
        if node is None or node not in self.usable:
            return True  # a node that joined after the probe: assume it is set up like the others
        return target in self.usable[node]


def _plan(request: ExecutorRequest, where: str) -> ClusterPlan:
    names = list(request.targets)
    gpu_targets = frozenset(n for n, t in request.targets.items() if getattr(t, "needs_gpu", False))
    nodes = alive_nodes()
    if not nodes:
        raise OperaError(f"the Ray cluster at {where} has no live node")
    gpus = int(sum(float(n.get("Resources", {}).get("GPU", 0)) for n in nodes))
    cpus = int(sum(float(n.get("Resources", {}).get("CPU", 0)) for n in nodes))
    if gpu_targets and gpus == 0:
        raise OperaError(
            f"no node of the Ray cluster at {where} has a GPU, and {', '.join(sorted(gpu_targets))} "
            f"need{'s' if len(gpu_targets) == 1 else ''} one"
        )
    gpu_actors = gpus if gpu_targets else 0
    cpu_targets = [n for n in names if n not in gpu_targets]
    cpu_actors = 0
    if cpu_targets:
        cpu_actors = request.workers if request.workers > 0 else max(1, cpus - gpu_actors)
    if cpus < 1:
        raise OperaError(f"the Ray cluster at {where} has no CPU to run tests on")
    reports = probe_nodes(names)
    usable: dict[str, frozenset[str]] = {}
    for report in reports:
        if report.error is None:
            usable[report.node_id] = frozenset(n for n, r in report.targets.items() if r is None)
        else:
            usable[report.node_id] = frozenset()
    gpu_nodes = {r.node_id for r in reports if r.gpus > 0}
    for name in names:
        eligible = [
            n for n, ok in usable.items() if name in ok and (name not in gpu_targets or n in gpu_nodes)
        ]
        if not eligible:
            why = "; ".join(f"{r.address}: {r.error or r.targets.get(name) or 'no GPU'}" for r in reports)
            raise OperaError(f"target {name} is available on no node of the Ray cluster at {where} ({why})")
    return ClusterPlan(
        where=where,
        gpu_targets=gpu_targets,
        usable=usable,
        cpu_actors=cpu_actors,
        gpu_actors=gpu_actors,
        max_rss_bytes=request.max_rss_bytes,
    )


@EXECUTORS.register("ray")
def prepare(request: ExecutorRequest) -> ExecutorFactory:
    """Connect, check the cluster against the targets, and return the executor factory."""
    where = connect(request.address, num_cpus=request.workers or None)
    plan = _plan(request, where)

    def factory(workers: int, settings: WorkerSettings) -> RayExecutor:
        return RayExecutor(plan, settings)

    return factory


# ---- the actor: a node-local supervisor of one persistent worker ---------------------------------


class _NodeSupervisor:
    """Runs on a node as a Ray actor; owns a one-worker local pool (see the module docstring)."""

    def __init__(self, settings: WorkerSettings, configs: dict[str, str], index: int) -> None:
        import ray

        from opera.run.executors.local import LocalExecutor, default_max_rss_bytes

        # The pool spawns its worker; spawn would re-import the actor's __main__ (Ray's worker
        # script, with Ray) in every worker unless __main__ has no file to import.
        main = sys.modules.get("__main__")
        if main is not None:
            main.__dict__.pop("__file__", None)
        self.node = ray.get_runtime_context().get_node_id()
        self.workdir = Path(tempfile.mkdtemp(prefix=f"opera-ray-{index}-"))
        paths: dict[str, str] = {}
        for key, text in configs.items():  # the driver's TOML files, written on this node
            path = self.workdir / f"{key}.toml"
            path.write_text(text, encoding="utf-8")
            paths[key] = str(path)
        log_dir = None
        if settings.log_dir:
            log_dir = str(Path(settings.log_dir) / f"ray-{index}-{self.node[:8]}")
            try:
                Path(log_dir).mkdir(parents=True, exist_ok=True)
            except OSError:  # the driver's path does not exist on this machine
                log_dir = str(self.workdir / "logs")
        self.settings = replace(
            settings,
            oracle_config=paths.get("oracle_config", settings.oracle_config),
            unsupported_config=paths.get("unsupported_config", settings.unsupported_config),
            reproducer_dir=str(self.workdir / "repro") if settings.reproducer_dir else None,
            log_dir=log_dir,
            max_rss_bytes=settings.max_rss_bytes or default_max_rss_bytes(os.cpu_count() or 1),
        )
        self.pool = LocalExecutor(1, self.settings)

    def node_id(self) -> str:
        return self.node

    def run(self, task: TestTask) -> tuple[Any, str | None, dict[str, Any]]:
        self.pool.submit(task)
        outcomes: list[TaskOutcome] = []
        while not outcomes:
            outcomes = self.pool.poll(1.0)
        outcome = outcomes[0]
        text = None
        if outcome.reproducer:
            with contextlib.suppress(OSError):
                text = Path(outcome.reproducer).read_text(encoding="utf-8")
                os.unlink(outcome.reproducer)
        return outcome.result, text, {**outcome.extra, "node": self.node}

    def close(self) -> None:
        import shutil

        self.pool.close()
        shutil.rmtree(self.workdir, ignore_errors=True)


_ACTOR_CLASS: Any = None


def _actor_class() -> Any:
    global _ACTOR_CLASS
    if _ACTOR_CLASS is None:
        _ACTOR_CLASS = _ray().remote(max_restarts=0, max_task_retries=0, max_concurrency=1)(_NodeSupervisor)
    return _ACTOR_CLASS


# ---- the driver side ------------------------------------------------------------------------------


@dataclass
class _Actor:
    index: int
    gpu: bool
    handle: Any = None
    ready_ref: Any = None  # node_id() call until the actor has started
    node: str | None = None
    task: TestTask | None = None
    ref: Any = None
    started: float = 0.0
    affinity: str | None = None

    @property
    def ready(self) -> bool:
        return self.handle is not None and self.ready_ref is None


class RayExecutor:
    """The ``Executor`` protocol over Ray actors (see the module docstring)."""

    def __init__(self, plan: ClusterPlan, settings: WorkerSettings) -> None:
        self.plan = plan
        self.settings = replace(settings, max_rss_bytes=plan.max_rss_bytes)
        self._configs: dict[str, str] = {}
        for key in ("oracle_config", "unsupported_config"):
            path = getattr(settings, key)
            if path:
                self._configs[key] = Path(path).read_text(encoding="utf-8")
        self._actors = [_Actor(i, gpu=True) for i in range(plan.gpu_actors)]
        self._actors += [_Actor(plan.gpu_actors + i, gpu=False) for i in range(plan.cpu_actors)]
        self._queue = TaskQueue()
        self._finished: list[TaskOutcome] = []
        self._losses: dict[tuple[str, str, str], int] = {}
        self._deaths_in_a_row = 0
        self._last_error = ""
        self._stuck_since: float | None = None
        self._next_index = len(self._actors)
        self._repro_count = 0
        self.lost_actors = 0  # actors lost with a test in flight or before starting (node loss)
        self.rescheduled = 0  # tests put back in the queue after their actor was lost
        for actor in self._actors:
            self._start(actor)

    # ---- Executor protocol ------------------------------------------------------------------
    def submit(self, task: TestTask) -> None:
        self._queue.add(task)

    def free_slots(self) -> int:
        return max(0, 2 * len(self._actors) - len(self._queue))

    def drop_queued(self) -> int:
        return len(self._queue.drop_tests())

    def in_flight(self) -> int:
        return len(self._queue) + sum(1 for a in self._actors if a.task is not None)

    def poll(self, timeout_s: float) -> list[TaskOutcome]:
        ray = _ray()
        end = time.monotonic() + max(0.0, timeout_s)
        while True:
            self._dispatch()
            waiting = {a.ref: a for a in self._actors if a.ref is not None}
            starting = {a.ready_ref: a for a in self._actors if a.ready_ref is not None}
            refs = list(waiting) + list(starting)
            step = max(0.0, min(end - time.monotonic(), 0.5))
            if refs:
                done, _ = ray.wait(refs, num_returns=1, timeout=step)
                if done:
                    done, _ = ray.wait(refs, num_returns=len(refs), timeout=0)
            else:
                time.sleep(step)
                done = []
            for ref in done:
                if ref in starting:
                    self._started(starting[ref], ref)
                else:
                    self._collect(waiting[ref], ref)
            self._watch()
            if self._finished or time.monotonic() >= end:
                self._dispatch()
                out, self._finished = self._finished, []
                return out

    def close(self) -> None:
        ray = _ray()
        idle = [a for a in self._actors if a.ready and a.task is None]
        closing = [a.handle.close.remote() for a in idle]
        if closing:
            with contextlib.suppress(Exception):
                ray.wait(closing, num_returns=len(closing), timeout=5)
        for actor in self._actors:
            self._kill(actor)
        self._queue.clear()

    # ---- internals --------------------------------------------------------------------------
    def _start(self, actor: _Actor) -> None:
        options: dict[str, Any] = {"num_cpus": 1}
        if actor.gpu:
            options["num_gpus"] = 1
        actor.handle = _actor_class().options(**options).remote(self.settings, self._configs, actor.index)
        actor.ready_ref = actor.handle.node_id.remote()
        actor.node = None
        actor.affinity = None

    def _kill(self, actor: _Actor) -> None:
        if actor.handle is not None:
            with contextlib.suppress(Exception):
                _ray().kill(actor.handle, no_restart=True)
        actor.handle = actor.ready_ref = actor.ref = None
        actor.task = None

    def _replace(self, actor: _Actor, error: str) -> None:
        self._kill(actor)
        self.lost_actors += 1
        self._deaths_in_a_row += 1
        self._last_error = error
        if self._deaths_in_a_row >= _ACTOR_DEATHS_IN_A_ROW:
            raise OperaError(
                f"Ray actors keep dying before returning a result ({self._deaths_in_a_row} in a row); "
                f"last: {error}"
            )
        actor.index, self._next_index = self._next_index, self._next_index + 1
        self._start(actor)

    def _started(self, actor: _Actor, ref: Any) -> None:
        try:
            actor.node = _ray().get(ref)
            actor.ready_ref = None
        except Exception as exc:  # the actor could not start or its node went away
            self._replace(actor, _first_line(exc))

    def _collect(self, actor: _Actor, ref: Any) -> None:
        ray = _ray()
        task = actor.task
        assert task is not None
        try:
            result, reproducer_text, extra = ray.get(ref)
        except ray.exceptions.RayTaskError as exc:  # the supervisor itself raised (e.g. no worker starts)
            cause = exc.as_instanceof_cause()
            self._kill(actor)
            raise OperaError(
                f"Ray actor on node {(actor.node or '?')[:8]} failed: {_first_line(cause)}"
            ) from None
        except Exception as exc:  # RayActorError and kin: the actor or its node is gone
            self._requeue_lost(actor, task, _first_line(exc))
            return
        actor.task, actor.ref = None, None
        self._deaths_in_a_row = 0
        self._finished.append(
            TaskOutcome(
                task, result=result, reproducer=self._save_reproducer(task, reproducer_text), extra=extra
            )
        )

    def _requeue_lost(self, actor: _Actor, task: TestTask, error: str) -> None:
        from opera.outcomes import Stage
        from opera.run.execution import dead_worker_result

        duration = time.monotonic() - actor.started
        node = actor.node
        actor.task = actor.ref = None
        self._replace(actor, error)
        key = (task.instance.id, task.target, task.kind)
        self._losses[key] = self._losses.get(key, 0) + 1
        if self._losses[key] < _LOSSES_BEFORE_BLAME:
            self.rescheduled += 1
            self._queue.put_back(task)
            return
        message = (
            f"{self._losses[key]} Ray actors were lost in turn while running this test "
            f"(last on node {(node or '?')[:8]}: {error})"
        )
        if task.kind == "test":
            result = dead_worker_result(task, "node-lost", Stage.CONVERT, duration, message)
            self._finished.append(TaskOutcome(task, result=result))
        else:
            self._finished.append(TaskOutcome(task, reproducer=None, extra={"failed": "node-lost"}))

    def _save_reproducer(self, task: TestTask, text: str | None) -> str | None:
        if text is None or not self.settings.reproducer_dir:
            return None
        self._repro_count += 1
        path = (
            Path(self.settings.reproducer_dir)
            / "tmp"
            / f"{task.instance.id}-{task.target}-ray{self._repro_count}.py"
        )
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        return str(path)

    def _take_task(self, actor: _Actor) -> TestTask | None:
        taken = {a.affinity for a in self._actors if a is not actor and a.affinity}
        return self._queue.take(
            actor.affinity,
            taken,
            allowed=lambda target: self.plan.may_run(actor.node, target, actor.gpu),
            rank=lambda target: (target in self.plan.gpu_targets) != actor.gpu,  # GPU actors: GPU tests first
        )

    def _dispatch(self) -> None:
        for actor in self._actors:
            if not actor.ready or actor.task is not None or not self._queue:
                continue
            task = self._take_task(actor)
            if task is None:
                continue
            actor.task, actor.affinity, actor.started = task, task.target, time.monotonic()
            actor.ref = actor.handle.run.remote(task)

    def _watch(self) -> None:
        now = time.monotonic()
        limit = self.settings.warmup_timeout_s + self.settings.timeout_s + _DEADLINE_MARGIN_S
        for actor in self._actors:
            if actor.task is not None and now - actor.started > limit:
                self._requeue_lost(actor, actor.task, f"no answer from the actor after {limit:g} s")
        # Queued tests that no live actor may run (their nodes are gone): wait for a replacement
        # to start, but not forever.
        waiting = self._queue.targets()
        runnable = any(a.ready and self.plan.may_run(a.node, t, a.gpu) for a in self._actors for t in waiting)
        busy = any(a.task is not None for a in self._actors)
        if waiting and not runnable and not busy:
            self._stuck_since = self._stuck_since or now
            if now - self._stuck_since > _NO_ACTOR_PATIENCE_S:
                raise OperaError(
                    f"no live node of the Ray cluster at {self.plan.where} can run {', '.join(sorted(waiting))} "
                    f"for {_NO_ACTOR_PATIENCE_S:g} s (nodes lost?){'; last error: ' + self._last_error if self._last_error else ''}"
                )
        else:
            self._stuck_since = None


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    line = text.splitlines()[0] if text else ""
    return f"{type(exc).__name__}: {line}"[:500]
