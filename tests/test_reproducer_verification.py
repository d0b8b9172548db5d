"""Every reproducer shows its failure on its own (issue 11, defect class 10).

After a run each bug signature's reproducer is re-run in a fresh process and the store records
whether it reproduces (``opera.reproduce.verify``); ``opera bugs`` and the nightly report show
it. The causes seen of reproducers that did not show their failure each have a test on a real
corpus instance: -Inf positions not compared, 0-d arrays turned 1-d by ``np.ascontiguousarray``,
inputs fed by position where the run fed by name, string tensors not decodable, a ``.keras`` model
that cannot be loaded back; and ``opera bugs`` naming the example's operator from another instance.
"""

from __future__ import annotations

import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from _run_fixtures import fault, relus, write

from opera.cli import main
from opera.corpus import CorpusReader
from opera.model import OperatorInstance
from opera.outcomes import Outcome, Stage, TestResult
from opera.reproduce.verify import (
    FLAKY_RUNS,
    HANG_CONFIRM_FACTOR,
    MISSING,
    NOT_REPRODUCED,
    OTHER_FAILURE,
    REPRODUCES,
    ScriptRun,
    Verification,
    classify,
    summarize,
    verify_bug,
    verify_bugs,
)
from opera.reproduce.write import write_reproducer
from opera.store import SCHEMA_VERSION, BugRecord, ResultStore
from opera.verdict.oracles import compare_outputs, load_oracle_config

HARVESTED = Path(__file__).resolve().parents[1] / "harvested"
_CACHE: dict[tuple[str, str], OperatorInstance] = {}


def _instance(library: str, test: str) -> OperatorInstance:
    """A real instance of the shipped corpus, by its source test (or id)."""
    key = (library, test)
    if key not in _CACHE:
        found = next(
            (i for i in CorpusReader([HARVESTED / f"{library}.jsonl.gz"]) if test in (i.source.test, i.id)),
            None,
        )
        assert found is not None, f"{test} is not in harvested/{library}.jsonl.gz"
        _CACHE[key] = found
    return _CACHE[key]


def _script(inst: OperatorInstance, target, tmp_path: Path, outcome: Outcome = Outcome.INCONSISTENT) -> Path:
    result = TestResult(
        instance_id=inst.id, api=inst.api, target=target.name, outcome=outcome, stage=Stage.COMPARE
    )
    path = write_reproducer(inst, target, result, tmp_path, file_name=f"{inst.id}-{target.name}.py")
    assert path is not None
    text = path.read_text()
    assert "import opera" not in text and "from opera" not in text and "from templates" not in text
    return path


def _run(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=600)


def _target(name: str):
    from opera.run.targets import get_target

    target = get_target(name)
    reason = target.availability()
    if reason is not None:
        pytest.skip(f"{name} unavailable: {reason}")
    return target


class _Steps:
    """A stand-in compiler whose reproducer steps return ``code``'s outputs (the comparison is
    what is under test, on a real instance's reference)."""

    compiler = "numpy"

    def __init__(self, name: str, code: str) -> None:
        self.name = name
        self.code = code

    def reproducer_steps(self, built):
        return b"", list(built.inputs), self.code


# ---- the verdicts -----------------------------------------------------------------------------


def _script_run(code: int | None, stdout: str = "", stderr: str = "", raised=None) -> ScriptRun:
    return ScriptRun(code, code is None, 1.0, stdout, stderr, raised)


