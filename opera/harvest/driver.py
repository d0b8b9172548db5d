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
from dataclasses import dataclass, field, replace
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
    # pytest-driven sources: source -> pytest's own outcome counts (passed, failed, skipped, ...)
    pytest: dict[str, dict[str, int]] = field(default_factory=dict)
    tests_run: int = 0  # tests that finished under the recorder (pytest-driven sources)

    def render(self) -> str:
        lines = [
            f"harvest {self.library} ({self.library_version}) from {', '.join(self.sources)} -> {self.output}"
            + ("  [INTERRUPTED: partial corpus]" if self.interrupted else ""),
        ]
        for source, counts in self.pytest.items():
            told = ", ".join(f"{n} {outcome}" for outcome, n in counts.items()) or "no test outcome"
            lines.append(f"  pytest ({source}): {told}")
        lines += [
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
            "pytest": self.pytest,
            "tests_run": self.tests_run,
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
    progress = _Progress(library, summary, disable=not options.show_progress)
    options = replace(options, on_event=progress.event)
    # Opened at the first instance (or at the end): by then a pytest-driven source has finished its
    # suite, and pytest's own outcome counts go into the header.
    writer: CorpusWriter | None = None

    def opened() -> CorpusWriter:
        nonlocal writer
        if writer is None:
            writer = CorpusWriter(out, header={**head, **({"pytest": summary.pytest} if summary.pytest else {})})
        return writer

    try:
        for spec in specs:
            progress.source = spec.name
            for inst in spec.func(recorder, options):
                if template is not None:
                    with recorder.paused():
                        inst = template.validate(inst)
                wrote = opened().write(inst)
                progress.written()
                if not wrote:  # a duplicate
                    continue
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
        progress.close()
        recorder.uninstall()
        done = opened()
        done.close()
        summary.written = done.written
        summary.duplicates = done.duplicates
    summary.recorder_errors = dict(recorder.errors)
    summary.seconds = time.monotonic() - started
    return summary


class _Progress:
    """One progress bar per phase. A pytest-driven source first counts tests (of those pytest
    collected) with the instances recorded so far beside them, then the validation of each recorded
    instance; any other source counts instances as they are written."""

    def __init__(self, library: str, summary: HarvestSummary, disable: bool) -> None:
        self.library, self.summary, self.disable = library, summary, disable
        self.source = ""
        self.recorded = 0
        self.phase = "instances"
        self._bar: Any = None  # made when the first phase starts

    @property
    def bar(self) -> Any:
        if self._bar is None:
            self._bar = progress_bar(desc=f"harvest {self.library}", unit="inst", disable=self.disable)
        return self._bar

    def _new_bar(self, desc: str, unit: str, total: int | None) -> None:
        self.close()
        self.phase = "tests" if unit == "test" else "instances"
        self._bar = progress_bar(desc=desc, unit=unit, total=total, disable=self.disable)

    def event(self, event: dict[str, Any]) -> None:
        counting_tests = self._bar is not None and self.phase == "tests"
        if "collected" in event:
            if not counting_tests:
                self._new_bar(f"{self.library} tests ({self.source})", "test", int(event["collected"]))
                self.recorded = 0
            elif (self._bar.total or 0) < event["collected"]:  # pytest-xdist: every worker collects
                self._bar.total = int(event["collected"])
                self._bar.refresh()
        elif "tests" in event:
            if not counting_tests:
                self._new_bar(f"{self.library} tests ({self.source})", "test", None)
            self.summary.tests_run += int(event["tests"])
            self.recorded += int(event.get("instances", 0))
            self.bar.set_postfix_str(f"{self.recorded} instances", refresh=False)
            self.bar.update(int(event["tests"]))
        elif "summary" in event:
            self.summary.pytest[self.source] = dict(event["summary"])
        elif "validating" in event:
            self._new_bar(f"validate {self.library} ({self.source})", "inst", int(event["validating"]))

    def written(self) -> None:
        self.bar.update(1)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None


def _reason_kind(reason: str) -> str:
    """Group invalid reasons by their first clause so the summary is readable."""
    return reason.split(":", 2)[0] + (":" + reason.split(":", 2)[1][:60] if reason.count(":") else "")
