"""The local executor: a pool of persistent worker processes on this machine (docs/design.md, Executors).

Each worker is a ``spawn``ed process that imports the frameworks once and runs many tests, one at
a time, reporting the stage it is in. The parent watches every worker:

- a worker that dies (segfault, abort, SIGKILL by the kernel's OOM killer) -> its test is
  ``native-crash`` with the signal name, and a fresh worker replaces it. Where the worker had run
  other tests before, the test first runs once more alone in a fresh worker: a death that needs
  the earlier tests' state (sample 10: a SIGABRT converting ``keras.ops.segment_max`` that its
  reproducer never showed in 5 runs) is not the test's, and the fresh worker's verdict stands,
  saying how the first worker died; a second death is the test's ``native-crash``;
- a test that runs past ``timeout_s`` -> the worker (and its process group) is SIGKILLed and
  replaced, the test is ``timeout``. The clock starts when the worker begins the test, after its
  warm-up for the target (bounded separately by ``warmup_timeout_s``): the imports and one tiny
  real operator through the target (``WorkerState.warm_up``). A worker that dies or hangs in that
  warm-up gives no verdict: its test is queued again, and the workers started after it warm up
  that target with the imports only (a second death there is the test's, as before);
- a worker whose resident memory exceeds ``max_rss_bytes`` (read from ``/proc``) is SIGKILLed,
  the test is ``native-crash`` with cause ``memory``; an idle worker above half the limit is
  replaced before its next test (memory kept from earlier tests must not be blamed on this one). RSS is watched rather than RLIMIT_AS set
  because torch/TensorFlow/TVM reserve gigabytes of address space they never touch.

Workers die with the parent (``PR_SET_PDEATHSIG``), so a SIGKILLed ``opera run`` leaves no
orphans. Tests of one target are routed to the same worker while there are any, which keeps a
compiler's imports and caches warm.
"""

from __future__ import annotations

import contextlib
import dataclasses
import multiprocessing as mp
import os
import signal
import sys
import tempfile
import time
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import Any

from opera.errors import OperaError
from opera.outcomes import Stage
from opera.run.executors import (
    EXECUTORS,
    ExecutorFactory,
    ExecutorRequest,
    TaskOutcome,
    TaskQueue,
    TestTask,
    WorkerSettings,
)
from opera.verdict.judge import MESSAGE_LIMIT

__all__ = ["LocalExecutor", "default_max_rss_bytes", "prepare", "rss_bytes"]

_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
_WATCH_INTERVAL_S = 0.05


