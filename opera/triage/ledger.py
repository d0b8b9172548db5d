"""The ledger of known bugs (``bugs/ledger.toml``): what became of each root cause Opera found.

A root cause (``opera.triage.root_causes``) is news the first time it shows up; after that it is
reported upstream, fixed in a release, or judged not a bug, and a nightly that turns red for it
again tells nobody anything. The ledger is a TOML file versioned with the project, one ``[[bug]]``
table per known root cause::

    [[bug]]
    id = "rc-3f2a9c81d0"                  # the root cause id `opera triage` prints
    target = "tvm-onnx"                    # required
    signature = "crash:tvm-onnx:tvm/relax/frontend/onnx/onnx_frontend.py:_impl_v13:KeyError"
    features = ["dtype:float16"]           # each must be among the root cause's features
    error = "KeyError: 'axis'"             # a substring of its normalized error line
    status = "reported"                    # new / reported / fixed / not-a-bug
    url = "https://github.com/apache/tvm/issues/00000"   # required for reported and fixed
    fixed_in = "0.28.0"                    # required for fixed (and only there)
    reason = "..."                         # required for not-a-bug
    verdict = "REAL"                       # optional: REAL / UNSUPPORTED / HARNESS / UNDEFINED / LIBRARY
    title = "..."                          # optional
    versions = ["tvm 0.27.0"]              # optional: the versions it was seen with

An entry needs ``target`` and ``status``, and ``id``, ``signature`` or ``error`` (any of them).
Matching (``Ledger.match``): an entry whose ``id`` is the root cause's id and whose target is its
target wins; otherwise the entries of the same target whose ``features`` are all among the root
cause's features, whose ``error`` is a substring of its error line (as written or normalized alike), and whose ``signature``, when
given, is one of its signatures; of those the most specific (a signature given, most features, an
error given), then the first in the file. An entry with an error and no signature is one defect
met through any frame or operator (a message like "Binary operators must have the same datatype",
a native crash's faulting place ``SIGFPE at libopenvino.so.2641+0xe103f6``): its error must be at
least ``MIN_ERROR_ONLY`` characters, so that it names one defect, not a kind of exception. A
signature ending in ``*`` is a prefix: ``inconsistent:tvm-torch:converter=aten.linspace.*`` names
the converter under every overload (an inconsistency has no error line to match on). An id is
stable across runs as long as the same features explain the failure; the signature is the
fallback when it changed, so an entry best carries both, and for a crash its error line too: a
signature names a frame, and a shared frame (a converter dispatcher, OpenVINO's ``node.cpp``,
``OpConversionFailure`` in a shape-inference header) holds many defects; an entry without its error
claims every one of them under its signature whenever its own id is absent (another run, another
grouping). An entry whose own id is
among the root causes examined does not also claim others by signature: a new defect under an
old signature stays new.

Every entry of the ledger is known, whatever its status (``new`` means "triaged, not reported
yet"): a known root cause is not news. Bad input (a file that is not TOML, a top-level key other
than ``bug``, an unknown key, a missing required key, an unknown status or verdict, a value of the
wrong type) is one ``OperaError`` line naming the file and the entry (``bug #3 (rc-...)``). An
entry that matches nothing is not an error: ``LedgerMatch.unmatched`` lists it, one line each.
"""

from __future__ import annotations

import argparse
import functools
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from opera.config import read_toml
from opera.errors import OperaError

if TYPE_CHECKING:  # the CLI's parser imports this module: no numpy at startup
    from opera.triage.root_causes import RootCause

__all__ = [
    "DEFAULT_LEDGER",
    "STATUSES",
    "VERDICTS",
    "Entry",
    "Ledger",
    "LedgerMatch",
    "add_ledger_argument",
    "ledger_path",
    "load_ledger",
    "resolve_ledger",
]

