"""The SQLite results store: runs, planned tests, results, bugs, schema versioning."""

from __future__ import annotations

import math
import sqlite3

import pytest

from opera.outcomes import Outcome, Stage, TestResult
from opera.store import SCHEMA_VERSION, ResultStore, StoreError


def _result(
    iid: str, target: str = "t", outcome: Outcome = Outcome.PASS, sig: str | None = None, **kw
) -> TestResult:
    return TestResult(
        instance_id=iid,
        api="onnx::Relu",
        target=target,
        outcome=outcome,
        stage=Stage.COMPARE,
        signature=sig,
        **kw,
    )


def test_run_results_and_pending_roundtrip(tmp_path) -> None:
    with ResultStore(tmp_path / "s.db") as store:
        run = store.create_run(
            {"seed": 0},
            tool_version="x",
            versions={"tvm": "1"},
            corpus=["c.jsonl"],
            planned=[("a", "t"), ("b", "t"), ("c", "t")],
        )
        assert [p.instance_id for p in store.pending(run)] == ["a", "b", "c"]
        store.add_result(run, _result("b", distance=math.inf, duration=0.5, message="m"))
        assert [p.instance_id for p in store.pending(run)] == ["a", "c"]
        (back,) = store.results(run)
        assert back.instance_id == "b" and back.distance == math.inf and back.outcome is Outcome.PASS
        assert store.get_run(run).config == {"seed": 0}
        assert store.outcome_counts(run) == {"t": {"pass": 1}}
        store.add_result(run, _result("a"))
        ranked = store.results_in_plan_order(run)
        assert [(r.seq, r.result.instance_id) for r in ranked] == [(0, "a"), (1, "b")]
        assert ranked[0].finished >= ranked[1].finished  # "a" finished after "b"


def test_duplicate_result_is_refused(tmp_path) -> None:
    with ResultStore(tmp_path / "s.db") as store:
        run = store.create_run({}, tool_version="x", versions={}, corpus=[], planned=[("a", "t")])
        store.add_result(run, _result("a"))
        with pytest.raises(StoreError, match="already has a result"):
            store.add_result(run, _result("a"))
        assert len(store.results(run)) == 1


def test_bugs_are_counted_per_signature_with_smallest_reproducer(tmp_path) -> None:
    with ResultStore(tmp_path / "s.db") as store:
        run = store.create_run({}, tool_version="x", versions={}, corpus=[], planned=[])
        assert store.add_result(run, _result("a", outcome=Outcome.CRASH, sig="S1"))
        assert not store.add_result(run, _result("b", outcome=Outcome.CRASH, sig="S1"))
        assert store.add_result(run, _result("c", outcome=Outcome.INCONSISTENT, sig="S2"))
        assert not store.add_result(run, _result("d", outcome=Outcome.UNSUPPORTED, sig="U"))  # not a bug
        assert store.wants_reproducer("S1", 100)
        store.set_reproducer(run, "a", "t", "S1", "/r/big.py", 100)
        assert not store.wants_reproducer("S1", 200) and store.wants_reproducer("S1", 50)
        store.set_reproducer(run, "b", "t", "S1", "/r/small.py", 50)
        store.set_reproducer(run, "a", "t", "S1", "/r/bigger.py", 300)  # not smaller: kept
        bugs = {b.signature: b for b in store.bugs()}
        assert set(bugs) == {"S1", "S2"}
        assert (
            bugs["S1"].count == 2
            and bugs["S1"].reproducer == "/r/small.py"
            and bugs["S1"].example_instance == "b"
        )
        run2 = store.create_run({}, tool_version="x", versions={}, corpus=[], planned=[])
        store.add_result(run2, _result("a", outcome=Outcome.CRASH, sig="S1"))
        assert [b.signature for b in store.bugs(run2)] == ["S1"]
        assert {b.signature: b for b in store.bugs()}["S1"].last_run == run2


def test_other_schema_version_is_refused(tmp_path) -> None:
    path = tmp_path / "s.db"
    ResultStore(path).close()
    db = sqlite3.connect(path)
    db.execute("PRAGMA user_version=99")
    db.commit()
    db.close()
    with pytest.raises(StoreError, match="schema version 99"):
        ResultStore(path)
    (tmp_path / "junk.db").write_bytes(b"not a database at all" * 100)
    with pytest.raises(StoreError):
        ResultStore(tmp_path / "junk.db")


def test_wal_mode(tmp_path) -> None:
    with ResultStore(tmp_path / "s.db") as store:
        assert store._db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_a_run_still_owned_by_a_live_process_cannot_be_claimed(tmp_path) -> None:
    import socket
    import subprocess

    from opera.store import _process_start

    with ResultStore(tmp_path / "s.db") as store:
        run = store.create_run({}, tool_version="x", versions={}, corpus=[], planned=[])
        store.claim_run(run)  # its own owner may resume it
        other = subprocess.Popen(["sleep", "30"])
        try:
            owner = f"{socket.gethostname()}:{other.pid}:{_process_start(other.pid)}"
            store._db.execute("UPDATE runs SET owner=? WHERE id=?", (owner, run))
            with pytest.raises(StoreError, match="still running"):
                store.claim_run(run)
        finally:
            other.kill()
            other.wait()
        store.claim_run(run)  # the owner is gone: resumable
        assert store.get_run(run).status == "running"


def test_a_version_1_store_is_migrated(tmp_path) -> None:
    path = tmp_path / "s.db"
    with ResultStore(path) as store:
        run = store.create_run({"seed": 3}, tool_version="x", versions={}, corpus=[], planned=[("a", "t")])
    db = sqlite3.connect(path)
    db.execute("ALTER TABLE runs DROP COLUMN owner")  # the version 1 layout
    for column in ("repro_status", "repro_detail", "repro_exit", "repro_seconds", "repro_checked", "repro_versions"):
        db.execute(f"ALTER TABLE bugs DROP COLUMN {column}")  # (added by version 3)
    db.execute("ALTER TABLE results DROP COLUMN masked_signature")  # (added by version 4)
    db.execute("ALTER TABLE results DROP COLUMN source_test")  # (added by version 6)
    db.execute("PRAGMA user_version=1")
    db.commit()
    db.close()
    with ResultStore(path) as store:
        assert store._db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        assert store.get_run(run).config == {"seed": 3}
        store.claim_run(run)
        assert [p.instance_id for p in store.pending(run)] == ["a"]