def default_max_rss_bytes(workers: int) -> int:
    """80% of the memory available now, shared by the workers; at least 1 GiB each."""
    available = None
    with contextlib.suppress(OSError, ValueError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                available = int(line.split()[1]) * 1024
    if available is None:
        return 4 << 30
    return max(1 << 30, int(available * 0.8 / max(1, workers)))


@EXECUTORS.register("local")
def prepare(request: ExecutorRequest) -> ExecutorFactory:
    """The local pool needs nothing checked up front (targets were checked on this machine)."""
    return LocalExecutor


def rss_bytes(pid: int) -> int | None:
    """Resident memory of a process (Linux /proc), None when it cannot be read."""
    try:
        with open(f"/proc/{pid}/statm") as fh:
            return int(fh.read().split()[1]) * _PAGE
    except (OSError, ValueError, IndexError):
        return None


def _die_with_parent() -> None:
    """Linux: SIGKILL this process when the parent dies (prctl PR_SET_PDEATHSIG)."""
    with contextlib.suppress(Exception):
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG = 1
        if os.getppid() == 1:  # the parent died before prctl took effect
            os._exit(1)


def _worker_main(
    conn: Connection,
    settings: WorkerSettings,
    log_path: str | None,
    no_warm_up_op: frozenset[str] = frozenset(),
    trace_path: str | None = None,
) -> None:
    _die_with_parent()
    os.setpgrp()  # its own process group: the parent kills helper subprocesses with it
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's business
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    if log_path:
        fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        os.close(fd)
        sys.stdout = open(1, "w", buffering=1, closefd=False)  # noqa: SIM115
        sys.stderr = open(2, "w", buffering=1, closefd=False)  # noqa: SIM115
    from opera.run import native_trace
    from opera.run.batch import remember_failure
    from opera.run.execution import WorkerState, execute_task
    from opera.run.targets import set_library_reporter

    def arm_native_trace() -> None:  # again before each test: a framework imported since may replace it
        if trace_path:
            native_trace.install(trace_path)

    arm_native_trace()
    set_library_reporter(lambda working: conn.send(("library", working)))
    state = WorkerState(settings)
    warmed: set[str] = set()
    while True:
        try:
            task = conn.recv()
        except (EOFError, OSError):
            return
        if task is None:
            return
        if task.target not in warmed:
            conn.send(("warming", None))
            try:
                state.warm_up(task.target, task.instance.library, dummy_op=task.target not in no_warm_up_op)
            except Exception as exc:
                print(f"opera worker: warm-up of {task.target} failed: {exc}", flush=True)
            warmed.add(task.target)
        arm_native_trace()
        conn.send(("begin", None))
        try:
            if task.kind == "batch":
                outcome = _execute_batch(task, state, conn)
            else:
                outcome = execute_task(
                    task,
                    state,
                    lambda stage: conn.send(("stage", stage.value)),
                    lambda rule, partial, step: conn.send(("rule", (rule, partial, step))),
                )
                if settings.batch_targets:
                    remember_failure(state, task, outcome)
        except (BrokenPipeError, EOFError):
            return  # the parent is gone
        except Exception as exc:  # a bug in Opera itself, not a verdict on the compiler
            outcome = _internal_error(task, exc)
        conn.send(("done", outcome))


def _execute_batch(task: TestTask, state: Any, conn: Connection) -> TaskOutcome:
    """A batch in the worker: the passes it decided, and the tests to run alone (all of them when
    Opera's own batch code failed: the tests still get their verdicts, one by one)."""
    from opera.run.batch import execute_batch

    try:
        batch = execute_batch(list(task.members), state, lambda stage: conn.send(("stage", stage.value)))
    except (BrokenPipeError, EOFError):
        raise
    except Exception as exc:
        print(f"opera worker: batch of {task.size} on {task.target} failed in Opera's code: {exc}", flush=True)
        return TaskOutcome(task, extra={"decided": [], "alone": list(task.members), "note": str(exc)})
    if batch.note:
        print(f"opera worker: batch of {task.size} on {task.target}: {batch.note}", flush=True)
    return TaskOutcome(task, extra={"decided": batch.decided, "alone": batch.alone, "note": batch.note})


def _exit_cause(code: int | None) -> str:
    return signal.Signals(-code).name if code is not None and code < 0 else f"exit-{code}"


def _internal_error(task: TestTask, exc: Exception) -> TaskOutcome:
    import traceback

    from opera.run.execution import invalid_result

    text = "".join(traceback.format_exception(exc, limit=-6))
    return TaskOutcome(
        task, result=invalid_result(task.instance, task.target, f"opera internal error: {text}"[:4000])
    )


@dataclass
class _Slot:
    index: int
    process: Any = None  # multiprocessing Process
    conn: Connection | None = None
    task: TestTask | None = None
    stage: Stage = Stage.REFERENCE
    started: float = 0.0
    deadline: float = 0.0
    affinity: str | None = None
    fresh: bool = True  # has not begun a task yet (its imports are still to come)
    warming: bool = False  # in the warm-up for its task's target (between "warming" and "begin")
    no_warm_up_op: frozenset[str] = frozenset()  # targets this worker warms up without the op
    heard: bool = False  # has sent at least one message since it started
    tasks_done: int = 0
    tests_in_process: int = 0  # tasks the current process finished (0: a fresh worker)
    rss_peak: int = 0
    log_path: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    rule: tuple[str, Any, str] | None = None  # the rule under way, the test's result so far, its step
    trace_path: str | None = None  # where the worker's fatal-signal handler writes its backtrace
    library: bool = False  # the library works for the target now (torch.export, ...): its hang or death
    library_since: float = 0.0  # when it began (its time is added to the test's deadline)


def _native_where(slot: _Slot) -> str:
    """`` at libX.so+0x1f2e (symbol) < ...``: where in native code a dead worker faulted, from its
    signal handler's report (``opera.run.native_trace``); empty when it wrote none."""
    from opera.run.native_trace import read_trace

    trace = read_trace(slot.trace_path) if slot.trace_path else None
    where = trace.summary() if trace is not None else ""
    return f" {where}" if where else ""


def _where(slot: _Slot) -> str:
    """What the worker was doing: its stage, or the rule under way (after the test's own verdict)."""
    return f"rule {slot.rule[0]}" if slot.rule is not None else slot.stage.value


def _confirmed(outcome: TaskOutcome) -> TaskOutcome:
    """A test that ran again in a fresh worker after a warm one died on it: its verdict, saying so."""
    task, result = outcome.task, outcome.result
    if task.confirm is None or result is None:
        return outcome
    note = f"a first worker died on this test ({task.confirm}); alone in a fresh worker: {result.outcome.value}"
    message = f"{note}; {result.message}" if result.message else note
    return dataclasses.replace(outcome, result=dataclasses.replace(result, message=message[:MESSAGE_LIMIT]))


class LocalExecutor:
    """``workers`` persistent processes; see the module docstring."""

    def __init__(self, workers: int, settings: WorkerSettings) -> None:
        if workers < 1:
            raise ValueError("workers must be >= 1")
        self.settings = settings
        self._ctx = mp.get_context("spawn")
        self._slots = [_Slot(i) for i in range(workers)]
        self._queue = TaskQueue()
        self._finished: list[TaskOutcome] = []
        self._last_watch = 0.0
        self.replaced = 0  # workers replaced after a death, hang or memory kill
        self.batched = 0  # tests decided inside a batch (passes, gaps)
        self.recycled = 0  # idle workers replaced because they held over half the memory limit
        self._startup_failures = 0
        self._started = 0  # worker processes started (names their native-trace files)
        # Targets whose warm-up op killed or hung a worker: later workers warm them up without it.
        self.no_warm_up_op: set[str] = set()
        if settings.log_dir:
            Path(settings.log_dir).mkdir(parents=True, exist_ok=True)

    # ---- Executor protocol ------------------------------------------------------------------
    def submit(self, task: TestTask) -> None:
        self._queue.add(task)

    def free_slots(self) -> int:
        # Keep a few tasks per worker queued so that each worker can find tests of its target
        # (a whole batch of them when batching).
        per_worker = max(4, 2 * self.settings.batch) if self.settings.batch_targets else 4
        return max(0, per_worker * len(self._slots) - len(self._queue))

    def drop_queued(self) -> int:
        return len(self._queue.drop_tests())

    def in_flight(self) -> int:
        return len(self._queue) + sum(s.task.size for s in self._slots if s.task is not None)

    def poll(self, timeout_s: float) -> list[TaskOutcome]:
        end = time.monotonic() + max(0.0, timeout_s)
        while True:
            self._dispatch()
            busy = [s for s in self._slots if s.task is not None and s.process is not None]
            waitables: list[Any] = []
            for slot in busy:
                waitables.extend([slot.conn, slot.process.sentinel])
            remaining = end - time.monotonic()
            step = max(0.0, min(remaining, _WATCH_INTERVAL_S))
            if waitables:
                ready = set(wait(waitables, timeout=step))
            else:
                time.sleep(step)
                ready = set()
            for slot in busy:
                if slot.conn in ready or slot.process.sentinel in ready:
                    self._drain(slot)
            self._watch()
            if self._finished or time.monotonic() >= end:
                # Hand the freed workers their next queued test before returning: they run it
                # while the caller stores these results (one worker otherwise idles per commit).
                self._dispatch()
                out, self._finished = self._finished, []
                return out

    def close(self) -> None:
        for slot in self._slots:
            if slot.process is None:
                continue
            if slot.task is None and slot.process.is_alive():
                with contextlib.suppress(Exception):
                    slot.conn.send(None)  # type: ignore[union-attr]
                slot.process.join(timeout=2)
            self._kill(slot)
        self._queue.clear()

    # ---- internals --------------------------------------------------------------------------
    def _start(self, slot: _Slot) -> None:
        parent_conn, child_conn = self._ctx.Pipe(duplex=True)
        log_path = None
        if self.settings.log_dir:
            log_path = str(Path(self.settings.log_dir) / f"worker-{slot.index}.log")
        no_warm_up_op = frozenset(self.no_warm_up_op)
        self._started += 1
        slot.trace_path = str(Path(tempfile.gettempdir()) / f"opera-native-{os.getpid()}-{id(self):x}-{self._started}.trace")
        process = self._ctx.Process(
            target=_worker_main,
            args=(child_conn, self.settings, log_path, no_warm_up_op, slot.trace_path),
            name=f"opera-worker-{slot.index}",
            daemon=True,
        )
        process.start()
        child_conn.close()
        slot.process, slot.conn, slot.fresh, slot.log_path = process, parent_conn, True, log_path
        slot.heard = False
        slot.warming, slot.no_warm_up_op = False, no_warm_up_op
        slot.affinity = None
        slot.tests_in_process = 0

    def _kill(self, slot: _Slot) -> None:
        process = slot.process
        if process is None:
            return
        if process.is_alive():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, signal.SIGKILL)
            with contextlib.suppress(ProcessLookupError):
                os.kill(process.pid, signal.SIGKILL)
        process.join(timeout=5)
        with contextlib.suppress(Exception):
            slot.conn.close()  # type: ignore[union-attr]
        slot.process = None
        slot.conn = None
        if slot.trace_path:
            with contextlib.suppress(OSError):
                os.unlink(slot.trace_path)
            slot.trace_path = None

    def _bloated(self, slot: _Slot) -> bool:
        """An idle worker holding over half its memory limit (caches, leaks) is replaced before
        its next test, so that growth from earlier tests is not blamed on an innocent one."""
        limit = self.settings.max_rss_bytes
        if limit is None or slot.process is None:
            return False
        rss = rss_bytes(slot.process.pid)
        return rss is not None and rss > limit // 2

    def _retire(self, slot: _Slot) -> None:
        with contextlib.suppress(Exception):
            slot.conn.send(None)  # type: ignore[union-attr]
        if slot.process is not None:
            slot.process.join(timeout=2)
        self._kill(slot)
        self.recycled += 1

    def _dispatch(self) -> None:
        for slot in self._slots:
            if slot.task is not None or not self._queue:
                continue
            taken = {s.affinity for s in self._slots if s is not slot and s.affinity}
            task = self._queue.take(slot.affinity, taken)
            if task is None:
                continue
            task = self._batched(slot, task)
            if slot.process is not None and (self._bloated(slot) or (task.confirm is not None and slot.tests_in_process)):
                self._retire(slot)  # a test to confirm runs in a fresh worker
            if slot.process is None or not slot.process.is_alive():
                if slot.process is not None:
                    self._kill(slot)
                self._start(slot)
            slot.task, slot.affinity, slot.stage, slot.rule = task, task.target, Stage.REFERENCE, None
            slot.library = False
            now = time.monotonic()
            slot.started = now
            slot.deadline = now + (self.settings.warmup_timeout_s if slot.fresh else self.settings.timeout_s)
            with contextlib.suppress(BrokenPipeError, OSError):  # a dead worker is found by _watch
                slot.conn.send(task)  # type: ignore[union-attr]

    def _batched(self, slot: _Slot, task: TestTask) -> TestTask:
        """``task`` with more tests of its target compiled together, where the run batches that
        target and the worker has already warmed it up (its first test runs alone)."""
        if (
            task.kind != "test"
            or task.alone
            or task.target not in self.settings.batch_targets
            or self.settings.batch < 2
            or slot.fresh
            or slot.process is None
            or slot.affinity != task.target
        ):
            return task
        more = self._queue.take_more(task.target, self.settings.batch - 1)
        if not more:
            return task
        return TestTask(task.seq, task.instance, task.target, kind="batch", members=(task, *more))

    def _put_back_alone(self, tasks: list[TestTask]) -> None:
        """A batch's tests that must run alone: first in line, in their planned order."""
        for task in sorted(tasks, key=lambda t: t.seq, reverse=True):
            self._queue.put_back(dataclasses.replace(task, alone=True))

    def _drain(self, slot: _Slot) -> None:
        """Read every message a worker sent; handle its death after the last one."""
        conn = slot.conn
        while conn is not None and slot.task is not None:
            try:
                if not conn.poll():
                    break
                kind, payload = conn.recv()
            except (EOFError, OSError):
                break
            now = time.monotonic()
            slot.heard = True
            self._startup_failures = 0
            if kind == "warming":
                slot.warming = True
                slot.deadline = now + self.settings.warmup_timeout_s
            elif kind == "begin":
                slot.warming = False
                slot.fresh = False
                slot.started = now
                slot.deadline = now + self.settings.timeout_s
            elif kind == "stage":
                slot.stage = Stage(payload)
            elif kind == "rule":
                slot.rule = payload
            elif kind == "library":
                slot.library = bool(payload)
                if slot.library:
                    slot.library_since = now
                elif not slot.warming and slot.rule is None:
                    # the library's time (a slow torch.export) is not the compiler's: the test's
                    # clock stops while the library works for the target
                    slot.deadline += now - slot.library_since
            elif kind == "done":
                slot.tasks_done += 1
                slot.tests_in_process += 1
                if slot.task.kind == "batch":
                    self._finished.extend(payload.extra["decided"])
                    self._put_back_alone(list(payload.extra["alone"]))
                    self.batched += len(payload.extra["decided"])
                else:
                    self._finished.append(_confirmed(payload))
                slot.task = None

    def _watch(self) -> None:
        now = time.monotonic()
        check_memory = self.settings.max_rss_bytes is not None and now - self._last_watch >= _WATCH_INTERVAL_S
        if check_memory:
            self._last_watch = now
        for slot in self._slots:
            if slot.process is None:
                continue
            if not slot.process.is_alive():
                self._drain(slot)  # a result sent just before dying still counts
                if slot.task is not None and not slot.heard:
                    self._startup_failed(slot)
                elif self._warm_up_op_to_blame(slot):
                    self._warm_up_op_failed(slot, f"died ({_exit_cause(slot.process.exitcode)}{_native_where(slot)})")
                elif slot.task is not None:
                    cause = _exit_cause(slot.process.exitcode)
                    self._fail(slot, cause, f"worker died ({cause}) during {_where(slot)}{_native_where(slot)}")
                else:
                    self._kill(slot)
                continue
            if slot.task is None:
                continue
            if now > slot.deadline:
                self._drain(slot)  # a verdict that arrived at the last moment wins over the timeout
                if slot.task is None:
                    continue
                if self._warm_up_op_to_blame(slot):
                    self._warm_up_op_failed(slot, f"hung past {self.settings.warmup_timeout_s:g} s")
                    continue
                limit = self.settings.warmup_timeout_s if slot.fresh else self.settings.timeout_s
                self._fail(
                    slot,
                    "timeout",
                    f"no verdict after {limit:g} s (during {_where(slot)}); worker killed",
                )
                continue
            if check_memory:
                rss = rss_bytes(slot.process.pid)
                if rss is not None:
                    slot.rss_peak = max(slot.rss_peak, rss)
                    if rss > self.settings.max_rss_bytes and self._warm_up_op_to_blame(slot):  # type: ignore[operator]
                        self._warm_up_op_failed(slot, f"went over the memory limit ({rss / 2**20:.0f} MiB)")
                    elif rss > self.settings.max_rss_bytes:  # type: ignore[operator]
                        self._fail(
                            slot,
                            "memory",
                            f"worker memory {rss / 2**20:.0f} MiB over the limit "
                            f"{self.settings.max_rss_bytes / 2**20:.0f} MiB during {_where(slot)}; worker killed",  # type: ignore[operator]
                        )

    def _warm_up_op_to_blame(self, slot: _Slot) -> bool:
        """The worker was in its warm-up, which ran the warm-up op: not the test's doing."""
        return slot.task is not None and slot.warming and slot.task.target not in slot.no_warm_up_op

    def _warm_up_op_failed(self, slot: _Slot, what: str) -> None:
        """A worker died or hung in the warm-up op: no verdict; the test waits for a worker that
        warms this target up with the imports only."""
        task = slot.task
        assert task is not None
        self._kill(slot)
        slot.task = None
        self.no_warm_up_op.add(task.target)
        self.replaced += 1
        self._queue.put_back(task)
        if slot.log_path:
            with contextlib.suppress(OSError), open(slot.log_path, "a") as log:
                log.write(f"opera: the warm-up op of {task.target} {what}; later workers skip it\n")

    def _startup_failed(self, slot: _Slot) -> None:
        """A worker that dies before saying a word is broken, not its test: requeue the test
        and give up after a few such deaths in a row."""
        task = slot.task
        assert task is not None
        code = slot.process.exitcode if slot.process is not None else None
        self._kill(slot)
        slot.task = None
        self._startup_failures += 1
        self._queue.put_back(task)
        if self._startup_failures >= 3:
            where = f"; see {slot.log_path}" if slot.log_path else ""
            raise OperaError(f"worker processes exit at start-up (exit code {code}){where}")

    def _fail(self, slot: _Slot, cause: str, message: str) -> None:
        from opera.run.execution import dead_worker_result, rule_death_result

        task, rule = slot.task, slot.rule
        assert task is not None
        slot.rule = None
        duration = time.monotonic() - slot.started
        warm = slot.tests_in_process > 0
        self._kill(slot)
        self.replaced += 1
        slot.task = None
        if task.kind == "batch":  # no verdict from a batch that died or hung: each test alone says
            self._put_back_alone(list(task.members))
            return
        if task.kind == "test" and cause != "timeout" and warm and task.confirm is None:
            # alone again, in a fresh worker, before it is called a crash
            self._queue.put_back(dataclasses.replace(task, alone=True, confirm=f"{message} after {slot.tests_in_process} other test(s)"))
            return
        if task.kind == "test":
            if task.confirm is not None:
                message = f"{message}, alone in a fresh worker (a first worker: {task.confirm})"
            if rule is not None:  # inside a rule: the rule's crash; the test's own verdict stands
                result = rule_death_result(rule[1], rule[0], cause, duration, message, rule[2])
            else:
                result = dead_worker_result(task, cause, slot.stage, duration, message, library=slot.library)
            self._finished.append(TaskOutcome(task, result=result))
        else:  # a reproducer request that itself failed: nothing to record
            self._finished.append(TaskOutcome(task, reproducer=None, extra={"failed": cause}))
