"""The runner over the test-only targets: oracles, isolation of faulty workers, reproducers."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from _run_fixtures import dropout, fault, opaque, rejected, relus, write

from opera.errors import OperaError
from opera.outcomes import Outcome, Stage
from opera.prioritize import read_order
from opera.run.runner import RunConfig, parse_duration, plan_tests, start_run
from opera.store import ResultStore

ENV = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}


def _run(tmp_path, corpus, targets, **kw):
    store = str(tmp_path / "opera.db")
    config = RunConfig(corpus=[str(corpus)], targets=targets, store=store, workers=kw.pop("workers", 1), **kw)
    summary = start_run(config, show_progress=False)
    with ResultStore(store) as db:
        results = db.results(summary.run_id)
        bugs = db.bugs(summary.run_id)
    return summary, results, bugs


def test_wrong_target_is_inconsistent_invalids_recorded_and_reproducer_shows_it(tmp_path) -> None:
    instances = relus(3) + [rejected(7), opaque()]
    corpus = write(tmp_path / "c.jsonl", instances)
    summary, results, bugs = _run(tmp_path, corpus, ["test-wrong"])
    by_id = {r.instance_id: r for r in results}
    assert len(results) == len(instances) and summary.status == "complete"
    for inst in instances[:3]:
        r = by_id[inst.id]
        assert r.outcome is Outcome.INCONSISTENT and r.stage is Stage.COMPARE
        assert r.distance == pytest.approx(1.0)
    assert (
        by_id[instances[3].id].outcome is Outcome.INVALID
        and "validity gate" in by_id[instances[3].id].message
    )
    assert (
        by_id[instances[4].id].outcome is Outcome.INVALID
        and "not migratable" in by_id[instances[4].id].message
    )
    assert [b.signature for b in bugs] == ["inconsistent:test-wrong:onnx::Relu"]
    assert summary.new_signatures == ["inconsistent:test-wrong:onnx::Relu"]
    # the reproducer stands alone: run it without Opera on the path
    script = bugs[0].reproducer
    assert script is not None and script.endswith(".py")
    assert "opera" not in [
        line.split()[1].split(".")[0]
        for line in Path(script).read_text().splitlines()
        if line.startswith(("import ", "from "))
    ]
    proc = subprocess.run([sys.executable, "-I", script], capture_output=True, text=True, timeout=60, env=ENV)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "REPRODUCED" in proc.stdout and "distance 1" in proc.stdout


def test_same_seed_same_verdicts(tmp_path) -> None:
    corpus = write(tmp_path / "c.jsonl", relus(2))
    first = _run(tmp_path, corpus, ["test-wrong"])[1]
    second = _run(tmp_path, corpus, ["test-wrong"])[1]
    assert [(r.instance_id, r.outcome, r.distance) for r in first] == [
        (r.instance_id, r.outcome, r.distance) for r in second
    ]


def test_faulty_workers_are_replaced_and_recorded(tmp_path) -> None:
    kinds = ["segv", "abort@compile", "hang", "alloc@run", "raise", "unsupported@run"]
    faulty = [fault(kind, k) for k, kind in enumerate(kinds)]
    good = relus(3)
    corpus = write(tmp_path / "c.jsonl", [good[0], *faulty[:3], good[1], *faulty[3:], good[2]])
    summary, results, _ = _run(
        tmp_path, corpus, ["test-faults"], workers=2, timeout_s=4.0, max_rss_bytes=400 << 20
    )
    by_kind = {
        inst.source.test[len("fault:") :]: next(r for r in results if r.instance_id == inst.id)
        for inst in faulty
    }
    assert len(results) == 9 and summary.status == "complete"
    assert all(r.outcome is Outcome.PASS for r in results if r.instance_id in {g.id for g in good})
    assert by_kind["segv"].outcome is Outcome.NATIVE_CRASH and "SIGSEGV" in (by_kind["segv"].signature or "")
    assert by_kind["segv"].stage is Stage.CONVERT
    from opera.run.native_trace import helper_library

    if helper_library() is not None:  # where it faulted, from the worker's signal handler
        assert " at _ctypes" in by_kind["segv"].message, by_kind["segv"].message
    assert (
        by_kind["abort@compile"].outcome is Outcome.NATIVE_CRASH
        and by_kind["abort@compile"].stage is Stage.COMPILE
    )
    assert "SIGABRT" in by_kind["abort@compile"].message
    assert by_kind["hang"].outcome is Outcome.TIMEOUT and by_kind["hang"].duration >= 4.0
    # unbounded allocation: the parent's RSS watch kills the worker -> native-crash, cause "memory"
    assert by_kind["alloc@run"].outcome is Outcome.NATIVE_CRASH and by_kind["alloc@run"].stage is Stage.RUN
    assert (by_kind["alloc@run"].signature or "").endswith(":memory")
    assert by_kind["raise"].outcome is Outcome.CRASH
    assert by_kind["raise"].signature == "crash:test-faults:opera/run/targets/testing.py:_inject:RuntimeError"
    assert (
        by_kind["unsupported@run"].outcome is Outcome.UNSUPPORTED
        and by_kind["unsupported@run"].signature is None
    )


def test_a_death_in_a_warm_worker_is_confirmed_alone_in_a_fresh_one(tmp_path) -> None:
    """Sample 10: a worker that had run other tests died (SIGABRT) converting an instance whose
    reproducer never failed. A death that needs the earlier tests' state is not the test's: it runs
    again alone in a fresh worker, whose verdict stands and says how the first worker died, while
    a death that recurs there stays the test's native crash."""
    good = relus(2)
    poisoned, abort = fault("poisoned", 5), fault("abort", 6)
    corpus = write(tmp_path / "c.jsonl", [good[0], poisoned, good[1], abort])
    summary, results, _ = _run(tmp_path, corpus, ["test-faults"], workers=1, timeout_s=20.0)
    by_id = {r.instance_id: r for r in results}
    assert len(results) == 4 and summary.status == "complete"
    first = by_id[poisoned.id]
    assert first.outcome is Outcome.PASS and first.signature is None, (first.outcome, first.message)
    # (with a C compiler at hand, where it died too: " at libpython3.11.so.1.0+0xfa82d < ...")
    died = re.search(r"a first worker died on this test \(worker died \(SIGABRT\) during convert( at .+)? after 1 other test\(s\)\)", first.message)
    assert died is not None, first.message
    again = by_id[abort.id]
    assert again.outcome is Outcome.NATIVE_CRASH and "SIGABRT" in (again.signature or "")
    assert "alone in a fresh worker (a first worker: worker died (SIGABRT)" in again.message, again.message
    assert all(by_id[g.id].outcome is Outcome.PASS for g in good)