def test_classify_each_outcome() -> None:
    sig = "crash:tvm-onnx:tvm/relax/frontend/onnx/onnx_frontend.py:_impl_v1:KeyError"
    same = {"signature": sig, "exception": "KeyError: 'num_heads'"}
    other = {
        "signature": "crash:tvm-onnx:ModuleNotFoundError:No module named '…'",
        "exception": "ModuleNotFoundError",
    }
    assert classify(Outcome.CRASH, sig, _script_run(1, raised=same))[0] == REPRODUCES
    # a script that dies on something else (a missing module, its own decoding) does not reproduce
    status, detail = classify(Outcome.CRASH, sig, _script_run(1, raised=other))
    assert status == OTHER_FAILURE and "ModuleNotFoundError" in detail
    assert classify(Outcome.CRASH, sig, _script_run(1, stdout="REPRODUCED: ..."))[0] == OTHER_FAILURE
    assert classify(Outcome.CRASH, sig, _script_run(0, stdout="not reproduced"))[0] == NOT_REPRODUCED
    assert classify(Outcome.CRASH, sig, _script_run(-11))[0] == OTHER_FAILURE

    inc = "inconsistent:ov-onnx:onnx::CastLike"
    assert (
        classify(Outcome.INCONSISTENT, inc, _script_run(1, stdout="output 0: ...\nREPRODUCED: x"))[0]
        == REPRODUCES
    )
    assert classify(Outcome.INCONSISTENT, inc, _script_run(1, raised=other))[0] == OTHER_FAILURE
    assert classify(Outcome.INCONSISTENT, inc, _script_run(0))[0] == NOT_REPRODUCED

    native = "native-crash:ov-keras:keras.ops.vdot:SIGSEGV"
    status, detail = classify(Outcome.NATIVE_CRASH, native, _script_run(-11))
    assert status == REPRODUCES and "SIGSEGV" in detail
    assert "the run saw SIGSEGV" in classify(Outcome.NATIVE_CRASH, native, _script_run(-6))[1]
    assert classify(Outcome.NATIVE_CRASH, native, _script_run(1, raised=same))[0] == OTHER_FAILURE
    assert classify(Outcome.NATIVE_CRASH, native, _script_run(None))[0] == OTHER_FAILURE

    hang = "timeout:tvm-torch:torch.nn.functional.interpolate"
    assert classify(Outcome.TIMEOUT, hang, _script_run(None))[0] == REPRODUCES
    assert classify(Outcome.TIMEOUT, hang, _script_run(0))[0] == NOT_REPRODUCED
    assert classify(Outcome.TIMEOUT, hang, _script_run(-9))[0] == OTHER_FAILURE


def _bug(
    signature: str, reproducer: str | None, status: str | None = None, size: int | None = 10
) -> BugRecord:
    return BugRecord(signature, "t", Outcome.CRASH, 1, 1, 1, "i", "onnx::Relu", reproducer, size, status)


def test_summary_line() -> None:
    bugs = [
        _bug("a", "a.py", REPRODUCES),
        _bug("b", "b.py", REPRODUCES),
        _bug("c", "c.py", NOT_REPRODUCED),
        _bug("d", "d.py", None),
        _bug("e", None),
    ]
    summary = summarize(bugs)
    assert summary.headline() == (
        "2 of 3 reproducers reproduce (1 not-reproduced); 1 not verified; 1 signature(s) without a reproducer"
    )
    assert [b.signature for b in summary.failing] == ["c"]


# ---- the store --------------------------------------------------------------------------------


def _crash(inst: OperatorInstance, signature: str, reproducer: str | None = None) -> TestResult:
    return TestResult(
        inst.id,
        inst.api,
        "tvm-onnx",
        Outcome.CRASH,
        Stage.CONVERT,
        signature=signature,
        reproducer=reproducer,
    )


def test_example_api_is_the_kept_reproducers_instance(tmp_path) -> None:
    """A signature shared by two operators (one converter): the smaller instance's reproducer
    replaces the first one's, and the example's api must be that instance's, not the first's."""
    big, small = _instance("onnx", "test_reduce_sum_keepdims_random"), _instance("onnx", "test_size_example")
    assert big.api != small.api
    sig = "crash:tvm-onnx:tvm/relax/frontend/onnx/onnx_frontend.py:_impl_v13:ValueError"
    with ResultStore(tmp_path / "s.db") as store:
        run = store.create_run({}, tool_version="x", versions={}, corpus=[], planned=[])
        store.add_result(run, _crash(big, sig, str(tmp_path / "r.py")), instance_size=500)
        store.add_result(run, _crash(small, sig, str(tmp_path / "r.py")), instance_size=100)
        (bug,) = store.bugs()
        assert (bug.example_instance, bug.example_api, bug.reproducer_size) == (small.id, small.api, 100)
        # a reproducer written later (the worker died): set_reproducer names the api too
        sig2 = "native-crash:other:onnx::ReduceSum:SIGSEGV"
        for inst in (small, big):  # the first result names the bug; neither has a script yet
            died = TestResult(inst.id, inst.api, "other", Outcome.NATIVE_CRASH, Stage.COMPILE, signature=sig2)
            store.add_result(run, died, instance_size=100)
        store.set_reproducer(run, big.id, "other", sig2, str(tmp_path / "n.py"), 100, api=big.api)
        bug2 = next(b for b in store.bugs() if b.signature == sig2)
        assert (bug2.example_instance, bug2.example_api) == (big.id, big.api)


