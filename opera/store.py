"""The results store: one SQLite file (docs/design.md, The store).

Tables:

- ``runs``: one row per ``opera run`` (config JSON, tool/library/compiler versions, corpus files,
  start/end, status).
- ``planned``: the tests a run means to execute, in order (``seq``), written once when the run
  starts. ``--resume`` runs exactly the planned tests that have no result yet, so a resumed run
  neither loses nor repeats a test even if the corpus order or the flags changed meanwhile.
- ``results``: one row per finished test, ``UNIQUE(run, instance_id, target)``.
- ``bugs``: one row per bug signature across runs (first/last run, count, the smallest reproducer,
  and whether that reproducer, re-run on its own in a fresh process, shows the failure:
  ``repro_status``, see ``opera.reproduce.verify``; NULL until verified, reset when a smaller
  reproducer replaces it).

WAL journal, one transaction per result (the result row and its bug row commit together, so a
SIGKILL at any moment leaves both consistent). ``PRAGMA user_version`` holds ``SCHEMA_VERSION``.
Opening a store of an older version migrates it, whoever opens it (``opera run``, ``bugs``,
``report``, ``nightly``): first a copy of the file as it was goes to ``<store>.schema-v<N>.bak``
(once: an existing copy of that version is kept), then the migration runs in one transaction. A
store of a newer version, or an SQLite file that is not a store, is refused with a clear error and
left unchanged. Pure stdlib ``sqlite3``.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import shutil
import socket
import sqlite3
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from opera.errors import OperaError
from opera.outcomes import FAILURE_OUTCOMES, Outcome, Stage, TestResult

__all__ = [
    "SCHEMA_VERSION",
    "BugRecord",
    "PlannedTest",
    "RankedResult",
    "ResultStore",
    "RuleRecord",
    "RunRecord",
    "StoreError",
    "backup_path",
]

SCHEMA_VERSION = 6

# One row per (test, rule) of the oracles beside the reference (opera.run.rules).
_RULE_RESULTS = """CREATE TABLE IF NOT EXISTS rule_results (
    run INTEGER NOT NULL REFERENCES runs(id),
    instance_id TEXT NOT NULL,
    target TEXT NOT NULL,
    rule TEXT NOT NULL,
    outcome TEXT NOT NULL,
    signature TEXT,
    distance REAL,
    duration REAL NOT NULL,
    message TEXT NOT NULL,
    PRIMARY KEY (run, instance_id, target, rule)
);
CREATE INDEX IF NOT EXISTS rule_results_by_signature ON rule_results(signature);
"""

# Migrations from an older schema version to the next one (applied in order, in one transaction).
_MIGRATIONS: dict[int, str] = {
    1: "ALTER TABLE runs ADD COLUMN owner TEXT NOT NULL DEFAULT '';",  # 1 -> 2: run ownership
    # 2 -> 3: reproducer verification; and the example's api is the api of the example instance
    # (it was the first result's api, kept when a smaller instance's reproducer replaced it)
    2: """ALTER TABLE bugs ADD COLUMN repro_status TEXT;
ALTER TABLE bugs ADD COLUMN repro_detail TEXT NOT NULL DEFAULT '';
ALTER TABLE bugs ADD COLUMN repro_exit INTEGER;
ALTER TABLE bugs ADD COLUMN repro_seconds REAL;
ALTER TABLE bugs ADD COLUMN repro_checked REAL;
ALTER TABLE bugs ADD COLUMN repro_versions TEXT;
UPDATE bugs SET example_api = COALESCE((SELECT r.api FROM results r WHERE r.signature = bugs.signature
    AND r.instance_id = bugs.example_instance ORDER BY r.id LIMIT 1), example_api);