DEFAULT_LEDGER = "bugs/ledger.toml"  # relative to the current directory
STATUSES = ("new", "reported", "fixed", "not-a-bug")
VERDICTS = ("REAL", "UNSUPPORTED", "HARNESS", "UNDEFINED", "LIBRARY")
_KEYS = (
    "id",
    "target",
    "signature",
    "features",
    "error",
    "status",
    "url",
    "fixed_in",
    "reason",
    "verdict",
    "title",
    "versions",
)
_ID = re.compile(r"^rc-[0-9a-f]+$")
MIN_ERROR_ONLY = 16  # characters of an entry's error when it has no signature
_URL = re.compile(r"^https?://\S+$")


@dataclass(frozen=True)
class Entry:
    """One ``[[bug]]`` of the ledger; ``index`` is its position in the file, from 1."""

    index: int
    target: str
    status: str
    id: str | None = None
    signature: str | None = None
    features: tuple[str, ...] = ()
    error: str | None = None
    url: str | None = None
    fixed_in: str | None = None
    reason: str | None = None
    verdict: str | None = None
    title: str | None = None
    versions: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        """``bug #3 (rc-...)``: how messages name the entry."""
        return f"bug #{self.index}" + (f" ({self.id})" if self.id else "")

    @property
    def label(self) -> str:
        """``known (reported: URL)``, ``known (fixed in 0.28: URL)``, ``known (not a bug: reason)``,
        ``known (triaged, not reported yet)``: what a summary says of a failure it explains."""
        if self.status == "reported":
            return f"known (reported: {self.url})"
        if self.status == "fixed":
            return f"known (fixed in {self.fixed_in}: {self.url})"
        if self.status == "not-a-bug":
            return f"known (not a bug: {self.reason})"
        return "known (triaged, not reported yet" + (f": {self.url})" if self.url else ")")

    def describe(self) -> str:
        """The entry in one line: its name, target and what it matches on."""
        keys = [self.target]
        if self.signature:
            keys.append(f"signature {self.signature}")
        if self.features:
            keys.append(f"features [{', '.join(self.features)}]")
        if self.error:
            keys.append(f"error ~ {self.error!r}")
        return f"{self.name}, {'; '.join(keys)}"

    def matches_keys(self, cause: RootCause) -> bool:
        """Target, features (a subset), error (a substring) and signature (when given) all agree;
        an entry with neither signature nor error matches only by id."""
        if self.signature is None and self.error is None:
            return False
        return (
            self.target == cause.target
            and (self.signature is None or any(self.names_signature(sig) for sig in cause.signatures))
            and set(self.features) <= set(cause.features)
            and (self.error is None or self.error in cause.error or _normalized(self.error) in cause.error)
        )

    def names_signature(self, signature: str) -> bool:
        """The entry's signature is ``signature``, or a prefix of it ending in ``*`` (one defect met
        through every overload of a converter: ``inconsistent:tvm-torch:converter=aten.linspace.*``)."""
        if self.signature is None:
            return False
        if self.signature.endswith("*"):
            return signature.startswith(self.signature[:-1])
        return signature == self.signature

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"entry": self.index, "status": self.status}
        for key in ("id", "url", "fixed_in", "reason", "verdict", "title"):
            value = getattr(self, key)
            if value is not None:
                out[key] = value
        return out


@dataclass
class LedgerMatch:
    """A set of root causes against the ledger."""

    known: list[tuple[RootCause, Entry]] = field(default_factory=list)
    new: list[RootCause] = field(default_factory=list)
    unmatched: list[Entry] = field(default_factory=list)  # of the examined targets, matching nothing
    unchecked: list[Entry] = field(default_factory=list)  # of targets not examined
    _by_cause: dict[str, Entry] = field(default_factory=dict, repr=False)  # root cause id -> entry

    def entry(self, cause: RootCause) -> Entry | None:
        return self._by_cause.get(cause.id)

    def mark(self, cause: RootCause) -> str:
        """``known (...)`` or ``new``."""
        entry = self.entry(cause)
        return entry.label if entry is not None else "new"

    def as_json(self, cause: RootCause) -> dict[str, Any]:
        """The ``ledger`` field of a root cause in ``root-causes.json``."""
        entry = self.entry(cause)
        return {"known": False} if entry is None else {"known": True, **entry.to_json()}

    def lines(self, path: str | Path) -> list[str]:
        """The summary: counts, then one line per entry that matched nothing."""
        out = [f"ledger {path}: {len(self.known)} root cause(s) known, {len(self.new)} new"]
        out += [f"ledger {path}: {e.describe()}: matched no root cause" for e in self.unmatched]
        if self.unchecked:
            targets = ", ".join(sorted({e.target for e in self.unchecked}))
            out.append(f"ledger {path}: {len(self.unchecked)} entry(ies) of other targets not checked ({targets})")
        return out