def test_verdict_is_stored_and_reset_when_a_smaller_reproducer_replaces_it(tmp_path) -> None:
    inst = _instance("onnx", "test_size_example")
    sig = "crash:tvm-onnx:x.py:f:ValueError"
    with ResultStore(tmp_path / "s.db") as store:
        run = store.create_run({}, tool_version="x", versions={}, corpus=[], planned=[])
        store.add_result(run, _crash(inst, sig, "r.py"), instance_size=50)
        assert store.set_reproduction(
            sig,
            "r.py",
            50,
            status=REPRODUCES,
            detail="ValueError: x",
            exit_code=1,
            seconds=2.0,
            versions={"tvm": "1"},
        )
        (bug,) = store.bugs(run)
        assert (bug.repro_status, bug.repro_exit, bug.repro_versions) == (REPRODUCES, 1, {"tvm": "1"})
        # a verdict for a script the bug no longer keeps (same file name, other size) is dropped
        assert not store.set_reproduction(
            sig, "r.py", 999, status=NOT_REPRODUCED, detail="", exit_code=0, seconds=1.0, versions=None
        )
        other = _instance("onnx", "test_clip_example")
        store.add_result(run, _crash(other, sig, "r.py"), instance_size=10)
        (bug,) = store.bugs(run)
        assert bug.repro_status is None and bug.reproducer_size == 10 and bug.example_api == other.api


def test_a_version_2_store_is_migrated_without_losing_data(tmp_path) -> None:
    """Schema 2 -> 3 -> 4 -> 5 -> 6: the verification columns (3), the results' masked signature (4),
    the rules' outcome table (5) and the results' source test (6) are added, every row is kept, and a
    stored example api that was another instance's is corrected from the stored results."""
    assert SCHEMA_VERSION == 6
    path = tmp_path / "v2.db"
    small, big = _instance("onnx", "test_size_example"), _instance("onnx", "test_clip_example")
    db = sqlite3.connect(path)
    db.executescript(
        """CREATE TABLE runs (id INTEGER PRIMARY KEY AUTOINCREMENT, config TEXT NOT NULL, tool_version TEXT NOT NULL,
           versions TEXT NOT NULL, corpus TEXT NOT NULL, started REAL NOT NULL, ended REAL, status TEXT NOT NULL,
           owner TEXT NOT NULL DEFAULT '');
           CREATE TABLE planned (run INTEGER NOT NULL, seq INTEGER NOT NULL, instance_id TEXT NOT NULL,
           target TEXT NOT NULL, PRIMARY KEY (run, seq), UNIQUE (run, instance_id, target));
           CREATE TABLE results (id INTEGER PRIMARY KEY AUTOINCREMENT, run INTEGER NOT NULL, instance_id TEXT NOT NULL,
           api TEXT NOT NULL, target TEXT NOT NULL, outcome TEXT NOT NULL, stage TEXT NOT NULL, signature TEXT,
           distance REAL, duration REAL NOT NULL, message TEXT NOT NULL, reproducer TEXT, source_suite TEXT NOT NULL,
           finished REAL NOT NULL, UNIQUE (run, instance_id, target));
           CREATE TABLE bugs (signature TEXT PRIMARY KEY, target TEXT NOT NULL, outcome TEXT NOT NULL,
           first_run INTEGER NOT NULL, last_run INTEGER NOT NULL, count INTEGER NOT NULL,
           example_instance TEXT NOT NULL, example_api TEXT NOT NULL, reproducer TEXT, reproducer_size INTEGER);
           INSERT INTO runs (config, tool_version, versions, corpus, started, status)
           VALUES ('{"targets": ["tvm-onnx"]}', '0.0.9', '{}', '[]', 1.0, 'complete');
           PRAGMA user_version=2;"""
    )
    for inst in (big, small):
        db.execute(
            "INSERT INTO results (run, instance_id, api, target, outcome, stage, signature, duration, message, "
            "reproducer, source_suite, finished) VALUES (1, ?, ?, 'tvm-onnx', 'crash', 'convert', 's', 0.1, 'm', ?, "
            "'onnx-node-tests', 1.0)",
            (inst.id, inst.api, "r.py" if inst is small else None),
        )
    # the bug written by the old code: the small instance's reproducer, the big instance's api
    db.execute(
        "INSERT INTO bugs VALUES ('s', 'tvm-onnx', 'crash', 1, 1, 2, ?, ?, 'r.py', 10)", (small.id, big.api)
    )
    db.commit()
    db.close()
    with ResultStore(path) as store:
        assert store._db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        (bug,) = store.bugs()
        assert (bug.example_instance, bug.example_api, bug.count, bug.reproducer) == (
            small.id,
            small.api,
            2,
            "r.py",
        )
        assert (
            bug.repro_status is None
            and len(store.results(1)) == 2
            and store.runs()[0].tool_version == "0.0.9"
        )
        assert store.rule_counts(1) == {} and store.rule_results(1) == []
        assert [r.source_test for r in store.results(1)] == ["", ""]  # unknown for old rows