def test_a_hang_or_death_while_the_library_makes_the_artifact_is_invalid(tmp_path) -> None:
    """ov-torch 'timeouts' of the generated corpus were torch.export tracing a 65537-way
    ``tensor_split`` for minutes inside the target's convert (judged HARNESS): a hang or a death
    inside ``library_step`` is the library's, so the instance is ``invalid``, as when its exporter
    raises; the same faults outside it stay the compiler's."""
    hang, segv, plain = fault("library-hang", 0), fault("library-segv", 1), fault("hang", 2)
    slow = fault("library-slow", 3)  # 5 s in all, of which 3 s the library's: within 4 s of its own
    corpus = write(tmp_path / "c.jsonl", [hang, segv, plain, slow])
    summary, results, _ = _run(tmp_path, corpus, ["test-faults"], workers=1, timeout_s=4.0)
    by_id = {r.instance_id: r for r in results}
    assert summary.status == "complete" and len(results) == 4
    assert by_id[slow.id].outcome is Outcome.PASS, by_id[slow.id].message
    assert by_id[hang.id].outcome is Outcome.INVALID and by_id[hang.id].signature is None
    assert "the library itself did not finish making what the frontend consumes" in by_id[hang.id].message
    assert by_id[segv.id].outcome is Outcome.INVALID
    assert "the library itself failed natively (SIGSEGV)" in by_id[segv.id].message, by_id[segv.id].message
    assert by_id[plain.id].outcome is Outcome.TIMEOUT


