"""JUnit XML for CI dashboards: one test case per instance x target.

The file follows the JUnit schema that Jenkins, GitLab and most CI dashboards read (the
``junit-10.xsd`` of Jenkins's xunit plugin; ``tests/data/junit-10.xsd``, checked in the tests):
one ``testsuite`` per target with the run and the compiler/library versions as properties. A
failing test (crash, native crash, timeout, inconsistent) is a ``failure`` whose message starts
with its change since the previous nightly (``new failure``, ``still failing``, ``changed
symptom``; a new failure the ledger of known bugs knows says ``known (...)`` instead) and the
bug signature, and whose text holds the stage, the reproducer path, whether that reproducer
shows the failure when re-run on its own, and the tool's message. ``unsupported``, ``invalid``
and ``nondeterministic`` tests are ``skipped`` with the reason; they are not bugs.
"""

from __future__ import annotations

import re
import socket
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import TYPE_CHECKING

from opera.nightly.compare import Change, ChangeKind
from opera.outcomes import NOT_JUDGED_OUTCOMES, Outcome

if TYPE_CHECKING:
    from opera.nightly.pipeline import NightlyOutcome, TargetNight
    from opera.store import BugRecord

__all__ = ["write_junit"]

# A harness error is Opera's own defect: a JUnit <error> (the test could not be judged), not a skip.
_SKIPPED = NOT_JUDGED_OUTCOMES - {Outcome.HARNESS_ERROR}
# Characters XML 1.0 cannot hold (compiler messages carry ANSI escapes and the odd NUL).
_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
_MESSAGE_LIMIT = 4000


def _text(value: object, limit: int = _MESSAGE_LIMIT) -> str:
    text = _NOT_XML.sub("?", str(value))
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _seconds(value: float) -> str:
    return f"{max(0.0, value):.3f}"  # the schema's SUREFIRE_TIME: at most 3 decimals


def _suite(night: TargetNight, hostname: str) -> ET.Element:
    cmp = night.comparison
    changes: dict[str, list[Change]] = {}
    for change in cmp.changes:
        changes.setdefault(change.instance_id, []).append(change)
    results = [r.result for r in night.results]
    failures = sum(r.is_failure for r in results)
    skipped = sum(r.outcome in _SKIPPED for r in results)
    errors = sum(r.outcome is Outcome.HARNESS_ERROR for r in results)
    suite = ET.Element(
        "testsuite",
        {
            "name": night.target,
            "tests": str(len(results)),
            "failures": str(failures),
            "errors": str(errors),
            "skipped": str(skipped),
            "time": _seconds(sum(r.duration for r in results)),
            "timestamp": time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(night.run.started)),
            "hostname": hostname,
            "id": str(night.run.id),
            "package": "opera",
        },
    )
    props = ET.SubElement(suite, "properties")
    recorded = night.run.versions.get(night.target, {})
    items = [
        ("run", str(night.run.id)),
        ("run.status", night.run.status),
        ("previous_run", str(cmp.previous_run_id) if cmp.previous_run_id else "none (first night)"),
        ("opera", night.run.tool_version),
        *((f"version.{k}", str(v)) for k, v in sorted(recorded.items())),
        *((f"version_change.{i}", v) for i, v in enumerate(cmp.version_changes)),
        *((f"count.{k.value}", str(len(cmp.of(k)))) for k in ChangeKind),
        *((("reproducers", headline),) if (headline := night.reproduction_headline()) else ()),
    ]
    for name, value in items:
        ET.SubElement(props, "property", {"name": name, "value": _text(value, 500)})
    bugs = {b.signature: b for b in night.bugs}
    for ranked in night.results:
        r = ranked.result
        case = ET.SubElement(
            suite,
            "testcase",
            {
                "classname": f"{night.target}.{r.api}",
                "name": f"{r.api}[{r.instance_id}]",
                "time": _seconds(r.duration),
            },
        )
        own = changes.get(r.instance_id, [])
        if r.is_failure:
            mine = next((c for c in own if c.kind is not ChangeKind.NEWLY_UNSUPPORTED), None)
            kind = "failing" if mine is None else mine.known.label if mine.known else mine.kind.value
            body = [
                f"change since the previous nightly: {kind}",
                f"outcome: {r.outcome.value} (stage {r.stage.value})",
                f"signature: {r.signature or '-'}",
                f"reproducer: {r.reproducer or '-'}",
                f"reproducer on its own: {_on_its_own(bugs.get(r.signature or ''))}",
            ]
            body += [
                f"before: {c.before.describe()} (run {cmp.previous_run_id})" for c in own[:1] if c.before
            ]
            if cmp.version_changes and own:
                body.append(f"versions changed: {'; '.join(cmp.version_changes)}")
            body.append(f"message: {r.message}")
            failure = ET.SubElement(
                case,
                "failure",
                {"type": r.outcome.value, "message": _text(f"{kind}: {r.signature or r.outcome.value}", 500)},
            )
            failure.text = _text("\n".join(body))
        elif r.outcome is Outcome.HARNESS_ERROR:
            error = ET.SubElement(
                case,
                "error",
                {"type": r.outcome.value, "message": _text(f"Opera's own defect: {r.signature or ''}", 500)},
            )
            error.text = _text(r.message)
        elif r.outcome in _SKIPPED:
            ET.SubElement(
                case,
                "skipped",
                {"type": r.outcome.value, "message": _text(f"{r.outcome.value}: {r.message}", 500)},
            )
        notes = [f"{c.kind.value} since run {cmp.previous_run_id}" for c in own if not r.is_failure]
        if notes:
            ET.SubElement(case, "system-out").text = _text("; ".join(notes))
    return suite


def _on_its_own(bug: BugRecord | None) -> str:
    if bug is None or not bug.reproducer:
        return "-"
    if bug.repro_status is None:
        return "not verified"
    return f"{bug.repro_status} ({bug.repro_detail})" if bug.repro_detail else bug.repro_status


def write_junit(outcome: NightlyOutcome, path: str | Path) -> Path:
    hostname = socket.gethostname()
    suites = [_suite(night, hostname) for night in outcome.nights]
    root = ET.Element(
        "testsuites",
        {
            "name": f"opera nightly {outcome.number}",
            "tests": str(sum(int(s.get("tests", "0")) for s in suites)),
            "failures": str(sum(int(s.get("failures", "0")) for s in suites)),
            "errors": str(sum(int(s.get("errors", "0")) for s in suites)),
            "time": _seconds(outcome.ended - outcome.started),
        },
    )
    root.extend(suites)
    ET.indent(root)
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    ET.ElementTree(root).write(tmp, encoding="utf-8", xml_declaration=True)
    tmp.replace(out)
    return out
