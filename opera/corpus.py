"""Corpus files: JSON Lines of operator instances, optionally gzipped (docs/design.md, Corpus files).

The first line of a file written by Opera is a header ``{"$schema": "opera-corpus", "version": N,
...}``; every other line is one instance. Readers stream (a corpus of 100k instances is never held
in memory by the reader itself), refuse a newer schema version, and report a malformed line with
its file and line number, or skip and count such lines when asked to.

Writers de-duplicate on ``id`` and are crash-friendly: a gzip stream is sync-flushed every few
hundred lines and closed properly on Ctrl-C, and a reader accepts a gzip file that was cut short
(killed writer) up to its last complete line.
"""

from __future__ import annotations

import gzip
import json
import os
import zlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from opera.errors import CorpusError
from opera.model import SCHEMA_VERSION, OperatorInstance

__all__ = ["CorpusReader", "CorpusWriter", "ReadStats", "instances_by_id", "read_corpus", "write_corpus"]

_HEADER_TAG = "opera-corpus"
_SYNC_EVERY = 200


def _is_gzip(path: Path) -> bool:
    return path.suffix == ".gz"


@dataclass
class ReadStats:
    lines: int = 0
    instances: int = 0
    skipped: int = 0
    truncated: bool = False
    skipped_lines: list[int] = field(default_factory=list)
    header: dict[str, Any] = field(default_factory=dict)


class CorpusReader:
    """Iterate the instances of one or more corpus files.

    ``skip_malformed=True`` skips and counts lines that fail to parse (see ``stats``) instead of
    raising ``CorpusError`` naming the file and line.
    """

    def __init__(self, paths: Iterable[str | os.PathLike[str]], *, skip_malformed: bool = False) -> None:
        self.paths = [Path(p) for p in paths]
        self.skip_malformed = skip_malformed
        self.stats = ReadStats()
        for p in self.paths:
            if not p.exists():
                raise CorpusError(f"corpus file not found: {p}")
            if p.is_dir():
                raise CorpusError(f"corpus path is a directory, not a file: {p}")

    def __iter__(self) -> Iterator[OperatorInstance]:
        for path in self.paths:
            yield from self._read_one(path)

    def _lines(self, path: Path) -> Iterator[str]:
        if not _is_gzip(path):
            with open(path, encoding="utf-8") as fh:
                yield from fh
            return
        # Decompress incrementally so that a stream cut short by a killed writer yields its
        # complete lines instead of failing as a whole.
        decomp = zlib.decompressobj(16 + zlib.MAX_WBITS)
        pending = b""
        with open(path, "rb") as fh:
            while True:
                chunk = fh.read(1 << 16)
                if not chunk:
                    break
                try:
                    data = decomp.decompress(chunk)
                except zlib.error as exc:
                    raise CorpusError(f"{path}: not a valid gzip file ({exc})") from None
                pending += data
                *complete, pending = pending.split(b"\n")
                for line in complete:
                    yield line.decode("utf-8") + "\n"
                if decomp.eof:
                    # A concatenated gzip member (appending writer) may follow.
                    rest = decomp.unused_data
                    decomp = zlib.decompressobj(16 + zlib.MAX_WBITS)
                    if rest:
                        pending += decomp.decompress(rest)
        if pending:
            # A last line without newline: complete JSON is accepted, a cut one is malformed.
            yield pending.decode("utf-8", errors="replace")

    def _read_one(self, path: Path) -> Iterator[OperatorInstance]:
        for lineno, line in enumerate(self._lines(path), start=1):
            self.stats.lines += 1
            text = line.strip()
            if not text:
                continue
            try:
                obj = json.loads(text)
                if not isinstance(obj, dict):
                    raise ValueError("a line must hold a JSON object")
                if "$schema" in obj:
                    self._check_header(path, lineno, obj)
                    continue
                inst = OperatorInstance.from_json(obj)
            except CorpusError:
                raise
            except (ValueError, KeyError, TypeError) as exc:
                if self.skip_malformed:
                    self.stats.skipped += 1
                    if len(self.stats.skipped_lines) < 100:
                        self.stats.skipped_lines.append(lineno)
                    continue
                msg = str(exc) if not isinstance(exc, KeyError) else f"missing field {exc}"
                raise CorpusError(f"{path}:{lineno}: malformed corpus line: {msg}") from None
            self.stats.instances += 1
            yield inst

    def _check_header(self, path: Path, lineno: int, obj: dict[str, Any]) -> None:
        if obj.get("$schema") != _HEADER_TAG:
            raise CorpusError(f"{path}:{lineno}: not an Opera corpus header")
        version = obj.get("version")
        if not isinstance(version, int) or version > SCHEMA_VERSION:
            raise CorpusError(
                f"{path}: corpus schema version {version} is newer than this Opera supports ({SCHEMA_VERSION}); upgrade Opera"
            )
        self.stats.header = obj