# ---- verifying: the run, opera bugs, nothing lost ----------------------------------------------


def test_run_verifies_reproducers_and_bugs_shows_the_status(tmp_path, capsys) -> None:
    corpus = write(tmp_path / "c.jsonl", relus(2) + [fault("segv", 1)])
    store = str(tmp_path / "opera.db")
    args = [
        "run",
        str(corpus),
        "-t",
        "test-wrong",
        "-t",
        "test-faults",
        "--store",
        store,
        "--workers",
        "2",
        "-q",
    ]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "2 of 2 reproducers reproduce" in out
    with ResultStore(store) as db:
        verdicts = {b.signature: (b.repro_status, b.repro_detail) for b in db.bugs()}
    assert verdicts["inconsistent:test-wrong:onnx::Relu"][0] == REPRODUCES
    assert verdicts["native-crash:test-faults:onnx::Relu:SIGSEGV"] == (REPRODUCES, "died by SIGSEGV")
    assert main(["bugs", "--store", store]) == 0
    listing = capsys.readouterr().out
    assert "    3  reproduces  inconsistent:test-wrong:onnx::Relu" in listing
    assert listing.rstrip().endswith("2 signature(s); 2 of 2 reproducers reproduce")


def test_no_verify_then_verify_pending_and_a_missing_script(tmp_path, capsys) -> None:
    corpus = write(tmp_path / "c.jsonl", relus(2) + [fault("raise", 1)])
    store = str(tmp_path / "opera.db")
    args = [
        "run",
        str(corpus),
        "-t",
        "test-wrong",
        "-t",
        "test-faults",
        "--store",
        store,
        "--workers",
        "1",
        "-q",
    ]
    assert main([*args, "--no-verify"]) == 0
    assert "not verified (--no-verify)" in capsys.readouterr().out
    assert main(["bugs", "--store", store]) == 0
    listing = capsys.readouterr().out
    assert "unverified" in listing and "--verify-pending" in listing
    with ResultStore(store) as db:
        crash = next(b for b in db.bugs() if b.outcome is Outcome.CRASH)
    Path(crash.reproducer).unlink()  # a script deleted since: "missing", not a crash of Opera
    assert main(["bugs", "--store", store, "--run", "1", "--verify-pending", "-q"]) == 0
    listing = capsys.readouterr().out
    assert "1 of 2 reproducers reproduce (1 missing)" in listing
    with ResultStore(store) as db:
        statuses = {b.signature: b.repro_status for b in db.bugs()}
    assert statuses == {"inconsistent:test-wrong:onnx::Relu": REPRODUCES, crash.signature: MISSING}


