"""Opening an older store migrates it after a backup, whichever command opens it (the store owns
this; `opera nightly` used to be the only path that made a copy)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from _run_fixtures import relus, write

from opera.cli import main
from opera.outcomes import Outcome, Stage, TestResult
from opera.store import SCHEMA_VERSION, ResultStore, backup_path


def _version_1_store(path: Path) -> None:
    """A store as Opera wrote it at schema version 1: one complete run with a bug, then the
    columns later versions added dropped (the layout test_store.py checks the migration on)."""
    with ResultStore(path) as store:
        run = store.create_run(
            {"seed": 3}, tool_version="0.0.9", versions={}, corpus=[], planned=[("a", "test-wrong")]
        )
        result = TestResult(
            "a", "onnx::Relu", "test-wrong", Outcome.CRASH, Stage.CONVERT, signature="old-sig"
        )
        store.add_result(run, result)
        store.set_run_status(run, "complete")
    db = sqlite3.connect(path)
    db.execute("ALTER TABLE runs DROP COLUMN owner")
    for column in (
        "repro_status",
        "repro_detail",
        "repro_exit",
        "repro_seconds",
        "repro_checked",
        "repro_versions",
    ):
        db.execute(f"ALTER TABLE bugs DROP COLUMN {column}")
    db.execute("ALTER TABLE results DROP COLUMN masked_signature")
    db.execute("ALTER TABLE results DROP COLUMN source_test")
    db.execute("PRAGMA user_version=1")
    db.commit()
    db.execute("PRAGMA journal_mode=DELETE")  # one self-contained file, as an old Opera left it
    db.close()


def _content(path: Path) -> tuple[int, list[str]]:
    """(schema version, SQL dump) of an SQLite file, read-only."""
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return db.execute("PRAGMA user_version").fetchone()[0], list(db.iterdump())
    finally:
        db.close()


def _columns(db: sqlite3.Connection, table: str) -> set[str]:
    return {row[1] for row in db.execute(f"PRAGMA table_info({table})")}


def test_opera_run_backs_an_old_store_up_once_then_migrates_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert SCHEMA_VERSION > 1
    store = tmp_path / "opera.db"
    _version_1_store(store)
    corpus = write(tmp_path / "c.jsonl", relus(2))
    args = ["run", str(corpus), "-t", "test-wrong", "--store", str(store), "--workers", "1", "-q"]
    assert main(args) == 0
    err = capsys.readouterr().err
    backup = backup_path(store, 1)
    assert backup == tmp_path / "opera.db.schema-v1.bak"
    assert f"migrated {store} from store schema version 1 to {SCHEMA_VERSION}" in err and str(backup) in err
    # the backup is the old store as it was: version 1, its layout, its run
    old = sqlite3.connect(f"file:{backup}?mode=ro", uri=True)
    assert old.execute("PRAGMA user_version").fetchone()[0] == 1
    assert "owner" not in _columns(old, "runs") and "masked_signature" not in _columns(old, "results")
    assert old.execute("SELECT tool_version FROM runs").fetchall() == [("0.0.9",)]
    old.close()
    kept = backup.read_bytes()
    # the migrated store holds the old run and the new one, and every command works on it
    with ResultStore(store) as db:
        assert db._db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        runs = db.runs()
        assert [r.tool_version for r in runs][0] == "0.0.9" and runs[1].status == "complete"
        assert {b.signature for b in db.bugs(1)} == {"old-sig"}
        assert {r.outcome for r in db.results(2)} == {Outcome.INCONSISTENT}
    assert main(["bugs", "--store", str(store)]) == 0
    out, err = capsys.readouterr()
    assert "old-sig" in out and "migrated" not in err  # once: the second open has nothing to migrate
    assert main(args) == 0
    assert "migrated" not in capsys.readouterr().err
    assert backup.read_bytes() == kept
    assert sorted(p.name for p in tmp_path.glob("opera.db.*bak*")) == [backup.name]


def test_opera_bugs_backs_up_too_and_keeps_an_earlier_copy(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "s.db"
    _version_1_store(store)
    original = _content(store)
    assert main(["bugs", "--store", str(store)]) == 0
    assert "old-sig" in capsys.readouterr().out
    assert _content(backup_path(store, 1)) == original  # a copy of the store as it was
    assert _content(store) != original
    kept = backup_path(store, 1).read_bytes()
    # a second version-1 store at the same path: the first backup of that version is kept
    store.unlink()
    for extra in ("-wal", "-shm"):
        Path(f"{store}{extra}").unlink(missing_ok=True)
    _version_1_store(store)
    with ResultStore(store, notify=lambda note: None) as db:
        assert db.migrated_from == 1
    assert backup_path(store, 1).read_bytes() == kept


def test_a_store_this_opera_cannot_use_is_refused_unchanged(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    corpus = write(tmp_path / "c.jsonl", relus(1))
    newer = tmp_path / "newer.db"
    _version_1_store(newer)
    db = sqlite3.connect(newer)
    db.execute("PRAGMA user_version=99")
    db.commit()
    db.close()
    other = tmp_path / "other.db"
    db = sqlite3.connect(other)
    db.execute("CREATE TABLE t (x)")
    db.commit()
    db.close()
    for path, expected in ((newer, "schema version 99 is newer"), (other, "not an Opera store")):
        before = path.read_bytes()
        for argv in (
            ["run", str(corpus), "-t", "test-wrong", "--store", str(path), "-q"],
            ["bugs", "--store", str(path)],
        ):
            assert main(argv) == 2
            err = capsys.readouterr().err.strip().splitlines()
            assert len(err) == 1 and expected in err[0] and "not changed" in err[0], err
            assert path.read_bytes() == before
            assert not list(tmp_path.glob(f"{path.name}.*bak*"))
