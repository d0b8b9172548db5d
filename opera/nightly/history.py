"""Nightly runs in the store: how they are tagged, found again, and how an old store is opened.

A nightly is one ``opera run`` per target (each target has its own prioritized order and budget
share). Every such run stores ``"nightly": N`` in its config JSON (``NightlyRunConfig``), N
counting nightlies in this store from 1, so the next nightly finds the previous one of each
target without a schema change; the compiler and library versions are in each run's ``versions``
column already (``versions[target]``).
"""

from __future__ import annotations

import shutil
import sqlite3
from dataclasses import dataclass
from pathlib import Path

from opera.errors import OperaError
from opera.run.runner import RunConfig
from opera.store import SCHEMA_VERSION, ResultStore, RunRecord, StoreError

__all__ = ["NightlyRunConfig", "next_nightly_number", "open_store", "previous_nightly_run"]


@dataclass
class NightlyRunConfig(RunConfig):
    """A run's config plus the number of the nightly it belongs to (stored with the run)."""

    nightly: int = 0


def nightly_number(run: RunRecord) -> int | None:
    value = run.config.get("nightly")
    return int(value) if isinstance(value, int) and value > 0 else None


def next_nightly_number(store: ResultStore) -> int:
    numbers = [n for n in (nightly_number(r) for r in store.runs()) if n is not None]
    return max(numbers, default=0) + 1


def previous_nightly_run(store: ResultStore, target: str, before: int) -> RunRecord | None:
    """The latest run of ``target`` in a nightly numbered below ``before`` (None: first night)."""
    found: RunRecord | None = None
    for run in store.runs():
        number = nightly_number(run)
        if number is not None and number < before and run.config.get("targets") == [target]:
            found = run  # runs() is in id order: the last match is the latest
    return found


def open_store(path: str | Path) -> tuple[ResultStore, list[str]]:
    """Open (or create) the store; an older schema is migrated after a backup copy is made.

    Returns the store and the notes to print. A store this Opera cannot read or migrate is left
    untouched and refused with what to do about it.
    """
    p = Path(path)
    notes: list[str] = []
    version, tables = _schema(p) if p.exists() else (None, False)
    # Refused before ResultStore opens it: opening switches the file to WAL mode, a change.
    if version is not None and version > SCHEMA_VERSION:
        raise OperaError(
            f"{p} has store schema version {version}, newer than this Opera's {SCHEMA_VERSION}: "
            "upgrade Opera (pip install -e . in a newer checkout); the store was not changed"
        )
    if version == 0 and tables:
        raise OperaError(
            f"{p} is an SQLite file but not an Opera store (no schema version); "
            "name another file with --store; this one was not changed"
        )
    backup: Path | None = None
    if version is not None and 0 < version < SCHEMA_VERSION:
        backup = p.with_name(f"{p.name}.schema-v{version}.bak")
        _backup(p, backup)
    existed = p.exists()
    if not existed:  # a first night in a new folder: create it, as the report folder is created
        try:
            p.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise OperaError(f"cannot create the store's folder {p.parent}: {exc.strerror}") from None
    try:
        store = ResultStore(p)
    except StoreError as exc:
        if not existed:
            raise OperaError(str(exc)) from None
        kept = f"; a copy of the original is at {backup}" if backup is not None else ""
        raise OperaError(
            f"{exc}. This Opera cannot migrate it: keep it for the Opera that wrote it and start a new "
            f"store with --store NEW.db (the first nightly there has nothing to compare with){kept}"
        ) from None
    if backup is not None:
        notes.append(
            f"note: migrated {p} from store schema version {version} to {SCHEMA_VERSION}; "
            f"the original is kept as {backup}"
        )
    return store, notes


def _schema(path: Path) -> tuple[int, bool]:
    """(PRAGMA user_version, whether it holds any table), read-only."""
    try:
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30)
        try:
            version = int(db.execute("PRAGMA user_version").fetchone()[0])
            tables = db.execute("SELECT COUNT(*) FROM sqlite_master WHERE type='table'").fetchone()[0]
            return version, bool(tables)
        finally:
            db.close()
    except sqlite3.DatabaseError as exc:
        raise OperaError(f"{path}: not an Opera store ({exc}); the file was not changed") from None


def _backup(src: Path, dst: Path) -> None:
    """A consistent copy of a (possibly WAL-mode) SQLite file, through SQLite's backup API."""
    if dst.exists():
        return  # an earlier attempt's backup of the same version: keep the first one
    source = sqlite3.connect(f"file:{src}?mode=ro", uri=True, timeout=30)
    try:
        target = sqlite3.connect(dst)
        try:
            source.backup(target)
        finally:
            target.close()
    except sqlite3.DatabaseError as exc:
        dst.unlink(missing_ok=True)
        raise OperaError(
            f"{src}: could not back it up before migrating ({exc}); nothing was changed"
        ) from None
    finally:
        source.close()
    shutil.copymode(src, dst)