def test_hangs_memory_blowups_and_aborts_are_judged_as_the_run_judged_them(tmp_path, capsys) -> None:
    """The scripts run under the run's limits: a hang counts from the end of the imports (a slow
    import is not a hang), a script past the memory limit is killed (the run's "memory" native
    crash), a signal is a native crash."""
    corpus = write(tmp_path / "c.jsonl", [fault("hang", 0), fault("alloc@run", 1), fault("abort@compile", 2)])
    store = str(tmp_path / "opera.db")
    args = ["run", str(corpus), "-t", "test-faults", "--store", store, "--workers", "2", "--timeout", "4"]
    assert main([*args, "--max-rss", "400M", "-q"]) == 0
    assert "3 of 3 reproducers reproduce" in capsys.readouterr().out
    with ResultStore(store) as db:
        verdicts = {b.signature: (b.repro_status, b.repro_detail, b.repro_seconds) for b in db.bugs()}
    assert verdicts["native-crash:test-faults:onnx::Relu:memory"][:2] == (
        REPRODUCES,
        "killed: more than 400 MiB resident",
    )
    assert verdicts["native-crash:test-faults:onnx::Relu:SIGABRT"][:2] == (REPRODUCES, "died by SIGABRT")
    status, detail, seconds = verdicts["timeout:test-faults:onnx::Relu"]
    assert status == REPRODUCES and "hangs" in detail and seconds is not None
    assert 4 * HANG_CONFIRM_FACTOR <= seconds < 90  # confirmed over HANG_CONFIRM_FACTOR x the limit


def test_a_slow_test_is_not_confirmed_as_a_hang(tmp_path, capsys) -> None:
    """A test past the run's limit that ends given HANG_CONFIRM_FACTOR times that limit is slow, not
    hanging (judged HARNESS: TVM's TFLite frontend took 160 s on keras.layers.MelSpectrogram, then
    crashed; the 60 s limit made it a "hang"). The `lag` fault sleeps 6 s past a 4 s limit."""
    corpus = write(tmp_path / "c.jsonl", [fault("lag", 0)])
    store = str(tmp_path / "opera.db")
    assert main(["run", str(corpus), "-t", "test-faults", "--store", store, "--workers", "1", "--timeout", "4", "-q"]) == 0
    capsys.readouterr()
    with ResultStore(store) as db:
        (bug,) = db.bugs()
    assert bug.outcome == Outcome.TIMEOUT
    assert bug.repro_status == NOT_REPRODUCED, (bug.repro_status, bug.repro_detail)
    assert bug.repro_detail.startswith("slow, not a hang: finished after")
    assert bug.repro_seconds is not None and 4 < bug.repro_seconds < 4 * HANG_CONFIRM_FACTOR


def test_a_flaky_reproducer_is_run_again_and_says_how_often_it_fails(tmp_path, capsys, monkeypatch) -> None:
    """A failure on uninitialized memory shows on some runs only: a reproducer whose first run
    passes runs FLAKY_RUNS times in all. The `flaky` fault's script fails on runs 2 and 4 of 5."""
    monkeypatch.setenv("OPERA_TEST_FLAKY", str(tmp_path / "runs"))
    corpus = write(tmp_path / "c.jsonl", [fault("flaky", 0)])
    store = str(tmp_path / "opera.db")
    assert main(["run", str(corpus), "-t", "test-faults", "--store", store, "--workers", "1", "-q"]) == 0
    capsys.readouterr()
    with ResultStore(store) as db:
        (bug,) = db.bugs()
    assert bug.outcome == Outcome.NATIVE_CRASH
    assert (tmp_path / "runs").read_text() == str(FLAKY_RUNS)
    assert bug.repro_status == REPRODUCES, (bug.repro_status, bug.repro_detail)
    assert bug.repro_detail.startswith(f"flaky: reproduces 2 of {FLAKY_RUNS} runs")