class Ledger:
    """The entries of one ledger file, validated (``load_ledger``)."""

    def __init__(self, path: str | Path, entries: Iterable[Entry] = ()) -> None:
        self.path = Path(path)
        self.entries = list(entries)

    def __len__(self) -> int:
        return len(self.entries)

    def match(self, cause: RootCause, present: Iterable[str] = ()) -> Entry | None:
        """The entry that knows ``cause``: by id, else the most specific by keys (module docstring).
        ``present``: ids of the other root causes examined with it; an entry whose id is among them
        has found its own root cause, so it does not also claim this one by signature (a new defect
        under an old signature stays new)."""
        for entry in self.entries:
            if entry.id is not None and entry.id == cause.id and entry.target == cause.target:
                return entry
        taken = set(present) - {cause.id}
        candidates = [e for e in self.entries if e.matches_keys(cause) and e.id not in taken]
        if not candidates:
            return None
        return max(candidates, key=lambda e: (e.signature is not None, len(e.features), e.error is not None, -e.index))

    def classify(self, causes: Iterable[RootCause], targets: Iterable[str] | None = None) -> LedgerMatch:
        """Known and new root causes, and the entries that matched none of them. ``targets``: the
        targets examined (default: those of ``causes``); entries of other targets are ``unchecked``,
        not unmatched."""
        causes = list(causes)
        examined = set(targets) if targets is not None else {c.target for c in causes}
        found = LedgerMatch()
        used: set[int] = set()
        present = {c.id for c in causes}
        for cause in causes:
            entry = self.match(cause, present)
            if entry is None:
                found.new.append(cause)
            else:
                found.known.append((cause, entry))
                found._by_cause[cause.id] = entry
                used.add(entry.index)
        for entry in self.entries:
            if entry.index in used:
                continue
            (found.unmatched if entry.target in examined else found.unchecked).append(entry)
        return found


def load_ledger(path: str | Path) -> Ledger:
    """Read and validate a ledger file (module docstring); an empty file is an empty ledger."""
    path = Path(path)
    data = read_toml(path, "ledger")
    unknown = sorted(set(data) - {"bug"})
    if unknown:
        raise OperaError(f"ledger {path}: unknown top-level key(s) {', '.join(unknown)} (entries are [[bug]] tables)")
    raw = data.get("bug", [])
    if not isinstance(raw, list) or not all(isinstance(item, dict) for item in raw):
        raise OperaError(f"ledger {path}: 'bug' must be an array of tables: write each entry as [[bug]]")
    entries = [_entry(path, i, item) for i, item in enumerate(raw, start=1)]
    _check_unique(path, entries)
    return Ledger(path, entries)


