"""Does each kept reproducer show its failure on its own? (issue 11, defect class 10)

After a run (``opera run``, each target of ``opera nightly``), or on demand (``opera bugs
--verify``), every bug signature's reproducer script (the smallest failing instance's, see
``ResultStore.bugs``) is run in a fresh process with the same interpreter and a timeout, and the
verdict is stored with the bug (``ResultStore.set_reproduction``, one commit per script: a run
killed while verifying loses nothing, ``opera bugs --verify-pending`` finishes it).

Verdicts (``repro_status``), from the script's exit status and what it printed:

- ``reproduces``: the same failure. A crash: exit 1 with an exception whose bug signature (computed
  as the run computes it, from the exception the script raised) is the bug's own. An
  inconsistency: exit 1 with the script's comparison saying ``REPRODUCED``. A native crash: the
  script died by a signal. A timeout: the script was still running at ``HANG_CONFIRM_FACTOR``
  times the run's limit (one that ends later than the run's limit is "slow, not a hang").
- ``not-reproduced``: exit 0 (it ran to the end and the outputs match the reference), on each of
  ``FLAKY_RUNS`` runs; one that fails on some of them ``reproduces`` with "flaky: reproduces k of n".
- ``other-failure``: it fails, but not as the run failed (another exception or signature, an
  exception where outputs were to differ, a signal where an exception was expected, a hang, ...):
  the detail says what it did instead.
- ``missing``: the script file is gone.

The script runs under a small wrapper (``python -c``) that executes it as ``__main__`` (its exit
status and output are the script's own) and, when it raises, writes the exception's bug signature
to a side file: a reproducer that dies on a ``ModuleNotFoundError`` or on its own decoding code
exits 1 as well, and must not count as reproducing. Limits as in the run: the run's per-test
timeout counted from the end of the script's imports (plus slack; ``IMPORT_ALLOWANCE_S`` for the
imports), and the run's per-worker memory limit (a script past it is killed: the run's ``memory``
native crash). Scripts run ``workers`` at a time, each in its own session, and die with Opera.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from opera.outcomes import Outcome
from opera.progress import progress_bar
from opera.run.executors.local import rss_bytes
from opera.store import BugRecord, ResultStore

__all__ = [
    "FLAKY_RUNS",
    "HANG_CONFIRM_FACTOR",
    "IMPORT_ALLOWANCE_S",
    "MISSING",
    "NOT_REPRODUCED",
    "OTHER_FAILURE",
    "REPRODUCES",
    "Verification",
    "VerificationSummary",
    "classify",
    "needs_verification",
    "run_reproducer",
    "summarize",
    "verify_bugs",
]

REPRODUCES = "reproduces"
NOT_REPRODUCED = "not-reproduced"
OTHER_FAILURE = "other-failure"
MISSING = "missing"
STATUSES = (REPRODUCES, NOT_REPRODUCED, OTHER_FAILURE, MISSING)

# A reproducer imports its library and compiler before the steps the run's per-test timeout
# measured (TensorFlow, torch and TVM take seconds each on a loaded machine): added to it.
IMPORT_ALLOWANCE_S = 90.0
# After the imports: the run's per-test timeout plus this share of it (at least 5 s) for loading
# the artifact, before a script counts as hanging.
_SLACK = 0.5
# A ``timeout`` reproduces only when its script is still running after this many times the run's
# per-test limit: a conversion that takes 160 s on a loaded 2-core machine (TVM's TFLite frontend
# on keras.layers.MelSpectrogram, then a crash) was reported as a hang (judged HARNESS).
HANG_CONFIRM_FACTOR = 4.0
# A reproducer whose outputs matched (exit 0) runs this many times in all before it counts as not
# reproducing: a failure on uninitialized memory shows on some runs only ("reproduces k of n").
FLAKY_RUNS = 5
_DETAIL_LIMIT = 600
_TAIL_LIMIT = 20_000

# The wrapper: dies with the verifying process; imports the packages the script imports, then
# creates argv[4] (the hang clock starts there: a slow TensorFlow import is not a hang); runs the
# script as __main__; when it raises, writes the exception's bug signature (as opera.run.execution
# signs a crash) to argv[3] and re-raises: exit status and traceback are the script's own.
_WRAPPER = r"""
import os, re, runpy, sys
script, target_name, out, ready, parent = sys.argv[1:6]
try:  # Linux: die with the Opera that verifies (a hang must not outlive a killed run)
    import ctypes
    ctypes.CDLL(None).prctl(1, 9, 0, 0, 0)  # PR_SET_PDEATHSIG, SIGKILL
