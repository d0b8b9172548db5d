"""`opera harvest`: drive sources under a recorder, gate each instance, stream it to a corpus file.

Every instance goes through the validity gate (its template rebuilds and runs it in the source
library) before it is written; invalid ones are kept with the reason. Output is streamed, so an
interrupted harvest (Ctrl-C) leaves a readable corpus of what was recorded so far.
"""

from __future__ import annotations

import sys
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from opera.corpus import CorpusWriter
from opera.instrumentation import HarvestOptions, get_recorder, get_source, sources_for
from opera.progress import progress_bar
from opera.templates import get_template

__all__ = ["HarvestSummary", "run_harvest"]


@dataclass
class HarvestSummary:
    library: str
    output: Path
    sources: list[str]
    library_version: str = ""
    written: int = 0
    duplicates: int = 0
    valid: int = 0
    invalid: int = 0
    interrupted: bool = False
    seconds: float = 0.0
    per_source: Counter[str] = field(default_factory=Counter)
    valid_apis: Counter[str] = field(default_factory=Counter)
    invalid_reasons: Counter[str] = field(default_factory=Counter)
    recorder_errors: dict[str, int] = field(default_factory=dict)

    def render(self) -> str:
        lines = [
            f"harvest {self.library} ({self.library_version}) from {', '.join(self.sources)} -> {self.output}"
            + ("  [INTERRUPTED: partial corpus]" if self.interrupted else ""),
            f"  instances written: {self.written} (duplicates dropped: {self.duplicates})",
            f"  valid: {self.valid}   invalid: {self.invalid}"
            + (f"   validity rate: {self.valid / self.written:.1%}" if self.written else ""),
            f"  distinct valid APIs: {len(self.valid_apis)}",
            f"  time: {self.seconds:.1f} s",
        ]
        for source, count in sorted(self.per_source.items()):
            lines.append(f"  source {source}: {count}")
        if self.valid_apis:
            top = ", ".join(f"{api} ({n})" for api, n in self.valid_apis.most_common(8))
            lines.append(f"  most frequent: {top}")
        if self.invalid_reasons:
            lines.append("  top invalid reasons:")
            for reason, n in self.invalid_reasons.most_common(5):
                lines.append(f"    {n:6d}  {reason[:120]}")
        if self.recorder_errors:
            lines.append("  calls that could not be recorded:")
            for reason, n in sorted(self.recorder_errors.items(), key=lambda kv: -kv[1])[:5]:
                lines.append(f"    {n:6d}  {reason[:120]}")
        return "\n".join(lines)

    def to_json(self) -> dict[str, Any]:
        return {
            "library": self.library,
            "library_version": self.library_version,
            "sources": self.sources,
            "written": self.written,
            "valid": self.valid,
            "invalid": self.invalid,
            "distinct_valid_apis": len(self.valid_apis),
            "per_source": dict(self.per_source),
        }


def run_harvest(
    library: str,
    source_names: Iterable[str] | None,
    output: str | Path,
    options: HarvestOptions | None = None,
    *,
    validate: bool = True,
    header: dict[str, Any] | None = None,
) -> HarvestSummary:
    """Harvest ``library`` from the named sources (the library's defaults when None) into ``output``."""
    options = options or HarvestOptions()
    recorder = get_recorder(library)
    names = list(source_names or [])
    if not names:
        names = [s.name for s in sources_for(library) if s.default]
    specs = [get_source(library, name) for name in names]
    template = get_template(library) if validate else None
    out = Path(output)
    summary = HarvestSummary(library=library, output=out, sources=names, library_version=recorder.library_version())
    started = time.monotonic()
    head = {"library": library, "library_version": summary.library_version, "sources": names, **(header or {})}
    with CorpusWriter(out, header=head) as writer:
        bar = progress_bar(desc=f"harvest {library}", unit="inst", disable=not options.show_progress)
        try:
            for spec in specs:
                for inst in spec.func(recorder, options):
                    if template is not None:
                        with recorder.paused():
                            inst = template.validate(inst)
                    if not writer.write(inst):
                        continue
                    bar.update(1)
                    summary.per_source[spec.name] += 1
                    if inst.valid is False:
                        summary.invalid += 1
                        summary.invalid_reasons[_reason_kind(inst.invalid_reason or "")] += 1
                    else:
                        summary.valid += 1
                        summary.valid_apis[inst.api] += 1
        except KeyboardInterrupt:
            summary.interrupted = True
            print("\ninterrupted: keeping what was recorded so far", file=sys.stderr)
        finally:
            bar.close()
            recorder.uninstall()
            summary.written = writer.written
            summary.duplicates = writer.duplicates
    summary.recorder_errors = dict(recorder.errors)
    summary.seconds = time.monotonic() - started
    return summary


def _reason_kind(reason: str) -> str:
    """Group invalid reasons by their first clause so the summary is readable."""
    return reason.split(":", 2)[0] + (":" + reason.split(":", 2)[1][:60] if reason.count(":") else "")
