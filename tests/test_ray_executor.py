"""The Ray executor on a real local Ray cluster of two nodes (ray.cluster_utils.Cluster, one CPU each).

Skipped when ray is not importable (it is the optional extra ``.[ray]``). The cluster is started
once for the module; the node-loss test removes the worker node and adds a fresh one back.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from _run_fixtures import fault, relus, results_so_far, write

ray = pytest.importorskip("ray", reason="ray is not installed (optional extra: pip install -e '.[ray]')")

from opera.cli import main  # noqa: E402
from opera.outcomes import Outcome, Stage  # noqa: E402
from opera.run.executors import ExecutorRequest  # noqa: E402
from opera.run.runner import RunConfig, start_run  # noqa: E402
from opera.run.targets import get_target  # noqa: E402
from opera.run.targets.testing import TestWrongTarget  # noqa: E402
from opera.store import ResultStore  # noqa: E402

pytestmark = pytest.mark.slow

ENV = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
OBJECT_STORE = 80 << 20
# Notice a killed node within a few seconds (defaults: tens of seconds).
SYSTEM_CONFIG = {
    "health_check_initial_delay_ms": 0,
    "health_check_period_ms": 1000,
    "health_check_failure_threshold": 5,
}


def _node_args(**kw):
    return {"num_cpus": 1, "object_store_memory": OBJECT_STORE, **kw}


@pytest.fixture(scope="module")
def cluster():
    from ray.cluster_utils import Cluster

    cluster = Cluster(
        initialize_head=True,
        head_node_args=_node_args(include_dashboard=False, _system_config=SYSTEM_CONFIG),
    )
    cluster.add_node(**_node_args())
    cluster.wait_for_nodes()
    yield cluster
    ray.shutdown()
    cluster.shutdown()


def _verdicts(store: str, run_id: int) -> dict[tuple[str, str], tuple[Outcome, str | None, Stage]]:
    with ResultStore(store) as db:
        return {(r.instance_id, r.target): (r.outcome, r.signature, r.stage) for r in db.results(run_id)}


def _error_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    return err[0]


def test_same_verdicts_as_the_local_pool_and_segfault_is_native_crash(cluster, tmp_path) -> None:
    kinds = ["segv", "abort@compile", "raise", "unsupported@run"]
    corpus = write(tmp_path / "c.jsonl", relus(3) + [fault(kind, k) for k, kind in enumerate(kinds)])
    targets = ["test-faults", "test-wrong"]
    local_store = str(tmp_path / "local.db")
    start_run(
        RunConfig(corpus=[str(corpus)], targets=targets, store=local_store, workers=1), show_progress=False
    )
    ray_store = str(tmp_path / "ray.db")
    argv = ["run", str(corpus), "--store", ray_store, "--executor", "ray", "--address", cluster.address, "-q"]
    assert main(argv + [a for t in targets for a in ("-t", t)]) == 0
    local, remote = _verdicts(local_store, 1), _verdicts(ray_store, 1)
    assert len(remote) == 14 and remote == local
    segv = next(v for k, v in remote.items() if k[1] == "test-faults" and v[1] and "SIGSEGV" in v[1])
    assert segv[0] is Outcome.NATIVE_CRASH and segv[2] is Stage.CONVERT
    with ResultStore(ray_store) as db:  # not retried: one result per planned test, nothing more
        assert db.get_run(1).status == "complete" and len(db.results(1)) == len(db.planned(1)) == 14
        assert db.get_run(1).config["executor"] == "ray"
    # both nodes ran tests: each actor's worker logs under the run's log dir, named by node
    logs = Path(f"{ray_store}.d/logs/run-1")
    assert len({p.name.rsplit("-", 1)[1] for p in logs.glob("ray-*")}) == 2


def test_bad_input_is_one_line_and_no_run(cluster, tmp_path, capsys, monkeypatch) -> None:
    corpus = write(tmp_path / "c.jsonl", relus(2))
    store = tmp_path / "s.db"
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    base = ["run", str(corpus), "-t", "test-wrong", "--store", str(store), "--executor", "ray"]
    assert main([*base, "--address", f"127.0.0.1:{port}"]) == 2
    assert f"cannot reach a Ray cluster at 127.0.0.1:{port}" in _error_line(capsys)
    # a GPU target on a cluster without a GPU node
    monkeypatch.setattr(TestWrongTarget, "needs_gpu", True)
    assert main([*base, "--address", cluster.address]) == 2
    line = _error_line(capsys)
    assert "has a GPU" in line and "test-wrong needs one" in line
    assert not store.exists()  # refused before the run was created
    # a driver whose Ray differs from the cluster's
    ray.shutdown()
    monkeypatch.setattr(ray, "__version__", "2.0.0")
    assert main([*base, "--address", cluster.address]) == 2
    line = _error_line(capsys)
    assert "Ray version mismatch" in line and "this driver Ray 2.0.0" in line
    ray.shutdown()
    monkeypatch.undo()
    assert main(["targets", "--executor", "local", "--address", "auto"]) == 2
    assert "--address needs --executor ray" in _error_line(capsys)


def test_gpu_target_runs_only_on_the_gpu_node_and_targets_reports_per_node(
    cluster, tmp_path, capsys, monkeypatch
) -> None:
    from opera.run.executors.ray import prepare

    gpu_node = cluster.add_node(**_node_args(num_gpus=1))
    cluster.wait_for_nodes()
    try:
        assert main(["targets", "--all", "--executor", "ray", "--address", cluster.address]) == 0
        out = capsys.readouterr().out
        assert out.count("node ") == 3 and "GPU 1" in out and "test-wrong" in out
        monkeypatch.setattr(TestWrongTarget, "needs_gpu", True)
        corpus = write(tmp_path / "c.jsonl", relus(4))
        names = ["test-wrong", "test-faults"]
        request = ExecutorRequest({n: get_target(n) for n in names}, address=cluster.address)
        factory = prepare(request)
        seen: list = []

        def capture(workers, settings):
            executor = factory(workers, settings)
            poll = executor.poll

            def recording(timeout_s):
                outcomes = poll(timeout_s)
                seen.extend(outcomes)
                return outcomes

            executor.poll = recording
            return executor

        config = RunConfig(corpus=[str(corpus)], targets=names, store=str(tmp_path / "s.db"))
        summary = start_run(config, show_progress=False, executor_factory=capture)
        assert summary.status == "complete" and summary.counts["test-wrong"] == {"inconsistent": 4}
        nodes = {o.task.target: set() for o in seen}
        for o in seen:
            nodes[o.task.target].add(o.extra["node"])
        assert nodes["test-wrong"] == {gpu_node.node_id}
    finally:
        cluster.remove_node(gpu_node)


def test_driver_killed_then_resume_runs_each_test_once(cluster, tmp_path) -> None:
    corpus = write(tmp_path / "c.jsonl", [fault("slow", k) for k in range(24)])
    store = tmp_path / "s.db"
    cmd = [sys.executable, "-m", "opera.cli", "run", str(corpus), "-t", "test-faults", "--store", str(store)]
    cmd += ["--executor", "ray", "--address", cluster.address, "-q"]
    proc = subprocess.Popen(cmd, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    while results_so_far(store) < 4 and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)
    before = results_so_far(store)
    assert 4 <= before < 24, f"the driver was not killed mid-run ({before} results)"
    assert main(["run", "--store", str(store), "--resume", "1", "-q"]) == 0  # executor ray, from the run
    with ResultStore(str(store)) as db:
        pairs = [(r.instance_id, r.target) for r in db.results(1)]
        planned = {(p.instance_id, p.target) for p in db.planned(1)}
        assert db.get_run(1).status == "complete"
        assert {r.outcome for r in db.results(1)} == {Outcome.PASS}
    assert len(pairs) == len(set(pairs)) == 24 and set(pairs) == planned


def test_killing_a_worker_node_mid_run_loses_and_duplicates_nothing(cluster, tmp_path) -> None:
    from opera.run.executors.ray import prepare

    worker = next(n for n in cluster.worker_nodes)
    corpus = write(tmp_path / "c.jsonl", [fault("slow", k) for k in range(30)])
    store = tmp_path / "s.db"
    request = ExecutorRequest({"test-faults": get_target("test-faults")}, address=cluster.address)
    factory = prepare(request)
    executors = []

    def capture(workers, settings):
        executors.append(factory(workers, settings))
        return executors[-1]

    def kill_when_running() -> None:
        deadline = time.monotonic() + 120
        while results_so_far(store) < 6 and time.monotonic() < deadline:
            time.sleep(0.05)
        cluster.remove_node(worker, allow_graceful=False)

    killer = threading.Thread(target=kill_when_running)
    killer.start()
    try:
        config = RunConfig(corpus=[str(corpus)], targets=["test-faults"], store=str(store))
        summary = start_run(config, show_progress=False, executor_factory=capture)
    finally:
        killer.join()
        cluster.add_node(**_node_args())  # back to two nodes for whatever runs next
    assert summary.status == "complete"
    with ResultStore(str(store)) as db:
        results = db.results(summary.run_id)
        planned = [(p.instance_id, p.target) for p in db.planned(summary.run_id)]
    pairs = [(r.instance_id, r.target) for r in results]
    assert len(pairs) == len(set(pairs)) == len(planned) == 30 and set(pairs) == set(planned)
    assert {r.outcome for r in results} == {Outcome.PASS}  # a lost node is not a compiler crash
    assert executors[0].lost_actors >= 1 and executors[0].rescheduled >= 1