except Exception:
    pass
if os.getppid() != int(parent):  # it died before prctl took effect
    os._exit(3)
sys.argv = [script]
# as `python script.py`: the script's folder first. -c put "" (the cwd) there, except under
# PYTHONSAFEPATH, where sys.path[0] is PYTHONPATH's first entry: keep it
if sys.path and sys.path[0] == "":
    sys.path[0] = os.path.dirname(os.path.abspath(script))
else:
    sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
with open(script, encoding="utf-8") as fh:
    source = fh.read()
for line in re.findall(r"^(?:import|from) +([\w., ]+?)(?: import .*)?$", source, re.M):
    for name in line.split(","):
        name = name.strip().split(" ")[0].split(".")[0]
        if name:
            try:
                __import__(name)
            except BaseException:
                pass  # the script meets it again, where it imports it
open(ready, "w").close()
try:
    runpy.run_path(script, run_name="__main__")
except (SystemExit, KeyboardInterrupt):
    raise
except BaseException as exc:
    try:
        import json
        from opera.reproduce.verify import crash_signature_of
        text = f"{type(exc).__name__}: {exc}".strip().splitlines()
        with open(out, "w", encoding="utf-8") as fh:
            json.dump({"signature": crash_signature_of(exc, target_name), "exception": text[0] if text else ""}, fh)
    except BaseException as inner:
        sys.stderr.write(f"opera verify: could not sign the exception: {inner!r}\n")
    raise
"""


def crash_signature_of(exc: BaseException, target_name: str) -> str:
    """The bug signature the run gives this exception on ``target_name`` (``opera.run.execution``)."""
    from opera.run.targets import get_target
    from opera.verdict.signature import target_crash_signature

    return target_crash_signature(exc, target_name, get_target(target_name))


@dataclass(frozen=True)
class ScriptRun:
    """What one fresh-process run of a reproducer did."""

    exit_code: int | None  # None: killed at the time limit
    timed_out: bool
    seconds: float
    stdout: str
    stderr: str
    raised: dict[str, str] | None = None  # {"signature", "exception"} when the script raised
    over_memory: int | None = None  # the resident-memory limit it was killed past (SIGKILL)


@dataclass(frozen=True)
class Verification:
    signature: str
    reproducer: str
    reproducer_size: int | None
    status: str
    detail: str
    exit_code: int | None
    seconds: float


def _tail(text: str, limit: int = _TAIL_LIMIT) -> str:
    return text[-limit:]


def _signal_name(code: int) -> str:
    try:
        return signal.Signals(-code).name
    except ValueError:
        return f"signal {-code}"


# The scripts running now (their process groups are killed when the verification is interrupted).
_RUNNING: set[subprocess.Popen[str]] = set()
_RUNNING_LOCK = threading.Lock()


def _kill_group(proc: subprocess.Popen[str]) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


def kill_running() -> None:
    """Kill every reproducer script running now, with its children."""
    with _RUNNING_LOCK:
        procs = list(_RUNNING)
    for proc in procs:
        _kill_group(proc)


def run_reproducer(
    path: str | Path,
    target: str,
    timeout_s: float,
    *,
    max_rss_bytes: int | None = None,
    env: dict[str, str] | None = None,
) -> ScriptRun:
    """Run the script in a fresh process (its own session: a hang is killed with all its
    children) from an empty temporary folder. It hangs when it runs longer than ``timeout_s``
    (+ slack) after its imports, or than ``timeout_s`` + ``IMPORT_ALLOWANCE_S`` in all; it is
    killed (``memory``) past ``max_rss_bytes`` resident, as the run's workers are."""
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="opera-verify-") as tmp:
        side, ready = os.path.join(tmp, "raised.json"), os.path.join(tmp, "ready")
        proc = subprocess.Popen(
            [
                sys.executable,
                "-c",
                _WRAPPER,
                str(Path(path).resolve()),
                target,
                side,
                ready,
                str(os.getpid()),
            ],
            cwd=tmp,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            errors="replace",
            env=env if env is not None else _environment(),
            start_new_session=True,
        )
        with _RUNNING_LOCK:
            _RUNNING.add(proc)
        timed_out = memory = False
        hard = started + timeout_s + IMPORT_ALLOWANCE_S
        imported: float | None = None
        try:
            while True:
                try:
                    out, err = proc.communicate(timeout=0.2)
                    break
                except subprocess.TimeoutExpired:
                    now = time.monotonic()
                    if imported is None and os.path.exists(ready):
                        imported = now
                    rss = rss_bytes(proc.pid) if max_rss_bytes else None
                    memory = rss is not None and max_rss_bytes is not None and rss > max_rss_bytes
                    hung = now > hard or (
                        imported is not None and now - imported > timeout_s + max(5.0, _SLACK * timeout_s)
                    )
                    if memory or hung:
                        timed_out = not memory
                        _kill_group(proc)
                        out, err = proc.communicate()
                        break
        except BaseException:  # Ctrl-C: the script and its children go too
            _kill_group(proc)
            proc.wait()
            raise
        finally:
            with _RUNNING_LOCK:
                _RUNNING.discard(proc)
        _kill_group(proc)  # a child it left behind (the group outlives its leader)
        raised = None
        with contextlib.suppress(OSError, ValueError):
            raised = json.loads(Path(side).read_text(encoding="utf-8"))
    return ScriptRun(
        None if timed_out else proc.returncode,
        timed_out,
        time.monotonic() - started,
        _tail(out or ""),
        _tail(err or ""),
        raised if isinstance(raised, dict) else None,
        max_rss_bytes if memory else None,
    )