def test_nightly_report_shows_whether_each_reproducer_reproduces(tmp_path) -> None:
    corpus = write(tmp_path / "c.jsonl", relus(2) + [fault("segv", 1)])
    out = tmp_path / "out"
    args = [
        "nightly",
        str(corpus),
        "-t",
        "test-wrong",
        "-t",
        "test-faults",
        "--store",
        str(tmp_path / "s.db"),
    ]
    assert main([*args, "--workers", "2", "-q", "-o", str(out)]) == 1  # new failures
    html = (out / "report.html").read_text()
    assert '<table id="reproducers">' in html and "<th>on its own</th>" in html
    assert "1 of 1 reproducers reproduce" in html
    junit = (out / "junit.xml").read_text()
    assert 'name="reproducers" value="1 of 1 reproducers reproduce"' in junit
    assert "reproducer on its own: reproduces (died by SIGSEGV)" in junit


def _verified(path: Path) -> int:
    db = sqlite3.connect(path)
    try:
        return int(db.execute("SELECT COUNT(*) FROM bugs WHERE repro_status IS NOT NULL").fetchone()[0])
    finally:
        db.close()


def test_an_interrupted_verification_keeps_the_verdicts_already_stored(tmp_path) -> None:
    inst = _instance("onnx", "test_size_example")
    with ResultStore(tmp_path / "s.db") as store:
        run = store.create_run({}, tool_version="x", versions={}, corpus=[], planned=[])
        for k in range(3):
            store.add_result(
                run,
                TestResult(
                    f"{inst.id}{k}",
                    inst.api,
                    "t",
                    Outcome.CRASH,
                    Stage.CONVERT,
                    signature=f"s{k}",
                    reproducer=f"r{k}.py",
                ),
                instance_size=10,
            )
        calls = []

        def runner(bug: BugRecord, timeout_s: float) -> Verification:
            calls.append(bug.signature)
            if len(calls) == 2:  # Ctrl-C (to the main thread) while the second script runs
                deadline = time.monotonic() + 10
                while time.monotonic() < deadline and not _verified(tmp_path / "s.db"):
                    time.sleep(0.05)  # (once the first verdict is stored)
                signal.raise_signal(signal.SIGINT)
                time.sleep(2.0)
            return Verification(bug.signature, bug.reproducer, bug.reproducer_size, REPRODUCES, "", 1, 0.1)

        done, interrupted = verify_bugs(
            store, store.bugs(run), timeout_s=5, workers=1, show_progress=False, runner=runner
        )
        assert (done, interrupted) == (1, True) and len(calls) == 2  # the third never started
        statuses = [b.repro_status for b in store.bugs(run)]
        assert statuses.count(REPRODUCES) == 1 and statuses.count(None) == 2


# ---- the causes of reproducers that did not show their failure ---------------------------------


