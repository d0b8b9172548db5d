"""Test prioritization: order a corpus so diverse tests run first (docs/design.md, Prioritize).

``prioritize`` runs one registered strategy over the instances of a corpus and returns an
``Ordering``; ``write_order``/``read_order`` handle the order file the runner reads with ``--order``:
plain text, one instance id per line, ``#`` header comments (``# strategy: opera`` ...).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from opera.errors import OperaError
from opera.model import OperatorInstance
from opera.prioritize.strategies import (
    PrioritizeContext,
    Strategy,
    get_strategy,
    register_strategy,
    strategy_names,
)
from opera.selection import Selection

__all__ = [
    "Ordering",
    "PrioritizeContext",
    "Strategy",
    "get_strategy",
    "load_equipped",
    "prioritize",
    "prioritize_files",
    "read_order",
    "register_strategy",
    "strategy_names",
    "write_order",
]


@dataclass
class Ordering:
    ids: list[str]
    strategy: str
    # wall time of the strategy itself plus what it had to measure first (``notes["charged_seconds"]``:
    # the coverage strategies' coverage pass), counted into time-to-bug curves
    seconds: float
    notes: dict[str, Any] = field(default_factory=dict)


def prioritize(
    instances: Iterable[OperatorInstance], strategy: str, ctx: PrioritizeContext | None = None
) -> Ordering:
    ctx = ctx or PrioritizeContext()
    impl = get_strategy(strategy)
    impl.check(ctx)
    start = time.perf_counter()
    ids = impl.order(instances, ctx)
    seconds = time.perf_counter() - start + float(ctx.notes.get("charged_seconds", 0.0))
    if len(set(ids)) != len(ids):
        raise RuntimeError(f"strategy {strategy} returned duplicate ids")
    return Ordering(ids=ids, strategy=strategy, seconds=seconds, notes=dict(ctx.notes))


def write_order(path: str | os.PathLike[str], ids: Iterable[str], header: Mapping[str, Any]) -> int:
    """Write an order file; header values go on ``# key: value`` lines. Returns the id count."""
    p = Path(path)
    tmp = p.with_name(p.name + ".tmp")
    n = 0
    with open(tmp, "w", encoding="utf-8") as f:
        f.write("# opera order\n")
        for key, value in header.items():
            text = " ".join(str(v) for v in value) if isinstance(value, (list, tuple)) else str(value)
            f.write(f"# {key}: {text}\n")
        for iid in ids:
            f.write(iid + "\n")
            n += 1
    os.replace(tmp, p)
    return n


def read_order(path: str | os.PathLike[str]) -> tuple[list[str], dict[str, str]]:
    """(ids, header) of an order file: the one reader of the format ``write_order`` writes.

    Both ``opera run --order`` and the report (an order file's header) read through here. One
    instance id per line; blank lines are skipped; a line starting with ``#`` is a comment, and a
    ``# key: value`` comment is a header entry; ``ID  # note`` (a comment after the id) is allowed.
    A line holding anything else (two words, an id named twice) is an ``OperaError`` naming the
    file and the line: an order file is written by a program, so a malformed one is a mistake to
    report, not to guess around.
    """
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise OperaError(f"order file not found: {p}") from None
    except UnicodeDecodeError as exc:
        raise OperaError(f"order file {p}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except OSError as exc:
        raise OperaError(f"order file {p}: {exc.strerror or exc}") from None
    ids: list[str] = []
    header: dict[str, str] = {}
    first_line: dict[str, int] = {}
    for lineno, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if stripped.startswith("#"):
            key, sep, value = stripped[1:].partition(":")
            if sep:
                header[key.strip()] = value.strip()
            continue
        token = stripped.split("#", 1)[0].strip()
        if not token:
            continue
        if len(token.split()) > 1:
            raise OperaError(f"{p}:{lineno}: not an instance id: {token!r} (one id per line)")
        if token in first_line:
            raise OperaError(f"{p}:{lineno}: duplicate id {token!r} (first on line {first_line[token]})")
        first_line[token] = lineno
        ids.append(token)
    return ids, header


def _check_library(
    instances: Iterable[OperatorInstance], library: str | None, path: str, target: str | None
) -> Iterator[OperatorInstance]:
    for inst in instances:
        if library is not None and inst.library != library:
            raise OperaError(
                f"{path} holds {inst.library} instances ({inst.api}); target {target} consumes {library} instances"
            )
        yield inst


def load_equipped(
    paths: Sequence[str | os.PathLike[str]], library: str | None = None, target: str | None = None
) -> list[OperatorInstance]:
    """Instances of equipped corpora: the artifact's line format or Opera corpora (.jsonl[.gz])."""
    from opera.prioritize.equipped import read_equipped

    out: list[OperatorInstance] = []
    for path in paths:
        p = Path(path)
        if not p.exists():
            raise OperaError(f"equipped corpus not found: {p}")
        try:
            out.extend(_check_library(read_equipped([p]), library, str(p), target))
        except (ValueError, UnicodeDecodeError) as exc:
            raise OperaError(f"{p}: not an equipped corpus: {exc}") from None
    return out


def prioritize_files(
    corpus: Sequence[str | os.PathLike[str]],
    *,
    target: str,
    strategy: str,
    equipped: Sequence[str | os.PathLike[str]] = (),
    seed: int = 0,
    coverage: str | os.PathLike[str] | None = None,
    precover_equipped: bool = True,
    zero_case: str = "untested-first",
    selection: Selection | None = None,
    history: str | os.PathLike[str] | Sequence[str | os.PathLike[str]] | None = None,
) -> tuple[Ordering, dict[str, Any]]:
    """Order corpus files for ``target`` (the part ``selection`` keeps); returns the ordering and
    the order-file header. ``history``: results stores of earlier runs (``OperatorHistory``, merged)."""
    from opera.corpus import read_corpus
    from opera.run.targets import get_target

    library = get_target(target).library
    impl = get_strategy(strategy)
    ctx = PrioritizeContext(
        target=target,
        library=library,
        seed=seed,
        coverage=Path(coverage) if coverage is not None else None,
        precover_equipped=precover_equipped,
        zero_case=zero_case,
    )
    impl.check(ctx)
    ctx.equipped = load_equipped(equipped, library, target)
    if history is not None:
        from opera.prioritize.history import OperatorHistory

        ctx.history = OperatorHistory.from_stores(history, target)

    def instances() -> Iterator[OperatorInstance]:
        for path in corpus:
            yield from _check_library(read_corpus(path), library, str(path), target)

    chosen: Iterable[OperatorInstance] = selection.apply(instances()) if selection else instances()
    ordering = prioritize(chosen, strategy, ctx)
    header: dict[str, Any] = {
        "strategy": strategy,
        "target": target,
        "corpus": [str(p) for p in corpus],
        "equipped": [str(p) for p in equipped] or "none",
        "precover_equipped": precover_equipped if strategy in ("opera", "param-only") else "n/a",
        "zero_case": zero_case if strategy in ("opera", "op-only") else "n/a",
        "seed": seed if impl.uses_seed else "n/a",
        "history": ctx.history.source if ctx.history is not None and strategy == "opera" else "n/a",
        "instances": len(ordering.ids),
        "prioritization_seconds": round(ordering.seconds, 3),
    }
    if coverage is not None:
        header["coverage"] = str(coverage)
    if selection:
        header["selection"] = selection.describe()
    return ordering, header