def _environment() -> dict[str, str]:
    env = dict(os.environ)
    # OpenVINO's telemetry forks a child per convert_model in a plain process (docs/results.md, Runner
    # throughput and overhead): off, as in the run's workers; it changes nothing the script computes.
    env.setdefault("CI", "true")
    env.setdefault("PYTHONFAULTHANDLER", "1")  # a native crash prints the Python stack on stderr
    return env


def _last_line(text: str) -> str:
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1] if lines else ""


def _shorten(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _DETAIL_LIMIT else text[: _DETAIL_LIMIT - 1] + "…"


def _compared_lines(stdout: str) -> str:
    """The script's per-output comparison lines and its conclusion, for the detail."""
    lines = [ln for ln in stdout.splitlines() if ln.startswith(("output", "REPRODUCED", "not reproduced"))]
    return "; ".join(lines[-4:])


def classify(outcome: Outcome | str, signature: str, run: ScriptRun) -> tuple[str, str]:
    """(status, detail) of one script run for a bug of ``outcome`` and ``signature``."""
    outcome = Outcome(outcome) if not isinstance(outcome, Outcome) else outcome
    code = run.exit_code
    raised = run.raised or {}
    exception = raised.get("exception") or _last_line(run.stderr)
    if run.timed_out:
        if outcome is Outcome.TIMEOUT:
            return REPRODUCES, f"still running after {run.seconds:.0f} s (hangs)"
        return OTHER_FAILURE, f"hung: killed after {run.seconds:.0f} s, the run saw {outcome.value}"
    assert code is not None
    if outcome is Outcome.TIMEOUT:  # it ended, given HANG_CONFIRM_FACTOR times the run's limit
        if code == 0:
            return NOT_REPRODUCED, f"slow, not a hang: finished after {run.seconds:.0f} s and the outputs match"
        if raised:
            did = f"then raised {exception}"
        elif code < 0:
            did = f"then died by {_signal_name(code)}"
        else:
            did = f"then exit {code}: {_last_line(run.stdout) or exception}"
        return OTHER_FAILURE, f"slow, not a hang: finished after {run.seconds:.0f} s {did}"
    if run.over_memory is not None:
        used = f"more than {run.over_memory >> 20} MiB resident"
        if outcome is Outcome.NATIVE_CRASH and signature.endswith(":memory"):
            return REPRODUCES, f"killed: {used}"
        return OTHER_FAILURE, f"killed: {used}, the run saw {outcome.value}"
    if code < 0:
        name = _signal_name(code)
        if outcome is Outcome.NATIVE_CRASH:
            cause = signature.rsplit(":", 1)[-1]
            same = "" if cause in (name, "memory") else f" (the run saw {cause})"
            return REPRODUCES, f"died by {name}{same}"
        return OTHER_FAILURE, f"died by {name}, the run saw {outcome.value}: {_last_line(run.stderr)}"
    if code == 0:
        return NOT_REPRODUCED, _compared_lines(run.stdout) or _last_line(run.stdout) or "exit 0"
    if code != 1:
        return OTHER_FAILURE, f"exit status {code}: {exception}"
    # exit 1: an exception propagated, or the comparison found the outputs differ
    if outcome is Outcome.CRASH:
        if not raised:
            if "REPRODUCED" in run.stdout:
                return OTHER_FAILURE, f"outputs differ instead of the crash: {_compared_lines(run.stdout)}"
            return OTHER_FAILURE, f"exit 1 without an exception it could sign: {exception}"
        got = raised.get("signature", "")
        if got == signature:
            return REPRODUCES, exception
        return OTHER_FAILURE, f"raised {exception} (signature {got})"
    if outcome is Outcome.INCONSISTENT:
        if raised:
            return OTHER_FAILURE, f"raised {exception} instead of comparing"
        if "REPRODUCED" in run.stdout:
            return REPRODUCES, _compared_lines(run.stdout)
        return OTHER_FAILURE, f"exit 1: {_last_line(run.stdout) or exception}"
    # a native crash or a hang that shows as a Python exception or an inconsistency
    if raised:
        return OTHER_FAILURE, f"raised {exception}, the run saw {outcome.value}"
    return OTHER_FAILURE, f"exit 1 ({_last_line(run.stdout)}), the run saw {outcome.value}"


def shown_as(target: str, signature: str) -> tuple[str, str]:
    """The target a bug's script runs and the signature its exception gets there. A test's own
    bug: its own. A rule's finding (``opera.run.rules``) is shown by a script without the rule:
    ``crash:ov-torch:rule=paths:ov-onnx:<frame>`` by an ov-onnx script whose exception signs
    ``crash:ov-onnx:<frame>``; ``crash:tvm-torch:rule=transforms:<frame>`` by a tvm-torch script
    signing ``crash:tvm-torch:<frame>``."""
    kind, _, rest = signature.partition(":")
    own, _, rest = rest.partition(":")
    if not rest.startswith("rule="):
        return target, signature
    rest = rest.partition(":")[2]
    via, _, after = rest.partition(":")
    from opera.run.targets import TARGETS

    if after and via in TARGETS.names():
        return via, f"{kind}:{via}:{after}"
    return target, f"{kind}:{own}:{rest}"


def verify_bug(bug: BugRecord, timeout_s: float, max_rss_bytes: int | None = None) -> Verification:
    """Run one bug's reproducer and judge it (no store access: safe in a thread)."""
    assert bug.reproducer is not None
    target, signature = shown_as(bug.target, bug.signature)
    if not Path(bug.reproducer).is_file():
        return Verification(
            bug.signature, bug.reproducer, bug.reproducer_size, MISSING, "the script file is gone", None, 0.0
        )
    if Outcome(bug.outcome) is Outcome.TIMEOUT:  # a hang must outlast a slow machine, not just the limit
        timeout_s *= HANG_CONFIRM_FACTOR
    run = run_reproducer(bug.reproducer, target, timeout_s, max_rss_bytes=max_rss_bytes)
    status, detail = classify(bug.outcome, signature, run)
    if status == NOT_REPRODUCED and Outcome(bug.outcome) is not Outcome.TIMEOUT:
        # Outputs that matched once may still differ on another run (uninitialized memory, a race):
        # run it FLAKY_RUNS times in all and say how often it fails.
        shown = 0
        for _ in range(FLAKY_RUNS - 1):
            again = run_reproducer(bug.reproducer, target, timeout_s, max_rss_bytes=max_rss_bytes)
            verdict, again_detail = classify(bug.outcome, signature, again)
            if verdict == REPRODUCES:
                shown += 1
                run, reproduced = again, again_detail
        if shown:
            status = REPRODUCES
            detail = f"flaky: reproduces {shown} of {FLAKY_RUNS} runs; {reproduced}"
        else:
            detail = f"{detail} ({FLAKY_RUNS} runs)"
    return Verification(
        bug.signature,
        bug.reproducer,
        bug.reproducer_size,
        status,
        _shorten(detail),
        run.exit_code,
        run.seconds,
    )


def needs_verification(bug: BugRecord, versions: dict[str, Any] | None) -> bool:
    """Not verified since its reproducer was kept, or verified with other compiler versions."""
    if bug.reproducer is None:
        return False
    if bug.repro_status is None:
        return True
    return versions is not None and bug.repro_versions is not None and bug.repro_versions != versions


@dataclass
class VerificationSummary:
    """Verdicts of the reproducers of a set of bug signatures (verified now or before)."""

    counts: dict[str, int] = field(default_factory=dict)  # status -> bugs
    unverified: int = 0  # bugs with a reproducer that has no verdict (skipped, interrupted)
    without_reproducer: int = 0
    failing: list[BugRecord] = field(default_factory=list)  # verified and not reproducing
    verified_now: int = 0
    seconds: float = 0.0
    interrupted: bool = False
    skipped_reason: str = ""

    @property
    def verified(self) -> int:
        return sum(self.counts.values())

    @property
    def reproducing(self) -> int:
        return self.counts.get(REPRODUCES, 0)

    def headline(self) -> str:
        """``N of M reproducers reproduce`` (+ what is not verified)."""
        text = f"{self.reproducing} of {self.verified} reproducers reproduce"
        others = [f"{self.counts[s]} {s}" for s in STATUSES if s != REPRODUCES and self.counts.get(s)]
        if others:
            text += f" ({', '.join(others)})"
        if self.unverified:
            text += f"; {self.unverified} not verified"
        if self.without_reproducer:
            text += f"; {self.without_reproducer} signature(s) without a reproducer"
        return text

    def to_json(self) -> dict[str, Any]:
        return {
            "reproduce": self.reproducing,
            "verified": self.verified,
            "counts": dict(self.counts),
            "unverified": self.unverified,
            "without_reproducer": self.without_reproducer,
            "verified_now": self.verified_now,
            "seconds": round(self.seconds, 1),
            "interrupted": self.interrupted,
            "skipped_reason": self.skipped_reason,
            "not_reproducing": [
                {
                    "signature": b.signature,
                    "status": b.repro_status,
                    "detail": b.repro_detail,
                    "reproducer": b.reproducer,
                }
                for b in self.failing
            ],
        }


def summarize(bugs: Iterable[BugRecord]) -> VerificationSummary:
    summary = VerificationSummary()
    for bug in bugs:
        if bug.reproducer is None:
            summary.without_reproducer += 1
        elif bug.repro_status is None:
            summary.unverified += 1
        else:
            summary.counts[bug.repro_status] = summary.counts.get(bug.repro_status, 0) + 1
            if bug.repro_status != REPRODUCES:
                summary.failing.append(bug)
    return summary


def verify_bugs(
    store: ResultStore,
    bugs: list[BugRecord],
    *,
    timeout_s: float,
    workers: int = 1,
    versions: Callable[[str], dict[str, Any] | None] | None = None,
    show_progress: bool = True,
    desc: str = "verify reproducers",
    max_rss_bytes: int | None = None,
    runner: Callable[[BugRecord, float], Verification] | None = None,
) -> tuple[int, bool]:
    """Run the reproducers of ``bugs`` (those with one), ``workers`` at a time, storing each
    verdict as it comes (the store is written from this thread only). ``versions(target)``: the
    compiler versions to record with the verdict. Returns (verified, interrupted): Ctrl-C stops
    the scripts in flight and keeps every verdict already stored."""
    todo = [b for b in bugs if b.reproducer is not None]
    if not todo:
        return 0, False
    run_one = runner or functools.partial(verify_bug, max_rss_bytes=max_rss_bytes)
    bar = progress_bar(total=len(todo), desc=desc, unit="script", disable=not show_progress)
    done = 0
    pool = ThreadPoolExecutor(max_workers=max(1, workers), thread_name_prefix="opera-verify")
    interrupted = False
    pending: set[Future[Verification]] = set()
    try:
        pending = {pool.submit(run_one, b, timeout_s) for b in todo}
        by_signature = {b.signature: b for b in todo}
        while pending:
            finished, pending = wait(pending, timeout=0.5, return_when=FIRST_COMPLETED)
            for future in finished:
                v = future.result()
                bug = by_signature[v.signature]
                store.set_reproduction(
                    v.signature,
                    v.reproducer,
                    v.reproducer_size,
                    status=v.status,
                    detail=v.detail,
                    exit_code=v.exit_code,
                    seconds=v.seconds,
                    versions=versions(bug.target) if versions is not None else None,
                )
                done += 1
                bar.set_postfix_str(f"last: {v.status}", refresh=False)
                bar.update(1)
    except KeyboardInterrupt:
        interrupted = True
    finally:
        # Ctrl-C reaches this thread only: the scripts in flight (own sessions) are killed here,
        # and their half-run verdicts dropped; the ones stored stay
        for future in pending:
            future.cancel()
        while interrupted and pending:
            kill_running()
            _, pending = wait(pending, timeout=0.2)
        pool.shutdown(wait=True)
        bar.close()
    return done, interrupted