""",
    # 3 -> 4: a crash of the target's default pipeline that a fallback pipeline worked around
    # (tvm-keras ConvertLayout): kept with the result, and a bug of its own
    3: "ALTER TABLE results ADD COLUMN masked_signature TEXT;",
    # 4 -> 5: the outcome of each metamorphic/differential rule on a test (opera.run.rules)
    4: _RULE_RESULTS,
    # 5 -> 6: the source test of each result (`opera bugs` names the tests a signature came from)
    5: "ALTER TABLE results ADD COLUMN source_test TEXT NOT NULL DEFAULT '';",
}


def _migratable(version: int) -> bool:
    return all(v in _MIGRATIONS for v in range(version, SCHEMA_VERSION))


_SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    config TEXT NOT NULL,
    tool_version TEXT NOT NULL,
    versions TEXT NOT NULL,
    corpus TEXT NOT NULL,
    started REAL NOT NULL,
    ended REAL,
    status TEXT NOT NULL,
    owner TEXT NOT NULL DEFAULT ''
);
CREATE TABLE IF NOT EXISTS planned (
    run INTEGER NOT NULL REFERENCES runs(id),
    seq INTEGER NOT NULL,
    instance_id TEXT NOT NULL,
    target TEXT NOT NULL,
    PRIMARY KEY (run, seq),
    UNIQUE (run, instance_id, target)
);
CREATE TABLE IF NOT EXISTS results (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    run INTEGER NOT NULL REFERENCES runs(id),
    instance_id TEXT NOT NULL,
    api TEXT NOT NULL,
    target TEXT NOT NULL,
    outcome TEXT NOT NULL,
    stage TEXT NOT NULL,
    signature TEXT,
    distance REAL,
    duration REAL NOT NULL,
    message TEXT NOT NULL,
    reproducer TEXT,
    source_suite TEXT NOT NULL,
    finished REAL NOT NULL,
    masked_signature TEXT,
    source_test TEXT NOT NULL DEFAULT '',
    UNIQUE (run, instance_id, target)
);
CREATE INDEX IF NOT EXISTS results_by_signature ON results(signature);
""" + _RULE_RESULTS + """CREATE TABLE IF NOT EXISTS bugs (
    signature TEXT PRIMARY KEY,
    target TEXT NOT NULL,
    outcome TEXT NOT NULL,
    first_run INTEGER NOT NULL,
    last_run INTEGER NOT NULL,
    count INTEGER NOT NULL,
    example_instance TEXT NOT NULL,
    example_api TEXT NOT NULL,
    reproducer TEXT,
    reproducer_size INTEGER,
    repro_status TEXT,
    repro_detail TEXT NOT NULL DEFAULT '',
    repro_exit INTEGER,
    repro_seconds REAL,
    repro_checked REAL,
    repro_versions TEXT
);
"""

_RUN_COLUMNS = "id, config, tool_version, versions, corpus, started, ended, status"
_REPRO_COLUMNS = "repro_status, repro_detail, repro_exit, repro_seconds, repro_checked, repro_versions"

RUN_RUNNING = "running"
RUN_COMPLETE = "complete"
RUN_BUDGET = "budget-exhausted"
RUN_INTERRUPTED = "interrupted"


def current_owner() -> str:
    """``host:pid:start-time`` of this process (the start time tells a reused pid apart)."""
    return f"{socket.gethostname()}:{os.getpid()}:{_process_start(os.getpid())}"