def instances_by_id(
    paths: Iterable[str], wanted: set[str] | None = None, warn: Callable[[str], None] | None = None
) -> dict[str, OperatorInstance]:
    """The instances of the corpus files a run read, by id (only ``wanted`` ones when given). A
    file that is gone is skipped with one ``warn`` line: what needs the instances says less."""
    found: dict[str, OperatorInstance] = {}
    for path in sorted(set(paths)):
        if not Path(path).exists():
            if warn is not None:
                warn(f"corpus {path} is gone: its instances cannot be described")
            continue
        for inst in CorpusReader([path]):
            if wanted is None or inst.id in wanted:
                found[inst.id] = inst
    return found


def read_corpus(*paths: str | os.PathLike[str], skip_malformed: bool = False) -> Iterator[OperatorInstance]:
    return iter(CorpusReader(paths, skip_malformed=skip_malformed))


class CorpusWriter:
    """Write instances to a JSONL(.gz) file, once per id. Use as a context manager."""

    def __init__(self, path: str | os.PathLike[str], *, header: dict[str, Any] | None = None) -> None:
        self.path = Path(path)
        self.written = 0
        self.duplicates = 0
        self._ids: set[str] = set()
        parent = self.path.parent
        if not parent.exists():
            try:
                parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise CorpusError(f"cannot create output directory {parent}: {exc.strerror}") from None
        try:
            raw = open(self.path, "wb")  # noqa: SIM115 - closed in close()
        except OSError as exc:
            raise CorpusError(f"cannot write corpus file {self.path}: {exc.strerror}") from None
        self._raw: IO[bytes] = raw
        self._gz: gzip.GzipFile | None = gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=6) if _is_gzip(self.path) else None
        self._out: IO[bytes] = self._gz if self._gz is not None else raw  # type: ignore[assignment]
        self._since_sync = 0
        head = {"$schema": _HEADER_TAG, "version": SCHEMA_VERSION, **(header or {})}
        self._write_line(json.dumps(head, sort_keys=True))

    def _write_line(self, text: str) -> None:
        self._out.write(text.encode("utf-8") + b"\n")

    def write(self, inst: OperatorInstance) -> bool:
        """Write ``inst`` unless its id was written already; returns whether it was written."""
        if inst.id in self._ids:
            self.duplicates += 1
            return False
        self._ids.add(inst.id)
        self._write_line(inst.to_line())
        self.written += 1
        self._since_sync += 1
        if self._since_sync >= _SYNC_EVERY:
            self.sync()
        return True

    def sync(self) -> None:
        """Make everything written so far readable even if the process is killed next."""
        if self._gz is not None:
            self._gz.flush(zlib.Z_SYNC_FLUSH)
        self._raw.flush()
        self._since_sync = 0

    def close(self) -> None:
        if self._gz is not None:
            self._gz.close()
            self._gz = None
        if not self._raw.closed:
            self._raw.close()

    def __enter__(self) -> CorpusWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def write_corpus(path: str | os.PathLike[str], instances: Iterable[OperatorInstance], header: dict[str, Any] | None = None) -> int:
    with CorpusWriter(path, header=header) as writer:
        for inst in instances:
            writer.write(inst)
    return writer.written