def test_neg_inf_positions_are_compared(tmp_path) -> None:
    """ReduceLogSumExp of an empty set is -Inf everywhere (tvm-onnx returned uninitialized finite
    values). The script compared only NaN and +Inf positions: -Inf vs finite passed."""
    inst = _instance("onnx", "test_reduce_log_sum_exp_empty_set")
    garbage = (
        "outputs = [np.where(np.isneginf(e), np.float32(-87.47), e).astype(e.dtype) for e in EXPECTED]\n"
    )
    path = _script(inst, _Steps("tvm-onnx", garbage), tmp_path)
    proc = _run(path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "-Inf positions differ: reference 8, actual 0" in proc.stdout  # the oracle's own words
    # the same verdict as Opera's own oracle
    from opera.templates import get_template

    reference = get_template("onnx").reference(get_template("onnx").build(inst))
    actual = [np.where(np.isneginf(r), np.float32(-87.47), r) for r in reference]
    verdict = compare_outputs(reference, actual, load_oracle_config(), target="tvm-onnx")
    assert not verdict.consistent and "-Inf positions differ" in verdict.reason
    # matching -Inf positions are still ignored
    path = _script(inst, _Steps("tvm-onnx", "outputs = [e.copy() for e in EXPECTED]\n"), tmp_path)
    assert _run(path).returncode == 0


@pytest.mark.slow
def test_zero_d_arrays_stay_zero_d(tmp_path) -> None:
    """np.ascontiguousarray returns at least 1-d: ONNX Size's 0-d output was embedded as [1],
    so a passing test "reproduced" a shape mismatch (and 0-d inputs were fed 1-d)."""
    target = _target("tvm-onnx")
    inst = _instance("onnx", "test_size_example")
    path = _script(inst, target, tmp_path)
    proc = _run(path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "output 0: int64[] chebyshev distance 0" in proc.stdout
    scalar = _instance("onnx", "test_bitcast_scalar_float32_to_int32")  # a 0-d graph input
    text = _script(scalar, target, tmp_path).read_text()
    assert 'INPUTS = _arrays("""[{"dtype": "float32", "shape": [], ' in text


@pytest.mark.slow
def test_ov_inputs_are_fed_by_name(tmp_path) -> None:
    """OpenVINO drops CastLike's `target_type` input (only its dtype matters): the run feeds the
    one parameter by name, the script fed both inputs by position ("Input port for index 1 was
    not found"). Now a passing CastLike passes, and a failing one shows its own failure."""
    target = _target("ov-onnx")
    ok = _script(_instance("onnx", "test_castlike_FLOAT_to_FLOAT16"), target, tmp_path)
    proc = _run(ok)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    bad = _instance("onnx", "test_castlike_DOUBLE_to_FLOAT")  # +Inf where float64 overflows float32
    path = _script(bad, target, tmp_path)
    proc = _run(path)
    assert proc.returncode == 1 and "+Inf positions differ: reference 2, actual 0" in proc.stdout, proc.stderr
    bug = BugRecord(
        "inconsistent:ov-onnx:onnx::CastLike",
        "ov-onnx",
        Outcome.INCONSISTENT,
        1,
        1,
        1,
        bad.id,
        bad.api,
        str(path),
        1,
    )
    assert verify_bug(bug, 60).status == REPRODUCES


def test_string_tensors_round_trip(tmp_path) -> None:
    """ONNX string tensors are object arrays: their bytes were embedded as pointers ("cannot
    create an OBJECT array from memory buffer"); now their values are (UTF-8 and 0-d included)."""
    target = _target("test-drift")  # onnxruntime runs the embedded model: it must match
    for test in (
        "test_string_concat_utf8",
        "test_string_concat_zero_dimensional",
        "test_regex_full_match_basic",
    ):
        proc = _run(_script(_instance("onnx", test), target, tmp_path))
        assert proc.returncode == 0, (test, proc.stdout + proc.stderr)
    assert (
        "output 0: object[] chebyshev distance 0"
        in _run(_script(_instance("onnx", "test_string_concat_zero_dimensional"), target, tmp_path)).stdout
    )


@pytest.mark.slow
def test_keras_model_that_cannot_be_loaded_back_is_rebuilt(tmp_path) -> None:
    """keras.ops.associative_scan(f=operator.add): the saved .keras model does not load ("Expected
    'config' to be a dict for builtin_function_or_method"); the script rebuilds the call instead
    and shows the run's own OpenVINO conversion crash."""
    target = _target("ov-keras")
    from opera.run.execution import WorkerState, execute_task
    from opera.run.executors import TestTask, WorkerSettings

    inst = _instance(
        "keras",
        "keras/src/ops/core_test.py::CoreOpsStaticShapeTest::test_associative_scan_dynamic_scan_body_static_even_length",
    )
    # OpenVINO's "cannot be folded to Constant" is a coverage gap (ov-keras's unsupported_patterns);
    # with no unsupported patterns at all the same conversion failure is a crash that gets a reproducer
    no_gaps = tmp_path / "no-gaps.toml"
    no_gaps.write_text("target_patterns = false\n[common]\npatterns = []\n")
    state = WorkerState(WorkerSettings(reproducer_dir=str(tmp_path), unsupported_config=str(no_gaps)))
    outcome = execute_task(TestTask(0, inst, target.name), state, lambda stage: None)
    result = outcome.result
    assert result is not None and result.is_failure and outcome.reproducer, (
        result.outcome,
        result.message[-300:],
    )
    text = Path(outcome.reproducer).read_text()
    assert "spec = pickle.loads(ARTIFACT)" in text
    bug = BugRecord(
        result.signature, target.name, result.outcome, 1, 1, 1, inst.id, inst.api, outcome.reproducer, 1
    )
    verdict = verify_bug(bug, 120)
    assert verdict.status == REPRODUCES, verdict.detail


@pytest.mark.slow
def test_ov_keras_reproducers_feed_and_read_as_the_target(tmp_path) -> None:
    """Former ov-keras false alarms pass in the script as in the run: a bf16 input cast to the f32
    parameter, and only the declared outputs read (no dangling linspace result)."""
    target = _target("ov-keras")
    for test in (
        "keras/src/ops/numpy_test.py::NumpyDtypeTest::test_log_bfloat16",
        "keras/src/ops/numpy_test.py::NumpyDtypeTest::test_linspace_"
        "[array([0, 1], dtype=int32), array([10, 20], dtype=int32)]_0_float16",
    ):
        proc = _run(_script(_instance("keras", test), target, tmp_path))
        assert proc.returncode == 0, (test, proc.stdout[-500:] + proc.stderr[-1500:])


@pytest.mark.slow
def test_tvm_keras_reproducer_compiles_as_the_target(tmp_path) -> None:
    """Conv2DTranspose on tvm-keras: the default tvm.compile dies in VM codegen and the target
    compiles the layout-converted module instead (its inconsistency is judged there); the script
    compiled only the default way and showed the codegen crash instead of the wrong shape."""
    target = _target("tvm-keras")
    from opera.run.execution import WorkerState, execute_task
    from opera.run.executors import TestTask, WorkerSettings

    inst = _instance("keras", "f5da32fa21b81f187a75")
    state = WorkerState(WorkerSettings(reproducer_dir=str(tmp_path)))
    outcome = execute_task(TestTask(0, inst, target.name), state, lambda stage: None)
    result = outcome.result
    assert result is not None and result.outcome is Outcome.INCONSISTENT and outcome.reproducer
    bug = BugRecord(
        result.signature, target.name, result.outcome, 1, 1, 1, inst.id, inst.api, outcome.reproducer, 1
    )
    verdict = verify_bug(bug, 120)
    assert verdict.status == REPRODUCES and "shape (2, 7, 7, 2) vs (2, 5, 5, 2)" in verdict.detail, (
        verdict.detail
    )


def test_a_script_keeps_pythonpath_under_pythonsafepath(tmp_path) -> None:
    """Under PYTHONSAFEPATH (how a checkout runs an installed Opera without its own folder shadowing
    it), sys.path[0] is PYTHONPATH's first entry: the wrapper must add the script's folder, not put
    it in that entry's place (a GPU machine's wheel install lost Opera there: no exception signed)."""
    from opera.reproduce.verify import _environment, run_reproducer

    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "opera_pythonpath_probe.py").write_text("VALUE = 7\n")
    (tmp_path / "beside.py").write_text("NEAR = 3\n")
    script = tmp_path / "repro.py"
    script.write_text(
        "import opera_pythonpath_probe, beside\n"
        "print('sum', opera_pythonpath_probe.VALUE + beside.NEAR)\n"
        "raise RuntimeError('boom')\n"
    )
    env = _environment() | {"PYTHONSAFEPATH": "1", "PYTHONPATH": str(lib)}
    run = run_reproducer(script, "test-faults", 30.0, env=env)
    assert "sum 10" in run.stdout, run.stderr
    assert run.exit_code == 1
    assert run.raised is not None and run.raised["exception"] == "RuntimeError: boom"