def _process_start(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return "?"


def _owner_alive(owner: str) -> bool:
    host, _, rest = owner.partition(":")
    pid_text, _, start = rest.partition(":")
    if host != socket.gethostname() or not pid_text.isdigit():
        return False  # another machine: cannot tell; a resumed run there is the user's call
    return _process_start(int(pid_text)) == start and start != "?"


class StoreError(OperaError):
    """A store file that cannot be used (other schema version, not SQLite, ...)."""


@dataclass(frozen=True)
class RunRecord:
    id: int
    config: dict[str, Any]
    tool_version: str
    versions: dict[str, Any]
    corpus: list[str]
    started: float
    ended: float | None
    status: str


@dataclass(frozen=True)
class PlannedTest:
    seq: int
    instance_id: str
    target: str


@dataclass(frozen=True)
class RankedResult:
    seq: int  # position in the run's planned (prioritized) order, from 0
    finished: float  # UNIX time the result was stored
    result: TestResult


@dataclass(frozen=True)
class BugRecord:
    signature: str
    target: str
    outcome: Outcome
    first_run: int
    last_run: int
    count: int
    example_instance: str
    example_api: str
    reproducer: str | None
    reproducer_size: int | None
    # the reproducer re-run on its own (opera.reproduce.verify): None = not verified yet
    repro_status: str | None = None
    repro_detail: str = ""
    repro_exit: int | None = None  # exit status (negative: the signal), None for a hang
    repro_seconds: float | None = None
    repro_checked: float | None = None  # UNIX time of the verification
    repro_versions: dict[str, Any] | None = None  # the target's versions it was verified with


@dataclass
class RuleRecord:
    """One metamorphic/differential rule's outcome on one test (``rule_results``)."""

    instance_id: str
    target: str
    rule: str
    outcome: str
    signature: str | None
    distance: float | None
    duration: float
    message: str


def _encode_distance(distance: float | None) -> float | None:
    # SQLite stores +inf as a REAL; NaN would become NULL silently, so it is refused here.
    if distance is not None and math.isnan(distance):
        return None
    return distance


def backup_path(store: str | Path, version: int) -> Path:
    """Where the copy of a version-``version`` store is kept before it is migrated."""
    p = Path(store)
    return p.with_name(f"{p.name}.schema-v{version}.bak")


def _print_note(note: str) -> None:
    print(note, file=sys.stderr)


def _peek_schema(path: Path) -> tuple[int, bool]:
    """(PRAGMA user_version, whether it holds any table), read-only: nothing in the file changes."""
    try:
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30.0)
        try:
            version = int(db.execute("PRAGMA user_version").fetchone()[0])
            tables = db.execute("SELECT COUNT(*) FROM sqlite_master WHERE type='table'").fetchone()[0]
            return version, bool(tables)
        finally:
            db.close()
    except sqlite3.DatabaseError as exc:
        raise StoreError(f"{path}: not a usable Opera store ({exc}); the file was not changed") from None


def _backup(src: Path, dst: Path, version: int) -> None:
    """A consistent copy of a (possibly WAL-mode) SQLite file through SQLite's backup API, put in
    place only if ``dst`` does not exist yet (a concurrent opener's copy, or an earlier one of the
    same version, is kept) and only if it still holds ``version`` (not a store migrated meanwhile)."""
    if dst.exists():
        return
    tmp = dst.with_name(f"{dst.name}.tmp{os.getpid()}")
    try:
        source = sqlite3.connect(f"file:{src}?mode=ro", uri=True, timeout=30.0)
        try:
            target = sqlite3.connect(tmp)
            try:
                source.backup(target)
                copied = int(target.execute("PRAGMA user_version").fetchone()[0])
            finally:
                target.close()
        finally:
            source.close()
        shutil.copymode(src, tmp)
        if copied == version:
            with contextlib.suppress(FileExistsError):
                os.link(tmp, dst)  # never replaces an existing copy
    except (sqlite3.DatabaseError, OSError) as exc:
        raise StoreError(
            f"{src}: could not back it up before migrating ({exc}); nothing was changed"
        ) from None
    finally:
        tmp.unlink(missing_ok=True)


def _statements(script: str) -> list[str]:
    """The SQL statements of a migration script, one by one (``executescript`` would commit the
    transaction the migration runs in)."""
    statements: list[str] = []
    pending = ""
    for line in script.splitlines(keepends=True):
        pending += line
        if sqlite3.complete_statement(pending):
            statements.append(pending.strip())
            pending = ""
    if pending.strip():
        raise ValueError(f"incomplete SQL statement in a migration: {pending.strip()!r}")
    return statements


