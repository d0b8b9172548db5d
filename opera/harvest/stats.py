"""Counts over corpus files: used by `opera stats`, the manifest, and the quick start summary."""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from opera.corpus import CorpusReader

__all__ = ["CorpusStats", "corpus_stats"]


@dataclass
class CorpusStats:
    instances: int = 0
    valid: int = 0
    invalid: int = 0
    unchecked: int = 0
    not_migratable: int = 0
    skipped_lines: int = 0
    libraries: Counter[str] = field(default_factory=Counter)
    library_versions: dict[str, str] = field(default_factory=dict)
    valid_apis: dict[str, Counter[str]] = field(default_factory=dict)  # library -> api -> count
    sources: Counter[str] = field(default_factory=Counter)
    kinds: Counter[str] = field(default_factory=Counter)

    def add(self, inst: Any) -> None:
        self.instances += 1
        self.libraries[inst.library] += 1
        if inst.library_version:
            self.library_versions[inst.library] = inst.library_version
        self.sources[inst.source.suite] += 1
        self.kinds[inst.kind.value] += 1
        if not inst.migratable:
            self.not_migratable += 1
        if inst.valid is None:
            self.unchecked += 1
        elif inst.valid:
            self.valid += 1
        else:
            self.invalid += 1
        if inst.valid is not False:
            self.valid_apis.setdefault(inst.library, Counter())[inst.api] += 1

    def distinct_valid_apis(self, library: str) -> int:
        return len(self.valid_apis.get(library, ()))

    def to_json(self) -> dict[str, Any]:
        return {
            "instances": self.instances,
            "valid": self.valid,
            "invalid": self.invalid,
            "unchecked": self.unchecked,
            "not_migratable": self.not_migratable,
            "validity_rate": round(self.valid / self.instances, 4) if self.instances else None,
            "skipped_lines": self.skipped_lines,
            "libraries": dict(self.libraries),
            "library_versions": self.library_versions,
            "distinct_valid_apis": {lib: len(apis) for lib, apis in self.valid_apis.items()},
            "sources": dict(self.sources),
            "kinds": dict(self.kinds),
            "valid_instances_per_api": {lib: dict(sorted(apis.items())) for lib, apis in self.valid_apis.items()},
        }

    def render(self, top: int = 10) -> str:
        rate = f"{self.valid / self.instances:.1%}" if self.instances else "n/a"
        lines = [
            f"instances: {self.instances}  valid: {self.valid}  invalid: {self.invalid}  unchecked: {self.unchecked}"
            f"  (validity rate {rate})",
        ]
        if self.not_migratable:
            lines.append(f"not migratable (opaque values): {self.not_migratable}")
        if self.skipped_lines:
            lines.append(f"malformed lines skipped: {self.skipped_lines}")
        for lib, n in sorted(self.libraries.items()):
            version = self.library_versions.get(lib, "?")
            apis = self.valid_apis.get(lib, Counter())
            lines.append(f"{lib} {version}: {n} instances, {len(apis)} distinct valid APIs")
            if top and apis:
                lines.append("  most frequent: " + ", ".join(f"{a} ({c})" for a, c in apis.most_common(top)))
        lines.append("sources: " + ", ".join(f"{s} ({n})" for s, n in self.sources.most_common()))
        return "\n".join(lines)


def corpus_stats(paths: Iterable[str | os.PathLike[str]], *, skip_malformed: bool = False) -> CorpusStats:
    reader = CorpusReader(paths, skip_malformed=skip_malformed)
    stats = CorpusStats()
    for inst in reader:
        stats.add(inst)
    stats.skipped_lines = reader.stats.skipped
    return stats
