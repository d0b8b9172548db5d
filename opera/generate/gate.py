"""Running generated instances through the validity gate, isolated from the generator.

The gate itself is the harvest's: ``Template.validate`` rebuilds the instance and runs it in its
library (docs/design.md, Harvest). Mutants are far more likely than harvested instances to make a
library allocate gigabytes, hang or abort, so ``IsolatedGate`` runs ``validate`` in a child process
(one per library, started once, restarted after a death): a mutant that kills, hangs or bloats
(``max_rss_bytes``) the child is judged invalid with that reason, and generation goes on.

The time limit is on the child's CPU time (``timeout_s``), not wall time, and the child computes on
one thread: on a shared, loaded machine wall time varies several-fold, and a verdict that depends
on load would make the generated corpus depend on it too (the learner carries each verdict into
later choices). A wall-clock limit of ``WALL_FACTOR`` times as long still catches a child that
sleeps or deadlocks.
``InProcessGate`` calls the template directly (tests, and libraries known to be tame).
"""

from __future__ import annotations

import multiprocessing as mp
import os
import time
import warnings
from collections import Counter
from multiprocessing.connection import Connection
from typing import Any, Protocol

from opera.model import OperatorInstance

__all__ = ["Gate", "InProcessGate", "IsolatedGate"]

_POLL_S = 0.1
_IMPORT_S = 180.0  # importing tensorflow on a loaded machine
WALL_FACTOR = 4.0


class Gate(Protocol):
    def validate(self, inst: OperatorInstance) -> OperatorInstance: ...

    def close(self) -> None: ...


class InProcessGate:
    def __init__(self, library: str) -> None:
        from opera.templates import get_template

        self._template = get_template(library)

    def validate(self, inst: OperatorInstance) -> OperatorInstance:
        return self._template.validate(inst)

    def close(self) -> None:
        pass


def _child(conn: Connection, library: str) -> None:
    # Mutants make libraries warn a lot (and print from C++); the verdict is all the parent needs.
    warnings.simplefilter("ignore")
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "TF_NUM_INTRAOP_THREADS", "TF_NUM_INTEROP_THREADS"):
        os.environ[var] = "1"
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.dup2(devnull, 2)
    from opera.templates import get_template

    template = get_template(library)
    while True:
        try:
            inst = conn.recv()
        except EOFError:
            return
        verdict = template.validate(inst)
        conn.send((verdict.valid, verdict.invalid_reason, verdict.outputs))


def _cpu_seconds(pid: int) -> float | None:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime
    except (OSError, ValueError, IndexError):
        return None


def _rss_bytes(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/statm") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


class IsolatedGate:
    def __init__(self, library: str, *, timeout_s: float = 30.0, max_rss_bytes: int = 3 << 30) -> None:
        self.library = library
        self.timeout_s = timeout_s
        self.max_rss_bytes = max_rss_bytes
        self.restarts = 0
        self.kills: Counter[str] = Counter()  # why children were killed: memory, cpu-time, wall-time, died
        self._ctx = mp.get_context("spawn")
        self._process: Any = None
        self._conn: Connection | None = None
        self._fresh = True

    def _start(self) -> None:
        parent, child = self._ctx.Pipe()
        self._process = self._ctx.Process(target=_child, args=(child, self.library), daemon=True)
        self._process.start()
        child.close()
        self._conn = parent
        self._fresh = True

    def _kill(self) -> None:
        if self._process is not None:
            self._process.kill()
            self._process.join(5)
        if self._conn is not None:
            self._conn.close()
        self._process = self._conn = None
        self.restarts += 1

    def validate(self, inst: OperatorInstance) -> OperatorInstance:
        if self._process is None:
            self._start()
        assert self._conn is not None and self._process is not None
        # The first call after a start also waits for the child to import its library.
        grace = _IMPORT_S if self._fresh else 0.0
        started = time.monotonic()
        cpu_start = _cpu_seconds(self._process.pid) or 0.0
        try:
            self._conn.send(inst)
            while not self._conn.poll(_POLL_S):
                pid = self._process.pid
                rss = _rss_bytes(pid)
                if rss is not None and rss > self.max_rss_bytes:
                    return self._killed(
                        inst, "memory", f"the library used over {self.max_rss_bytes >> 20} MiB"
                    )
                cpu = _cpu_seconds(pid)
                if cpu is not None and cpu - cpu_start > self.timeout_s + grace:
                    return self._killed(
                        inst, "cpu-time", f"the library ran over {self.timeout_s:.0f} s of CPU time"
                    )
                if time.monotonic() - started > WALL_FACTOR * self.timeout_s + grace:
                    return self._killed(
                        inst,
                        "wall-time",
                        f"the library did not finish in {WALL_FACTOR * self.timeout_s:.0f} s",
                    )
            valid, reason, outputs = self._conn.recv()
        except (EOFError, BrokenPipeError, ConnectionResetError):
            code = self._process.exitcode if self._process is not None else None
            return self._killed(inst, "died", f"the library process died (exit code {code})")
        self._fresh = False
        return inst.with_verdict(bool(valid), reason, outputs)

    def _killed(self, inst: OperatorInstance, why: str, reason: str) -> OperatorInstance:
        self._kill()
        self.kills[why] += 1
        return inst.with_verdict(False, f"{reason} (killed)" if why != "died" else reason)

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
        if self._process is not None:
            self._process.join(5)
            if self._process.is_alive():
                self._process.kill()
        self._process = self._conn = None