class ResultStore:
    """Open (creating if needed) the store at ``path``. Use as a context manager or ``close()``.

    A store of an older schema version is backed up (``backup_path``) and migrated; ``notify``
    gets the one-line note saying so (default: printed to stderr, so that every command that
    opens a store tells its user where the original went). ``migrated_from`` is the version this
    open migrated from (None: no migration).
    """

    def __init__(self, path: str | Path, *, notify: Callable[[str], None] | None = None) -> None:
        self.path = Path(path)
        self.migrated_from: int | None = None
        if self.path.parent and not self.path.parent.exists():
            raise StoreError(f"store directory does not exist: {self.path.parent}")
        old_version = self._check_before_opening()
        if old_version is not None:
            _backup(self.path, backup_path(self.path, old_version), old_version)
        try:
            self._db = sqlite3.connect(self.path, timeout=30.0, isolation_level=None)
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"{self.path}: not a usable Opera store ({exc})") from None
        try:
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.execute("PRAGMA foreign_keys=ON")
            self._init_schema()
        except sqlite3.DatabaseError as exc:
            self._db.close()
            raise StoreError(f"{self.path}: not a usable Opera store ({exc})") from None
        except BaseException:
            self._db.close()
            raise
        if self.migrated_from is not None:
            (notify or _print_note)(
                f"note: migrated {self.path} from store schema version {self.migrated_from} to "
                f"{SCHEMA_VERSION}; the original is kept as {backup_path(self.path, self.migrated_from)}"
            )

    # ---- lifecycle --------------------------------------------------------------------------
    def _check_before_opening(self) -> int | None:
        """Refuse, before anything is written (opening switches the file to WAL mode), a file this
        Opera cannot use; return the version of a store that is to be migrated (None: none)."""
        if not self.path.exists():
            return None
        version, tables = _peek_schema(self.path)
        if version > SCHEMA_VERSION:
            raise StoreError(
                f"{self.path}: store schema version {version} is newer than this Opera's "
                f"{SCHEMA_VERSION}: upgrade Opera; the store was not changed"
            )
        if version == 0 and tables:
            raise StoreError(
                f"{self.path}: an SQLite file but not an Opera store (no schema version); "
                "use another file (--store); this one was not changed"
            )
        if 0 < version < SCHEMA_VERSION and not _migratable(version):
            raise StoreError(
                f"{self.path}: store schema version {version}, which this Opera cannot migrate to "
                f"{SCHEMA_VERSION}: start a new store file; this one was not changed"
            )
        return version if 0 < version < SCHEMA_VERSION else None

    def _init_schema(self) -> None:
        version = self._db.execute("PRAGMA user_version").fetchone()[0]
        tables = {r[0] for r in self._db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        if version == 0 and not (tables - {"sqlite_sequence"}):
            self._db.executescript("BEGIN;" + _SCHEMA + f"PRAGMA user_version={SCHEMA_VERSION};COMMIT;")
            return
        if 0 < version < SCHEMA_VERSION and _migratable(version):
            self._migrate()
            return
        if version != SCHEMA_VERSION:
            raise StoreError(
                f"{self.path}: store schema version {version}, this Opera reads version {SCHEMA_VERSION}"
                + ("; upgrade Opera" if version > SCHEMA_VERSION else "; start a new store file")
            )

    def _migrate(self) -> None:
        """Migrate to ``SCHEMA_VERSION`` in one write transaction; the version is read again under
        the write lock, so two processes opening the same old store migrate it once."""
        with self._transaction():
            version = self._db.execute("PRAGMA user_version").fetchone()[0]
            if version >= SCHEMA_VERSION:
                return  # another process migrated it meanwhile
            for v in range(version, SCHEMA_VERSION):
                for statement in _statements(_MIGRATIONS[v]):
                    self._db.execute(statement)
            self._db.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
        self.migrated_from = version

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> ResultStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- runs -------------------------------------------------------------------------------
    def create_run(
        self,
        config: dict[str, Any],
        *,
        tool_version: str,
        versions: dict[str, Any],
        corpus: Sequence[str],
        planned: Iterable[tuple[str, str]],
    ) -> int:
        """Insert the run and its planned (instance_id, target) tests in one transaction."""
        with self._transaction():
            cur = self._db.execute(
                "INSERT INTO runs (config, tool_version, versions, corpus, started, status, owner) VALUES (?,?,?,?,?,?,?)",
                (
                    json.dumps(config, sort_keys=True),
                    tool_version,
                    json.dumps(versions, sort_keys=True),
                    json.dumps(list(corpus)),
                    time.time(),
                    RUN_RUNNING,
                    current_owner(),
                ),
            )
            run_id = int(cur.lastrowid or 0)
            self._db.executemany(
                "INSERT INTO planned (run, seq, instance_id, target) VALUES (?,?,?,?)",
                ((run_id, seq, iid, target) for seq, (iid, target) in enumerate(planned)),
            )
        return run_id

    def set_run_status(self, run_id: int, status: str, *, ended: bool = True) -> None:
        self._db.execute(
            "UPDATE runs SET status=?, ended=? WHERE id=?", (status, time.time() if ended else None, run_id)
        )

    def claim_run(self, run_id: int) -> None:
        """Make this process the run's owner before resuming it; refuse while the owner that
        started or last resumed it is still alive on this host (two processes would run the same
        pending tests)."""
        with self._transaction():
            row = self._db.execute("SELECT status, owner FROM runs WHERE id=?", (run_id,)).fetchone()
            if row is None:
                raise StoreError(f"{self.path}: no run {run_id}")
            status, owner = row
            if status == RUN_RUNNING and owner != current_owner() and _owner_alive(owner):
                raise StoreError(f"run {run_id} is still running (process {owner}); stop it before resuming")
            self._db.execute(
                "UPDATE runs SET status=?, ended=NULL, owner=? WHERE id=?",
                (RUN_RUNNING, current_owner(), run_id),
            )

    def get_run(self, run_id: int) -> RunRecord:
        row = self._db.execute(f"SELECT {_RUN_COLUMNS} FROM runs WHERE id=?", (run_id,)).fetchone()
        if row is None:
            raise StoreError(f"{self.path}: no run {run_id}")
        return self._run_record(row)

    def runs(self) -> list[RunRecord]:
        return [self._run_record(r) for r in self._db.execute(f"SELECT {_RUN_COLUMNS} FROM runs ORDER BY id")]

    def last_run_id(self) -> int | None:
        row = self._db.execute("SELECT MAX(id) FROM runs").fetchone()
        return row[0]

    @staticmethod
    def _run_record(row: sqlite3.Row | tuple[Any, ...]) -> RunRecord:
        rid, config, tool_version, versions, corpus, started, ended, status = row
        return RunRecord(
            rid,
            json.loads(config),
            tool_version,
            json.loads(versions),
            json.loads(corpus),
            started,
            ended,
            status,
        )

    def planned(self, run_id: int) -> list[PlannedTest]:
        rows = self._db.execute(
            "SELECT seq, instance_id, target FROM planned WHERE run=? ORDER BY seq", (run_id,)
        )
        return [PlannedTest(*r) for r in rows]

    def pending(self, run_id: int) -> list[PlannedTest]:
        """Planned tests of the run that have no result yet, in planned order."""
        rows = self._db.execute(
            """SELECT p.seq, p.instance_id, p.target FROM planned p
               LEFT JOIN results r ON r.run=p.run AND r.instance_id=p.instance_id AND r.target=p.target
               WHERE p.run=? AND r.id IS NULL ORDER BY p.seq""",
            (run_id,),
        )
        return [PlannedTest(*r) for r in rows]

    # ---- results ----------------------------------------------------------------------------
    def add_result(self, run_id: int, result: TestResult, *, instance_size: int | None = None) -> bool:
        """Store one result and update its bug row, in one transaction.

        Returns True when the result's signature was never seen before in this store (a new bug).
        A second result for the same (run, instance, target) raises ``StoreError``: the runner
        must never run a test twice.
        """
        new_bug = False
        masked = (result.extra.get("masked_crash") or {}).get("signature")
        with self._transaction():
            try:
                self._db.execute(
                    """INSERT INTO results (run, instance_id, api, target, outcome, stage, signature, distance,
                       duration, message, reproducer, source_suite, finished, masked_signature, source_test)
                       VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)""",
                    (
                        run_id,
                        result.instance_id,
                        result.api,
                        result.target,
                        result.outcome.value,
                        result.stage.value,
                        result.signature,
                        _encode_distance(result.distance),
                        float(result.duration),
                        result.message,
                        result.reproducer,
                        result.source_suite,
                        time.time(),
                        masked,
                        result.source_test,
                    ),
                )
            except sqlite3.IntegrityError:
                raise StoreError(
                    f"run {run_id} already has a result for {result.instance_id} on {result.target}"
                ) from None
            if masked:
                new_bug = self._count_bug(masked, result, run_id, Outcome.CRASH) or new_bug
            new_bug = self._add_rule_results(run_id, result, instance_size) or new_bug
            if result.signature and result.outcome in FAILURE_OUTCOMES:
                new_bug = self._count_bug(result.signature, result, run_id, result.outcome) or new_bug
                if result.reproducer:
                    self._adopt_reproducer(
                        result.signature, result.reproducer, instance_size, result.instance_id, result.api
                    )
        return new_bug

    def _add_rule_results(self, run_id: int, result: TestResult, instance_size: int | None = None) -> bool:
        """The test's rule outcomes (``result.extra["rules"]``, opera.run.rules); a failing rule
        counts for its own bug row, with the rule's reproducer when it wrote one (``reproducer``).
        True when one of them is a new bug."""
        new_bug = False
        for rule, outcome in (result.extra.get("rules") or {}).items():
            signature = outcome.get("signature")
            self._db.execute(
                """INSERT INTO rule_results (run, instance_id, target, rule, outcome, signature, distance, duration,
                   message) VALUES (?,?,?,?,?,?,?,?,?)""",
                (
                    run_id,
                    result.instance_id,
                    result.target,
                    rule,
                    outcome["outcome"],
                    signature,
                    _encode_distance(outcome.get("distance")),
                    float(outcome.get("duration", 0.0)),
                    outcome.get("message", ""),
                ),
            )
            kind = {"inconsistent": Outcome.INCONSISTENT, "crash": Outcome.CRASH}.get(outcome["outcome"])
            if signature and kind is not None:
                new_bug = self._count_bug(signature, result, run_id, kind) or new_bug
                if outcome.get("reproducer"):
                    self._adopt_reproducer(signature, outcome["reproducer"], instance_size, result.instance_id, result.api)
        return new_bug

    def rule_results(self, run_id: int) -> list[RuleRecord]:
        """Every rule outcome of one run, in test order."""
        rows = self._db.execute(
            """SELECT instance_id, target, rule, outcome, signature, distance, duration, message FROM rule_results
               WHERE run=? ORDER BY rowid""",
            (run_id,),
        )
        return [RuleRecord(*row) for row in rows]

    def rule_counts(self, run_id: int | None) -> dict[str, dict[str, dict[str, int]]]:
        """target -> rule -> outcome -> count for one run, or every run (None); empty: no rule ran."""
        where, params = ("WHERE run=?", (run_id,)) if run_id is not None else ("", ())
        counts: dict[str, dict[str, dict[str, int]]] = {}
        for target, rule, outcome, n in self._db.execute(
            f"SELECT target, rule, outcome, COUNT(*) FROM rule_results {where} GROUP BY target, rule, outcome",
            params,
        ):
            counts.setdefault(target, {}).setdefault(rule, {})[outcome] = n
        return counts

    def _count_bug(self, signature: str, result: TestResult, run_id: int, outcome: Outcome) -> bool:
        """Create the bug row of ``signature`` or count one more result for it; True when new."""
        row = self._db.execute("SELECT count FROM bugs WHERE signature=?", (signature,)).fetchone()
        if row is None:
            self._db.execute(
                """INSERT INTO bugs (signature, target, outcome, first_run, last_run, count, example_instance,
                   example_api, reproducer, reproducer_size) VALUES (?,?,?,?,?,?,?,?,?,?)""",
                (signature, result.target, outcome.value, run_id, run_id, 1, result.instance_id, result.api, None, None),
            )
            return True
        self._db.execute("UPDATE bugs SET last_run=?, count=count+1 WHERE signature=?", (run_id, signature))
        return False

    def _adopt_reproducer(
        self, signature: str, path: str, instance_size: int | None, instance_id: str, api: str | None
    ) -> None:
        """Make ``path`` the bug's reproducer when it is the smallest so far: the example (instance
        and its api) becomes that instance, and the new script is not verified yet."""
        size = instance_size if instance_size is not None else 1 << 62
        self._db.execute(
            """UPDATE bugs SET reproducer=?, reproducer_size=?, example_instance=?, example_api=COALESCE(?, (
                   SELECT r.api FROM results r WHERE r.signature=bugs.signature AND r.instance_id=?
                   ORDER BY r.id LIMIT 1), example_api),
               repro_status=NULL, repro_detail='', repro_exit=NULL, repro_seconds=NULL, repro_checked=NULL,
               repro_versions=NULL
               WHERE signature=? AND (reproducer IS NULL OR reproducer_size IS NULL OR reproducer_size > ?)""",
            (path, size, instance_id, api, instance_id, signature, size),
        )

    def wants_reproducer(self, signature: str, instance_size: int) -> bool:
        """True when the bug has no reproducer yet or this instance is smaller than its example."""
        row = self._db.execute(
            "SELECT reproducer, reproducer_size FROM bugs WHERE signature=?", (signature,)
        ).fetchone()
        if row is None:
            return True
        reproducer, size = row
        return reproducer is None or size is None or instance_size < size

    def set_reproducer(
        self,
        run_id: int,
        instance_id: str,
        target: str,
        signature: str,
        path: str,
        instance_size: int,
        api: str | None = None,
    ) -> None:
        """Attach a reproducer to a result and make it the bug's reproducer when it is smaller
        (``api``: the instance's; None: read from its stored result)."""
        with self._transaction():
            self._db.execute(
                "UPDATE results SET reproducer=? WHERE run=? AND instance_id=? AND target=?",
                (path, run_id, instance_id, target),
            )
            self._adopt_reproducer(signature, path, instance_size, instance_id, api)

    def set_reproduction(
        self,
        signature: str,
        reproducer: str,
        reproducer_size: int | None,
        *,
        status: str,
        detail: str,
        exit_code: int | None,
        seconds: float,
        versions: dict[str, Any] | None,
    ) -> bool:
        """Record whether the bug's reproducer ``reproducer`` shows its failure on its own (one
        transaction). False, and nothing changes, when the bug's reproducer is no longer that
        script (a smaller instance's replaced it meanwhile, under the same file name: that one is
        not verified yet)."""
        cur = self._db.execute(
            """UPDATE bugs SET repro_status=?, repro_detail=?, repro_exit=?, repro_seconds=?, repro_checked=?,
               repro_versions=? WHERE signature=? AND reproducer=? AND reproducer_size IS ?""",
            (
                status,
                detail,
                exit_code,
                float(seconds),
                time.time(),
                json.dumps(versions, sort_keys=True) if versions is not None else None,
                signature,
                reproducer,
                reproducer_size,
            ),
        )
        return cur.rowcount > 0

    def results(self, run_id: int | None = None) -> list[TestResult]:
        query = """SELECT run, instance_id, api, target, outcome, stage, signature, distance, duration, message,
                   reproducer, source_suite, source_test FROM results"""
        params: tuple[Any, ...] = ()
        if run_id is not None:
            query += " WHERE run=?"
            params = (run_id,)
        return [self._result(r) for r in self._db.execute(query + " ORDER BY id", params)]

    def apis_not_passing_before(
        self, run_id: int, targets: Sequence[str], decided_gaps: Mapping[str, str] | None = None
    ) -> set[tuple[str, str]]:
        """(target, api) of every test of ``targets`` that did not pass in a run before ``run_id``
        (one query: a nightly store holds many nights). ``decided_gaps``: per target, the words that
        begin an ``unsupported`` message its batches decide themselves; such tests do not count."""
        if not targets:
            return set()
        found: set[tuple[str, str]] = set()
        for target in targets:
            prefix = (decided_gaps or {}).get(target, "")
            gap_rule = " AND NOT (outcome = ? AND substr(message, 1, ?) = ?)" if prefix else ""
            rows = self._db.execute(
                f"SELECT DISTINCT target, api FROM results WHERE run < ? AND outcome != ? AND target = ?{gap_rule}",
                (run_id, Outcome.PASS.value, target, *((Outcome.UNSUPPORTED.value, len(prefix), prefix) if prefix else ())),
            )
            found.update((str(t), str(a)) for t, a in rows)
        return found

    def iter_results(self, run_id: int) -> Iterator[TestResult]:
        cur = self._db.execute(
            """SELECT run, instance_id, api, target, outcome, stage, signature, distance, duration, message,
               reproducer, source_suite, source_test FROM results WHERE run=? ORDER BY id""",
            (run_id,),
        )
        for row in cur:
            yield self._result(row)

    def results_in_plan_order(self, run_id: int) -> list[RankedResult]:
        """The run's results with their rank in the planned order and finish time (for APFD and
        bugs-over-time curves: rank = position in the prioritized order, ``finished`` = wall clock)."""
        rows = self._db.execute(
            """SELECT p.seq, r.finished, r.run, r.instance_id, r.api, r.target, r.outcome, r.stage, r.signature,
               r.distance, r.duration, r.message, r.reproducer, r.source_suite, r.source_test
               FROM results r JOIN planned p ON p.run=r.run AND p.instance_id=r.instance_id AND p.target=r.target
               WHERE r.run=? ORDER BY p.seq""",
            (run_id,),
        )
        return [RankedResult(seq, finished, self._result(rest)) for seq, finished, *rest in rows]

    @staticmethod
    def _result(row: tuple[Any, ...] | list[Any]) -> TestResult:
        run, iid, api, target, outcome, stage, sig, distance, duration, message, repro, suite, test = row
        return TestResult(
            instance_id=iid,
            api=api,
            target=target,
            outcome=Outcome(outcome),
            stage=Stage(stage),
            signature=sig,
            distance=distance,
            duration=duration,
            message=message,
            reproducer=repro,
            source_suite=suite,
            source_test=test,
            run_id=run,
        )

    def outcome_counts(self, run_id: int) -> dict[str, dict[str, int]]:
        """target -> outcome -> count for one run."""
        counts: dict[str, dict[str, int]] = {}
        for target, outcome, n in self._db.execute(
            "SELECT target, outcome, COUNT(*) FROM results WHERE run=? GROUP BY target, outcome", (run_id,)
        ):
            counts.setdefault(target, {})[outcome] = n
        return counts

    # ---- bugs -------------------------------------------------------------------------------
    def signature_evidence(
        self, signature: str, example_instance: str, run_id: int | None = None, tests: int = 3
    ) -> tuple[str, list[str], int]:
        """What `opera bugs` shows of a signature: its example's message, up to ``tests`` of the
        source tests its results came from (most results first), and how many distinct tests."""
        where = "signature=?" + (" AND run=?" if run_id is not None else "")
        params: list[Any] = [signature] + ([run_id] if run_id is not None else [])
        row = self._db.execute(
            f"SELECT message FROM results WHERE {where} ORDER BY instance_id != ?, id LIMIT 1",
            (*params, example_instance),
        ).fetchone()
        counted = self._db.execute(
            f"""SELECT source_test, COUNT(*) FROM results WHERE {where} AND source_test != ''
                GROUP BY source_test ORDER BY COUNT(*) DESC, source_test""",
            params,
        ).fetchall()
        return (row[0] if row else ""), [t for t, _ in counted[:tests]], len(counted)

    def bugs(self, run_id: int | None = None) -> list[BugRecord]:
        """All bug signatures, or those seen in one run (count = that run's results then)."""
        if run_id is None:
            rows = self._db.execute(
                f"""SELECT signature, target, outcome, first_run, last_run, count, example_instance, example_api,
                   reproducer, reproducer_size, {_REPRO_COLUMNS} FROM bugs ORDER BY count DESC, signature"""
            )
        else:
            rows = self._db.execute(
                f"""SELECT b.signature, b.target, b.outcome, b.first_run, b.last_run, COUNT(*), b.example_instance,
                   b.example_api, b.reproducer, b.reproducer_size, {_REPRO_COLUMNS.replace("repro_", "b.repro_")}
                   FROM bugs b JOIN (
                       SELECT r.signature AS sig FROM results r WHERE r.run=? AND (r.masked_signature IS NULL
                           OR r.masked_signature != r.signature)
                       UNION ALL SELECT r.masked_signature FROM results r WHERE r.run=?
                       UNION ALL SELECT u.signature FROM rule_results u WHERE u.run=?
                   ) s ON s.sig=b.signature
                   GROUP BY b.signature ORDER BY COUNT(*) DESC, b.signature""",
                (run_id, run_id, run_id),
            )
        return [
            BugRecord(
                sig,
                target,
                Outcome(outcome),
                first,
                last,
                count,
                example,
                api,
                repro,
                size,
                status,
                detail or "",
                exit_code,
                seconds,
                checked,
                json.loads(versions) if versions else None,
            )
            for sig, target, outcome, first, last, count, example, api, repro, size, status, detail, exit_code, seconds, checked, versions in rows
        ]

    # ---- helpers ----------------------------------------------------------------------------
    def _transaction(self) -> _Transaction:
        return _Transaction(self._db)


class _Transaction:
    def __init__(self, db: sqlite3.Connection) -> None:
        self._db = db

    def __enter__(self) -> None:
        self._db.execute("BEGIN IMMEDIATE")

    def __exit__(self, exc_type: object, *rest: object) -> None:
        self._db.execute("COMMIT" if exc_type is None else "ROLLBACK")
