"""`opera run` / `opera bugs` / `opera targets` end to end: SIGKILL + resume, user errors, real compilers."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from _run_fixtures import add, fault, relus, results_so_far, tfidf, write

from opera.cli import main
from opera.outcomes import Outcome
from opera.run.runner import RunConfig, start_run
from opera.store import ResultStore

ENV = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
OPERA = [sys.executable, "-m", "opera.cli"]


def _children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                found.append(int(entry.name))
    return found


def test_sigkill_mid_run_then_resume_runs_each_test_exactly_once(tmp_path, capsys) -> None:
    # 20 instances x 2 targets; test-faults is slow on "fault:slow" (0.25 s per test)
    instances = [fault("slow", k) for k in range(20)]
    corpus = write(tmp_path / "c.jsonl", instances)
    store = tmp_path / "opera.db"
    cmd = [
        *OPERA,
        "run",
        str(corpus),
        "-t",
        "test-faults",
        "-t",
        "test-wrong",
        "--store",
        str(store),
        "--workers",
        "2",
        "-q",
    ]
    proc = subprocess.Popen(cmd, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while results_so_far(store) < 8 and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.05)
    workers = _children(proc.pid)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)
    done_before = results_so_far(store)
    assert 8 <= done_before < 40, f"the run was not killed mid-way ({done_before} results)"
    assert workers, "no worker processes seen"
    time.sleep(1.0)
    assert not [
        p
        for p in workers
        if Path(f"/proc/{p}").exists() and "Z" not in Path(f"/proc/{p}/stat").read_text().split(")")[1][:3]
    ], "workers outlived the killed run"
    with ResultStore(store) as db:
        assert db.get_run(1).status == "running"
        before = {(r.instance_id, r.target): r for r in db.results(1)}
    assert main(["run", "--store", str(store), "--resume", "1", "-q"]) == 0
    with ResultStore(store) as db:
        results = db.results(1)
        planned = {(p.instance_id, p.target) for p in db.planned(1)}
        assert db.get_run(1).status == "complete"
        bugs = db.bugs(1)
    pairs = [(r.instance_id, r.target) for r in results]
    assert len(pairs) == len(set(pairs)) == 40 and set(pairs) == planned
    assert set(pairs) == {(i.id, t) for i in instances for t in ("test-faults", "test-wrong")}
    after = {(r.instance_id, r.target): r for r in results}
    assert all(after[k].duration == v.duration for k, v in before.items())  # not run again
    assert {r.outcome for r in results if r.target == "test-faults"} == {Outcome.PASS}
    assert {r.outcome for r in results if r.target == "test-wrong"} == {Outcome.INCONSISTENT}
    out = capsys.readouterr().out
    assert "run 1: complete" in out
    # opera bugs: one signature, its reproducer exists
    assert main(["bugs", "--store", str(store)]) == 0
    listing = capsys.readouterr().out
    assert "inconsistent:test-wrong:onnx::Relu" in listing and "1 signature(s)" in listing
    assert bugs[0].count == 20 and bugs[0].reproducer and Path(bugs[0].reproducer).exists()


def _error_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    return err[0]


def test_user_errors_exit_2_with_one_line(tmp_path, capsys) -> None:
    good = write(tmp_path / "good.jsonl", relus(2))
    bad = tmp_path / "bad.jsonl"
    bad.write_text(good.read_text().splitlines()[-1] + "\n{not json\n")
    store = str(tmp_path / "s.db")
    assert main(["run", str(bad), "-t", "test-wrong", "--store", store]) == 2
    assert f"{bad}:2: malformed" in _error_line(capsys)
    assert not Path(store).exists()  # nothing created for a run that never started
    assert main(["run", str(good), "-t", "no-such-target", "--store", store]) == 2
    assert "unknown target 'no-such-target'" in _error_line(capsys)
    assert main(["run", str(good), "-t", "test-wrong", "--store", store, "--budget", "10 minutes"]) == 2
    assert "bad duration" in _error_line(capsys)
    order = tmp_path / "order.txt"
    order.write_text("0123456789abcdef0123\n")
    assert main(["run", str(good), "-t", "test-wrong", "--store", store, "--order", str(order)]) == 2
    assert "not in the corpus" in _error_line(capsys)
    assert main(["run", str(good), "--store", store, "--resume", "1", "-t", "test-wrong"]) == 2
    assert "from the stored run" in _error_line(capsys)
    assert main(["run", "--store", store, "--resume", "3"]) == 2
    assert "store not found" in _error_line(capsys)


def test_exit_code_of_the_real_command(tmp_path) -> None:
    corpus = write(tmp_path / "c.jsonl", relus(1))
    proc = subprocess.run(
        [*OPERA, "run", str(corpus), "-t", "nope", "--store", str(tmp_path / "s.db")],
        capture_output=True,
        text=True,
        env=ENV,
        timeout=60,
    )
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "unknown target" in proc.stderr


def test_budget_stops_starting_tests_and_resume_finishes(tmp_path, capsys) -> None:
    # a first test of 6 s is under way when the budget runs out; 3 of 0.25 s wait in the executor
    corpus = write(tmp_path / "c.jsonl", [fault("lag", 0)] + [fault("slow", k) for k in range(1, 12)])
    store = str(tmp_path / "s.db")
    assert (
        main(
            [
                "run",
                str(corpus),
                "-t",
                "test-faults",
                "--store",
                store,
                "--workers",
                "1",
                "--budget",
                "1s",
                "-q",
            ]
        )
        == 0
    )
    with ResultStore(store) as db:
        assert db.get_run(1).status == "budget-exhausted"
        # the test under way when the budget ran out finishes; the ones queued behind it (the
        # executor keeps 4 per worker) do not start
        assert [r.source_test for r in db.results(1)] == ["fault:lag"]
    assert "--resume 1" in capsys.readouterr().out
    # what would judge the rest of the run differently is refused; limits may change
    for flags in (["--seed", "3"], ["--unsupported-config", str(tmp_path / "u.toml")]):
        assert main(["run", "--store", store, "--resume", "1", "-q", *flags]) == 2
        assert f"--resume takes {flags[0]} from the stored run" in capsys.readouterr().err
    assert main(["run", "--store", store, "--resume", "1", "-q", "--max-rss", "3G", "--no-reproducers"]) == 0
    with ResultStore(store) as db:
        assert len(db.results(1)) == 12 and db.get_run(1).status == "complete"


@pytest.mark.slow
def test_real_onnx_frontends_tvm_and_openvino(tmp_path, capsys) -> None:
    """Relu and a broadcasting Add pass on tvm-onnx and ov-onnx; TfIdfVectorizer has no converter
    in either frontend and must be `unsupported`, not a crash."""
    instances = [relus(1)[0], add((3, 4), (4,)), tfidf()]
    corpus = write(tmp_path / "c.jsonl", instances)
    store = str(tmp_path / "s.db")
    summary = start_run(
        RunConfig(corpus=[str(corpus)], targets=["tvm-onnx", "ov-onnx"], store=store, workers=2),
        show_progress=False,
    )
    with ResultStore(store) as db:
        results = {(r.api, r.target): r for r in db.results(summary.run_id)}
    for target in ("tvm-onnx", "ov-onnx"):
        assert results[("onnx::Relu", target)].outcome is Outcome.PASS
        assert results[("onnx::Add", target)].outcome is Outcome.PASS
        add_distance = results[("onnx::Add", target)].distance
        assert add_distance is not None and add_distance < 1e-5
        unsupported = results[("onnx::TfIdfVectorizer", target)]
        assert unsupported.outcome is Outcome.UNSUPPORTED, unsupported.message
        assert "TfIdfVectorizer" in unsupported.message
    assert summary.new_signatures == []
    # the gap is listed per target as an operator gap, with the frontend's words (issue 11, class 9)
    assert main(["bugs", "--store", store, "--gaps"]) == 0
    out = capsys.readouterr().out
    for target in ("tvm-onnx", "ov-onnx"):
        assert f"  {target}:" in out
    rows = [line.split() for line in out.splitlines() if "onnx::TfIdfVectorizer" in line]
    assert len(rows) == 2 and all(row[1] == "operator" and row[2] == "1" for row in rows), out


@pytest.mark.slow
def test_targets_lists_versions_and_hides_test_only_targets(capsys) -> None:
    import json

    assert main(["targets", "--json"]) == 0
    listed = {row["name"]: row for row in json.loads(capsys.readouterr().out)}
    assert "test-wrong" not in listed and "tvm-onnx" in listed
    assert listed["tvm-onnx"]["available"] and listed["tvm-onnx"]["versions"]["tvm"]
    assert not listed["trt-onnx"]["available"] and listed["trt-onnx"]["reason"]
    assert main(["targets", "--all"]) == 0
    text = capsys.readouterr().out
    assert "test-wrong" in text and "(test-only)" in text and "unavailable:" in text


@pytest.mark.slow
def test_real_torch_and_keras_frontends(tmp_path) -> None:
    """One torch function on tvm-torch / ov-torch / inductor-torch and one Keras layer on
    tvm-keras / ov-keras, through the real templates and artifacts: all pass. About a minute: two
    workers each import torch, TensorFlow, TVM and OpenVINO."""
    from _run_fixtures import keras_dense, torch_gelu

    corpus = write(tmp_path / "c.jsonl", [torch_gelu(), keras_dense()])
    targets = ["tvm-torch", "ov-torch", "inductor-torch", "tvm-keras", "ov-keras"]
    summary = start_run(
        RunConfig(corpus=[str(corpus)], targets=targets, store=str(tmp_path / "s.db"), workers=2),
        show_progress=False,
    )
    with ResultStore(str(tmp_path / "s.db")) as db:
        results = {r.target: r for r in db.results(summary.run_id)}
    assert set(results) == set(targets)
    for target, result in results.items():
        assert result.outcome is Outcome.PASS, (target, result.outcome, result.message)
        assert result.distance is not None and result.distance < 1e-3


def test_bugs_shows_the_message_and_the_source_tests_of_a_signature(tmp_path, capsys) -> None:
    """Issue 17: `opera bugs` names what failed (the example's first message line) and the tests the
    failing instances came from, most failures first, with how many more."""
    corpus = write(
        tmp_path / "c.jsonl",
        relus(3, test="test_a.py::t_relu") + relus(2, start=3, test="test_b.py::t_relu")
        + relus(1, start=5, test="test_c.py::t") + relus(1, start=6, test="test_d.py::t"),
    )  # fmt: skip
    store = str(tmp_path / "s.db")
    assert main(["run", str(corpus), "-t", "test-wrong", "--store", store, "--workers", "1", "-q", "--no-verify"]) == 0
    capsys.readouterr()
    assert main(["bugs", "--store", store]) == 0
    out = capsys.readouterr().out
    assert "from: test_a.py::t_relu, test_b.py::t_relu, test_c.py::t (+1 more)" in out, out
    (message,) = [line.strip() for line in out.splitlines() if line.strip().startswith("message:")]
    assert "distance" in message and "\n" not in message
    assert main(["bugs", "--store", store, "--json"]) == 0
    (bug,) = json.loads(capsys.readouterr().out)
    assert bug["source_tests"] == ["test_a.py::t_relu", "test_b.py::t_relu", "test_c.py::t"] and bug["message"]


def test_native_start_up_chatter_is_dropped_and_everything_else_kept(capfd) -> None:
    from opera.quiet import quiet_native_logs

    with quiet_native_logs():
        os.write(2, b"WARNING: All log messages before absl::InitializeLog() is called are written to STDERR\n")
        os.write(2, b"I0000 00:00:1795566225.016524   10313 port.cc:153] oneDNN custom operations are on.\n")
        os.write(2, b"a real warning the user must see\n")
        sys.stderr.write("Traceback: also kept\n")
    lines = capfd.readouterr().err.splitlines()  # (capfd takes sys.stderr apart from descriptor 2)
    assert sorted(lines) == ["Traceback: also kept", "a real warning the user must see"]


@pytest.mark.slow
def test_targets_prints_no_library_log_noise() -> None:
    """Issue 17: `opera targets` imports TensorFlow (tvm-keras, ov-keras), whose C++ start-up lines
    went to stderr; the listing is all the user sees."""
    proc = subprocess.run([sys.executable, "-m", "opera.cli", "targets"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and "tvm-keras" in proc.stdout
    assert proc.stderr == "", proc.stderr


@pytest.mark.slow
def test_run_prints_no_library_log_noise(tmp_path) -> None:
    """Issue 17: `opera run` on a Keras target probes it in the driver (TensorFlow's start-up lines
    went to stderr at the end of the run's output)."""
    corpus = Path(__file__).resolve().parents[1] / "harvested" / "keras.jsonl.gz"
    args = ["run", str(corpus), "-t", "tvm-keras", "--limit", "1", "--store", str(tmp_path / "s.db"), "-q", "--no-verify"]
    proc = subprocess.run([sys.executable, "-m", "opera.cli", *args], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and "tvm-keras" in proc.stdout, proc.stderr
    assert "absl::InitializeLog" not in proc.stderr and "oneDNN custom operations" not in proc.stderr, proc.stderr


def test_a_crash_message_is_shown_by_its_exception_line() -> None:
    """A crash's stored message is a traceback: `opera bugs` shows the exception line, not 'Traceback'."""
    from opera.commands.bugs import _first_line

    traceback_text = (
        "Traceback (most recent call last):\n"
        '  File "/x/onnx_frontend.py", line 10, in _impl_v13\n'
        "    raise ValueError(f'bad {axis}')\n"
        "ValueError: bad axis 3\n"
        "  (more context)\n"
    )
    assert _first_line(traceback_text) == "ValueError: bad axis 3"
    assert _first_line("distance 0.5 > 0.001\nmore") == "distance 0.5 > 0.001"
    assert _first_line("x" * 300, width=20) == "x" * 17 + "..."