def _entry(path: Path, index: int, item: dict[str, Any]) -> Entry:
    ident = item.get("id")
    name = f"bug #{index}" + (f" ({ident})" if isinstance(ident, str) else "")

    def fail(message: str) -> OperaError:
        return OperaError(f"ledger {path}: {name}: {message}")

    unknown = sorted(set(item) - set(_KEYS))
    if unknown:
        raise fail(f"unknown key(s) {', '.join(unknown)} (known: {', '.join(_KEYS)})")

    def text(key: str, required: bool = False) -> str | None:
        value = item.get(key)
        if value is None:
            if required:
                raise fail(f"missing required key '{key}'")
            return None
        if not isinstance(value, str) or not value.strip():
            raise fail(f"'{key}' must be a non-empty string, not {value!r}")
        return value

    def strings(key: str) -> tuple[str, ...]:
        value = item.get(key, [])
        if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
            raise fail(f"'{key}' must be a list of non-empty strings, not {value!r}")
        return tuple(value)

    target = text("target", required=True)
    status = text("status", required=True)
    assert target is not None and status is not None
    if status not in STATUSES:
        raise fail(f"unknown status {status!r} (use one of {', '.join(STATUSES)})")
    ident = text("id")
    if ident is not None and not _ID.match(ident):
        raise fail(f"id {ident!r} is not a root cause id (rc-<hex>, as `opera triage` prints)")
    signature = text("signature")
    error = text("error")
    if ident is None and signature is None and error is None:
        raise fail("needs 'id' (a root cause id from `opera triage`), 'signature' or 'error' to match anything")
    if signature is None and error is not None and len(error) < MIN_ERROR_ONLY:
        raise fail(
            f"error {error!r} without a signature is too short to name one defect "
            f"(at least {MIN_ERROR_ONLY} characters of the normalized error line)"
        )
    if signature is not None:
        parts = signature.split(":")
        if len(parts) < 3 or parts[1] != target:
            raise fail(f"signature {signature!r} is not one of target {target!r} (<kind>:{target}:...)")
    url = text("url")
    if url is not None and not _URL.match(url):
        raise fail(f"url {url!r} is not an http(s) URL")
    if status in ("reported", "fixed") and url is None:
        raise fail(f"status '{status}' needs 'url' (the upstream issue or pull request)")
    fixed_in = text("fixed_in")
    if status == "fixed" and fixed_in is None:
        raise fail("status 'fixed' needs 'fixed_in' (the version with the fix, as a string)")
    if status != "fixed" and fixed_in is not None:
        raise fail(f"'fixed_in' goes with status 'fixed', not {status!r}")
    reason = text("reason")
    if status == "not-a-bug" and reason is None:
        raise fail("status 'not-a-bug' needs 'reason' (why it is not a bug)")
    verdict = text("verdict")
    if verdict is not None and verdict not in VERDICTS:
        raise fail(f"unknown verdict {verdict!r} (use one of {', '.join(VERDICTS)})")
    return Entry(
        index=index,
        target=target,
        status=status,
        id=ident,
        signature=signature,
        features=strings("features"),
        error=error,
        url=url,
        fixed_in=fixed_in,
        reason=reason,
        verdict=verdict,
        title=text("title"),
        versions=strings("versions"),
    )


def _check_unique(path: Path, entries: list[Entry]) -> None:
    """Two entries with one id, or with the same keys and no id, would make a match ambiguous."""
    ids: dict[str, Entry] = {}
    keys: dict[tuple[Any, ...], Entry] = {}
    for entry in entries:
        if entry.id is not None:
            if entry.id in ids:
                raise OperaError(f"ledger {path}: {entry.name}: the same id as {ids[entry.id].name}")
            ids[entry.id] = entry
            continue
        key = (entry.target, entry.signature, frozenset(entry.features), entry.error)
        if key in keys:
            raise OperaError(f"ledger {path}: {entry.name}: the same target, signature, features and error as {keys[key].name}")
        keys[key] = entry


def ledger_path(path: str | None) -> str | None:
    """The ledger file a command uses: ``path`` when given, else ``bugs/ledger.toml`` of the
    current directory when it exists, else None (no ledger: the command behaves as it did
    without one, and asks nothing)."""
    if path is not None:
        return path
    return DEFAULT_LEDGER if Path(DEFAULT_LEDGER).is_file() else None


def resolve_ledger(path: str | None) -> Ledger | None:
    """The ledger of ``ledger_path(path)``, loaded (a missing ``path`` is an error), or None."""
    found = ledger_path(path)
    return load_ledger(found) if found is not None else None


def add_ledger_argument(parser: argparse.ArgumentParser) -> None:
    """``--ledger PATH``, the same for triage, bugs and nightly."""
    parser.add_argument(
        "--ledger",
        metavar="PATH",
        help=f"ledger of known bugs (default: {DEFAULT_LEDGER} when it exists here; see docs/reference.md)",
    )


@functools.lru_cache(maxsize=4096)
def _normalized(error: str) -> str:
    """An entry's error as root causes' error lines read (numbers as N, ...): judges copy it from
    a raw message as often as from ``root-causes.json``."""
    from opera.triage.root_causes import normalized_error

    return normalized_error(error)