def test_plan_order_limit_and_durations(tmp_path) -> None:
    instances = {i.id: i for i in relus(4)}
    ids = list(instances)
    order_file = tmp_path / "order.txt"
    order_file.write_text(f"# best first\n{ids[2]}\n\n{ids[0]}  # a comment\n")
    notes: list[str] = []
    planned = plan_tests(
        instances, {"test-wrong": "onnx", "tvm-torch": "torch"}, order=read_order(order_file)[0], notes=notes
    )
    assert [p[0] for p in planned] == [ids[2], ids[0], ids[1], ids[3]]  # the rest follow in corpus order
    assert all(t == "test-wrong" for _, t in planned) and "2 corpus instance(s)" in notes[0]
    assert len(plan_tests(instances, {"test-wrong": "onnx"}, limit=2)) == 2
    with pytest.raises(OperaError, match="not in the corpus"):
        plan_tests(instances, {"test-wrong": "onnx"}, order=["deadbeef"])
    with pytest.raises(OperaError, match="nothing to run"):
        plan_tests(instances, {"tvm-torch": "torch"})
    assert [parse_duration(s) for s in ("90s", "30m", "2h", "1h30m", "45")] == [90, 1800, 7200, 5400, 45]
    for bad in ("", "10x", "1h-5m", "0s", "m"):
        with pytest.raises(OperaError):
            parse_duration(bad)


def test_chebyshev_distance_of_real_outputs_recorded_for_passes(tmp_path) -> None:
    corpus = write(tmp_path / "c.jsonl", relus(1))
    _, results, _ = _run(tmp_path, corpus, ["test-faults"])
    assert results[0].outcome is Outcome.PASS and results[0].distance == 0.0
    assert np.isfinite(results[0].duration) and results[0].duration > 0


@pytest.mark.slow
def test_library_disagreeing_with_itself_is_nondeterministic(tmp_path) -> None:
    """F.dropout(training=True) draws a new mask on every call: the two reference runs differ.
    (onnxruntime's Random* ops are NOT caught this way: a fresh session repeats the same values.)
    The compiler still ran it (issue 11, class 4): the verdict is reached at the comparison."""
    corpus = write(tmp_path / "c.jsonl", [dropout()])
    _, results, bugs = _run(tmp_path, corpus, ["inductor-torch"])
    assert results[0].outcome is Outcome.NONDETERMINISTIC and results[0].stage is Stage.COMPARE
    assert results[0].distance is not None and results[0].distance > 0 and bugs == []


def test_workers_that_cannot_start_stop_the_executor_with_a_clear_error(tmp_path) -> None:
    from opera.run.executors import TestTask, WorkerSettings
    from opera.run.executors.local import LocalExecutor

    logs = tmp_path / "logs"
    (logs / "worker-0.log").mkdir(parents=True)  # the worker cannot open its log file: dies at start
    executor = LocalExecutor(1, WorkerSettings(log_dir=str(logs)))
    executor.submit(TestTask(0, relus(1)[0], "test-wrong"))
    try:
        with pytest.raises(OperaError, match="exit at start-up"):
            for _ in range(120):
                assert executor.poll(0.5) == []  # the test is requeued, never given a verdict
    finally:
        executor.close()


def test_idle_worker_over_half_its_memory_limit_is_recycled(tmp_path) -> None:
    """A worker whose baseline (python + numpy + onnx + onnxruntime) already exceeds half of a
    tiny limit is replaced before every test: the tests still pass, nothing is blamed on them."""
    from opera.run.executors import TestTask, WorkerSettings
    from opera.run.executors.local import LocalExecutor

    executor = LocalExecutor(1, WorkerSettings(max_rss_bytes=120 << 20))  # worker baseline ~80 MiB
    outcomes = []
    try:
        for seq, inst in enumerate(relus(2)):
            executor.submit(TestTask(seq, inst, "test-faults"))
        while executor.in_flight():
            outcomes.extend(executor.poll(0.5))
    finally:
        executor.close()
    assert [o.result.outcome for o in outcomes if o.result] == [Outcome.PASS, Outcome.PASS]
    assert executor.recycled == 1


def test_a_spent_budget_drops_the_queued_tests_but_not_the_reproducer_requests() -> None:
    from opera.run.executors import TaskQueue, TestTask

    inst = relus(1)[0]
    queue = TaskQueue()
    for seq, target in [(3, "a"), (1, "b"), (2, "a")]:
        queue.add(TestTask(seq, inst, target))
    queue.add(TestTask(-1, inst, "a", kind="reproduce"))
    assert [t.seq for t in queue.drop_tests()] == [1, 2, 3]
    assert len(queue) == 1 and queue.take(None, set()).kind == "reproduce" and len(queue) == 0
