"""Which part of a corpus a command works on: by API (glob), by source test (glob), by instance id,
and a seeded sample of what is left. ``opera run``, ``opera prioritize`` and ``opera nightly`` take
the same flags (``add_selection_arguments``) and apply the same ``Selection``.

Kinds combine with AND, values of one kind with OR: ``--api 'torch.nn.functional.conv*' --api
torch.add --test '*test_conv*'`` keeps convolutions and additions recorded by a conv test. The
sample is drawn last, with its own seed, and keeps corpus order, so the same flags on the same
corpus give the same instances on any machine.
"""

from __future__ import annotations

import argparse
import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, fields
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any, TypeVar

from opera.errors import OperaError
from opera.model import OperatorInstance

__all__ = ["Selection", "add_selection_arguments", "selection_from_args"]

_I = TypeVar("_I", bound=OperatorInstance)


@dataclass(frozen=True)
class Selection:
    apis: tuple[str, ...] = ()  # fnmatch globs over ``inst.api`` (ONNX: with or without ``onnx::``)
    tests: tuple[str, ...] = ()  # fnmatch globs over ``inst.source.test`` (file::test, OpInfo name)
    ids: tuple[str, ...] = ()  # exact instance ids
    sample: int | None = None  # then keep this many, drawn with ``sample_seed``
    sample_seed: int = 0

    def __bool__(self) -> bool:
        return bool(self.apis or self.tests or self.ids or self.sample is not None)

    def matches(self, inst: OperatorInstance) -> bool:
        """The filters (not the sample) of this selection keep ``inst``."""
        if self.ids and inst.id not in self.ids:
            return False
        if self.apis:
            names = (inst.api, inst.api.rpartition("::")[2])  # onnx::Add answers to Add too
            if not any(fnmatchcase(name, g) for g in self.apis for name in names):
                return False
        return not self.tests or any(fnmatchcase(inst.source.test, g) for g in self.tests)

    def apply(self, instances: Iterable[_I]) -> list[_I]:
        """The selected instances, in their given order. An id that is not there, or a selection
        that keeps nothing, is an ``OperaError`` (a typo should not run an empty job)."""
        given = list(instances)
        kept = [inst for inst in given if self.matches(inst)]
        if self.ids:
            missing = sorted(set(self.ids) - {inst.id for inst in kept})
            if missing:
                raise OperaError(
                    f"--id: {len(missing)} id(s) not in the corpus (or excluded by --api/--test), e.g. "
                    + ", ".join(missing[:3])
                )
        if not kept and given:
            raise OperaError(f"the selection ({self.describe()}) keeps none of the {len(given)} corpus instances")
        if self.sample is not None and self.sample < len(kept):
            chosen = set(random.Random(self.sample_seed).sample(range(len(kept)), self.sample))
            kept = [inst for k, inst in enumerate(kept) if k in chosen]
        return kept

    def describe(self) -> str:
        parts = [f"--api {' '.join(self.apis)}"] if self.apis else []
        parts += [f"--test {' '.join(self.tests)}"] if self.tests else []
        parts += [f"--id ({len(self.ids)} ids)"] if self.ids else []
        parts += [f"--sample {self.sample} (seed {self.sample_seed})"] if self.sample is not None else []
        return ", ".join(parts) or "everything"

    def to_json(self) -> dict[str, Any]:
        return {f.name: list(v) if isinstance(v := getattr(self, f.name), tuple) else v for f in fields(self)}

    @classmethod
    def from_json(cls, obj: dict[str, Any] | None) -> Selection:
        obj = obj or {}
        return cls(
            apis=tuple(obj.get("apis", ())),
            tests=tuple(obj.get("tests", ())),
            ids=tuple(obj.get("ids", ())),
            sample=obj.get("sample"),
            sample_seed=int(obj.get("sample_seed", 0)),
        )


def add_selection_arguments(parser: argparse.ArgumentParser) -> None:
    """--api / --test / --id / --sample / --sample-seed."""
    group = parser.add_argument_group("selecting part of the corpus (kinds combine with AND, repeats with OR)")
    group.add_argument("--api", action="append", default=[], metavar="GLOB", help="instances whose API matches, e.g. 'torch.nn.functional.conv*'")
    group.add_argument("--test", action="append", default=[], metavar="GLOB", help="instances recorded by a matching source test, e.g. '*test_conv*'")
    group.add_argument("--id", action="append", default=[], metavar="ID|@FILE", help="an instance id, or @FILE of ids (one per line, # comments)")
    group.add_argument("--sample", type=int, metavar="N", help="then a seeded random sample of N of them (corpus order kept)")
    group.add_argument("--sample-seed", type=int, default=0, metavar="S", help="seed of --sample (default 0)")


def selection_from_args(args: argparse.Namespace) -> Selection:
    if args.sample is not None and args.sample < 1:
        raise OperaError("--sample must be at least 1")
    return Selection(
        apis=tuple(args.api),
        tests=tuple(args.test),
        ids=tuple(_ids(args.id)),
        sample=args.sample,
        sample_seed=args.sample_seed,
    )


def _ids(values: Sequence[str]) -> list[str]:
    out: list[str] = []
    for value in values:
        if not value.startswith("@"):
            out.append(value)
            continue
        path = Path(value[1:])
        if not path.is_file():
            raise OperaError(f"--id {value}: no such file")
        for line in path.read_text().splitlines():
            line = line.split("#", 1)[0].strip()
            if line:
                out.append(line)
    return list(dict.fromkeys(out))
