"""Nightly runs in the store: how they are tagged and found again, and how the nightly opens its store.

A nightly is one ``opera run`` per target (each target has its own prioritized order and budget
share). Every such run stores ``"nightly": N`` in its config JSON (``NightlyRunConfig``), N
counting nightlies in this store from 1, so the next nightly finds the previous one of each
target without a schema change; the compiler and library versions are in each run's ``versions``
column already (``versions[target]``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from opera.errors import OperaError
from opera.run.runner import RunConfig
from opera.store import ResultStore, RunRecord

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
    """Open (or create, with its folder: a first night in a new folder) the store.

    Returns the store and the notes to print. ``ResultStore`` itself backs up and migrates an older
    store (its note, naming the backup, is returned here so that it lands in the nightly's report)
    and refuses, unchanged, one this Opera cannot read.
    """
    p = Path(path)
    notes: list[str] = []
    if not p.exists():
        try:
            p.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise OperaError(f"cannot create the store's folder {p.parent}: {exc.strerror}") from None
    return ResultStore(p, notify=notes.append), notes
