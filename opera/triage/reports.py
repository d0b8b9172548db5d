"""Upstream-ready bug reports, one per root cause, and the machine-readable file beside them.

The shape is what the compilers' trackers ask of a fuzzer's report (TVM's and OpenVINO's GitHub
issue templates, PyTorch's "Describe the bug / Versions"): one defect per report, a title that
says what fails, the versions, the expected behaviour (the operator's documented semantics and the
library's reference) against the actual one (the error, or the distance), the stage, and a
standalone reproducer inline. Opera's own triage notes (signatures, how many instances, the
distinguishing features) come last, apart from what the maintainer needs.
"""

from __future__ import annotations

import platform
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from opera.model import OperatorInstance
from opera.outcomes import Outcome, TestResult
from opera.triage.root_causes import EVERY_INSTANCE, NO_FEATURE, UNKNOWN, RootCause, raw_error_line

__all__ = ["CauseReport", "render_report"]


@dataclass
class CauseReport:
    """Everything one report needs, gathered by ``opera triage``."""

    cause: RootCause
    result: TestResult  # the example instance's result on the target
    instance: OperatorInstance | None
    versions: Mapping[str, Any]  # the target's versions in the run
    reproducer: str | None  # the script's text
    issue_tracker: str = ""
    doc_url: str | None = None
    reference: str = ""  # what produced the expected outputs (onnxruntime, torch eager, ...)
    reduction: str = ""  # how the example was reduced, one line (empty: not reduced)


def _what_fails(cause: RootCause, result: TestResult) -> str:
    if result.outcome is Outcome.CRASH:
        return raw_error_line(result.message)[:200] or "crash"
    if result.outcome is Outcome.INCONSISTENT:
        return "wrong result"
    if result.outcome is Outcome.NATIVE_CRASH:
        return f"process killed ({result.signature.rsplit(':', 1)[-1] if result.signature else 'signal'})"
    if result.outcome is Outcome.TIMEOUT:
        return "hangs"
    return result.outcome.value


def _condition(cause: RootCause) -> str:
    features = [f for f in cause.features if f not in (EVERY_INSTANCE, NO_FEATURE, UNKNOWN)]
    if not features:
        return ""
    return " with " + ", ".join(features)


def title(cause: RootCause, result: TestResult) -> str:
    ops = ", ".join(a.split("::")[-1] for a in cause.apis[:3]) + (" and more" if len(cause.apis) > 3 else "")
    return f"[{cause.target}] {ops}{_condition(cause)}: {_what_fails(cause, result)}"[:160]


_SITE = re.compile(r'File "[^"]*?(site-packages|dist-packages)/')
_OWN = re.compile(r'File "[^"]*?/(opera|templates)/')


def _short_paths(text: str) -> str:
    """Traceback paths without this machine's prefixes (``.../site-packages/tvm/...``)."""
    return _OWN.sub(r'File ".../\1/', _SITE.sub(r'File ".../\1/', text))


def render_report(report: CauseReport) -> str:
    cause, result = report.cause, report.result
    lines = [f"# {title(cause, result)}", ""]
    env = ", ".join(f"{k} {v}" for k, v in sorted(report.versions.items()))
    lines += [
        "### Environment",
        "",
        f"- {env}" if env else "- (versions not recorded)",
        f"- Python {platform.python_version()}, {platform.system()} {platform.machine()}, CPU",
        f"- Frontend under test: `{cause.target}`, failing stage: **{result.stage.value}**",
        "",
        "### Expected behavior",
        "",
    ]
    doc = f" ({report.doc_url})" if report.doc_url else ""
    ref = report.reference or "the library's own implementation"
    if result.outcome is Outcome.INCONSISTENT:
        lines.append(
            f"The converted model computes `{result.api}` as documented{doc}: its outputs match those of "
            f"{ref} on the same inputs, within the tolerance the reproducer prints."
        )
    else:
        lines.append(
            f"The frontend converts and runs `{result.api}` as documented{doc}, as {ref} does on the "
            "same model and inputs."
        )
    lines += ["", "### Actual behavior", ""]
    if result.outcome is Outcome.INCONSISTENT:
        distance = f"Chebyshev distance {result.distance:.6g}" if result.distance is not None else "outputs differ"
        lines += [f"{distance}:", "", "```", result.message.strip()[:1500], "```"]
    else:
        lines += [f"{_what_fails(cause, result)} at stage {result.stage.value}:", "", "```", _short_paths(result.message.strip()[-2500:]), "```"]
    lines += ["", "### Steps to reproduce", ""]
    if report.reproducer:
        lines += [
            "Standalone (needs only the library and the compiler); exit status 1 when the failure shows:",
            "",
            "```python",
            report.reproducer.rstrip(),
            "```",
        ]
    else:
        lines.append("(no standalone reproducer for this target)")
    lines += ["", "### Triage notes (Opera)", ""]
    lines += [
        f"- root cause `{cause.id}`: {len(cause.instances)} failing instance(s) of {', '.join(f'`{a}`' for a in cause.apis)}",
        f"- what separates them from the passing instances of the same operator(s): {', '.join(cause.features)}",
        f"- signature(s): {', '.join(f'`{s}`' for s in cause.signatures)}",
        f"- example instance `{cause.example}`"
        + (f" ({report.instance.source.suite} {report.instance.source.test})" if report.instance else ""),
    ]
    if report.reduction:
        lines.append(f"- reduced: {report.reduction}")
    if report.issue_tracker:
        lines.append(f"- file at: {report.issue_tracker}")
    return "\n".join(lines) + "\n"


def write_reports(reports: list[CauseReport], directory: Path) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for report in reports:
        path = directory / f"{report.cause.id}.md"
        path.write_text(render_report(report), encoding="utf-8")
        paths.append(path)
    return paths
