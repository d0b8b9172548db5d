"""Render a report as Markdown, self-contained HTML (inline SVG plots) and JSON."""

from __future__ import annotations

import html
import json
import math
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from opera.report.apfd import RAUC_LEVELS
from opera.report.tables import SKIPPED, UNDEFINED, apfd_frame, outcome_frame

if TYPE_CHECKING:
    from opera.report.build import Report

__all__ = ["render_html", "render_json", "render_markdown"]

Table = tuple[list[str], list[list[str]]]

_RAUC_HEADERS = [f"RAUC-{round(level * 100)}%" for level in RAUC_LEVELS]


def _fmt(value: Any, digits: int = 3) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def _when(stamp: float | None) -> str:
    return "-" if stamp is None else time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(stamp))


def apfd_tables(report: Report) -> dict[str, Table]:
    """target -> (header, rows) of the APFD table, formatted for reading."""
    frame = apfd_frame(report)
    header = ["strategy", "APFD", *_RAUC_HEADERS, "prioritization (s)", "time to all bugs (s)", "note"]
    out: dict[str, Table] = {}
    for target in report.targets:
        rows: list[list[str]] = []
        for row in frame[frame["target"] == target].to_dict("records"):
            if row["status"] == SKIPPED:
                cells = ["skipped"] + ["-"] * (len(header) - 3)
            elif row["status"] == UNDEFINED:
                cells = ["undefined"] + ["-"] * (len(RAUC_LEVELS)) + [_fmt(row["prioritization_s"], 2), "-"]
            else:
                apfd = _fmt(row["apfd"])
                if row["seeds"] > 1:
                    apfd += f" ± {_fmt(row['apfd_std'])} ({row['seeds']} seeds)"
                cells = [
                    apfd,
                    *(_fmt(row[f"rauc_{round(level * 100)}"]) for level in RAUC_LEVELS),
                    _fmt(row["prioritization_s"], 2),
                    _fmt(row["time_to_all_bugs_s"], 1),
                ]
            rows.append([row["strategy"], *cells, row["note"]])
        out[target] = (header, rows)
    return out


def outcomes_table(report: Report) -> Table:
    frame = outcome_frame(report)
    return [str(c) for c in frame.columns], [[_fmt(v) for v in r] for r in frame.itertuples(index=False)]


def signatures_table(report: Report, target: str) -> Table:
    tests = report.targets[target].tests
    count: dict[str, int] = {}
    first: dict[str, int] = {}
    for k, iid in enumerate(tests.ids, 1):
        sig = tests.bug_of.get(iid)
        if sig is not None:
            count[sig] = count.get(sig, 0) + 1
            first.setdefault(sig, k)
    rows = [[sig, str(count[sig]), str(first[sig])] for sig in sorted(count, key=first.__getitem__)]
    return ["bug signature", "tests", "first test in run order"], rows


def _run_facts(report: Report) -> list[tuple[str, str]]:
    run = report.data.run
    versions = "; ".join(
        f"{t}: " + ", ".join(f"{k} {v}" for k, v in sorted(vs.items()))
        for t, vs in sorted(run.versions.items())
    )
    return [
        ("store", report.data.store),
        ("run", f"{run.id} ({run.status}), started {_when(run.started)}, ended {_when(run.ended)}"),
        ("corpus", ", ".join(run.corpus)),
        ("targets", ", ".join(report.targets)),
        ("compiler versions", versions or "-"),
        ("opera", run.tool_version),
        ("equipped", ", ".join(report.settings.equipped) or "none"),
        (
            "coverage data",
            ", ".join(f"{t}={p}" for t, p in report.settings.coverage.items()) or "none",
        ),
    ]


METHOD = (
    "Each strategy orders the run's own instances for each target (the code of `opera prioritize`); "
    "each order is evaluated offline against the outcomes the run recorded. APFD = 1 - sum(p_i)/(n*m) + 1/(2n) "
    "over the target's unique bug signatures (p_i: rank of the first test revealing signature i). "
    "RAUC-k: area under the bugs-found curve over the first k% of the order divided by the ideal area. "
    "Time curves add each test's measured duration (serial, as if one worker ran them) after the "
    "strategy's own prioritization time. `run` is the order the run actually executed."
)


# ---- Markdown --------------------------------------------------------------------------------


def _md_escape(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _md_table(table: Table) -> str:
    header, rows = table
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(_md_escape(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def render_markdown(report: Report, plots: Mapping[str, Sequence[str]] | None = None) -> str:
    """``plots``: target -> plot file names (relative to the report) to link."""
    out = [f"# Opera report: run {report.run_id}", ""]
    out += [f"- **{k}**: {_md_escape(v)}" for k, v in _run_facts(report)]
    out += ["", METHOD, ""]
    if report.notes:
        out += ["## Notes", ""] + [f"- {n}" for n in report.notes] + [""]
    out += ["## Outcomes", "", _md_table(outcomes_table(report)), ""]
    tables = apfd_tables(report)
    for target, t in report.targets.items():
        out += [f"## {target}", ""]
        if not t.apfd_defined:
            out += [
                f"**APFD undefined**: no test on {target} revealed a bug signature "
                f"({len(t.tests.ids)} tests), so there is nothing to order towards.",
                "",
            ]
        out += [_md_table(tables[target]), ""]
        sigs = signatures_table(report, target)
        if sigs[1]:
            out += [_md_table(sigs), ""]
        for name in (plots or {}).get(target, []):
            if name.endswith(".png"):
                out += [f"![bugs found over time on {target}]({name})", ""]
    return "\n".join(out)


# ---- HTML ------------------------------------------------------------------------------------

_CSS = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1100px; color: #222; }
table { border-collapse: collapse; margin: 0.8em 0; font-size: 0.92em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: left; }
th { background: #f3f3f3; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
.undefined { background: #fff3cd; padding: 0.5em; border: 1px solid #e0c060; }
dl { display: grid; grid-template-columns: max-content auto; gap: 0.2em 1em; }
dt { font-weight: bold; }
"""


def _is_num(text: str) -> bool:
    try:
        float(text.split()[0])
    except (ValueError, IndexError):
        return False
    return True


def _html_table(table: Table, css_class: str = "") -> str:
    header, rows = table
    parts = [f'<table class="{css_class}">' if css_class else "<table>", "<tr>"]
    parts += [f"<th>{html.escape(h)}</th>" for h in header]
    parts.append("</tr>")
    for row in rows:
        cells = "".join(
            f'<td class="num">{html.escape(c)}</td>' if _is_num(c) else f"<td>{html.escape(c)}</td>"
            for c in row
        )
        parts.append(f"<tr>{cells}</tr>")
    parts.append("</table>")
    return "\n".join(parts)


def render_html(report: Report, svgs: Mapping[str, str] | None = None) -> str:
    """A self-contained page; ``svgs``: target -> inline ``<svg>`` of its bugs-over-time plot."""
    title = f"Opera report: run {report.run_id}"
    body = [f"<h1>{html.escape(title)}</h1>", "<dl>"]
    body += [f"<dt>{html.escape(k)}</dt><dd>{html.escape(v)}</dd>" for k, v in _run_facts(report)]
    body += ["</dl>", f"<p>{html.escape(METHOD)}</p>"]
    if report.notes:
        body += ["<h2>Notes</h2>", "<ul>"] + [f"<li>{html.escape(n)}</li>" for n in report.notes] + ["</ul>"]
    body += ["<h2>Outcomes</h2>", _html_table(outcomes_table(report), "outcomes")]
    tables = apfd_tables(report)
    for target, t in report.targets.items():
        body.append(f"<h2>{html.escape(target)}</h2>")
        if not t.apfd_defined:
            body.append(
                f'<p class="undefined"><b>APFD undefined</b>: no test on {html.escape(target)} revealed a bug '
                f"signature ({len(t.tests.ids)} tests), so there is nothing to order towards.</p>"
            )
        body.append(_html_table(tables[target], "apfd"))
        sigs = signatures_table(report, target)
        if sigs[1]:
            body.append(_html_table(sigs, "signatures"))
        svg = (svgs or {}).get(target)
        if svg:
            body.append(f'<figure class="plot">{svg}</figure>')
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{html.escape(title)}</title><style>{_CSS}</style></head>\n<body>\n"
        + "\n".join(body)
        + "\n</body></html>\n"
    )


# ---- JSON ------------------------------------------------------------------------------------


def _clean(value: Any) -> Any:
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    if hasattr(value, "item"):  # numpy scalars from pandas
        return _clean(value.item())
    return value


def render_json(report: Report) -> str:
    run = report.data.run
    frame = apfd_frame(report)
    targets: dict[str, Any] = {}
    for name, t in report.targets.items():
        curves = {e.strategy: [[round(x, 6), y] for x, y in e.curve] for e in t.evaluations}
        per_seed = {e.strategy: e.apfd_per_seed for e in t.evaluations if e.apfd_per_seed}
        targets[name] = {
            "tests": len(t.tests.ids),
            "planned": t.tests.planned,
            "outcomes": t.tests.outcomes,
            "bug_signatures": t.tests.signatures,
            "apfd_defined": t.apfd_defined,
            "strategies": frame[frame["target"] == name].to_dict("records"),
            "apfd_per_seed": per_seed,
            "skipped": {s.strategy: s.reason for s in t.skipped},
            "curves": curves,
        }
    doc = {
        "format": "opera-report",
        "version": 1,
        "store": report.data.store,
        "run": {
            "id": run.id,
            "status": run.status,
            "started": run.started,
            "ended": run.ended,
            "corpus": run.corpus,
            "versions": run.versions,
            "tool_version": run.tool_version,
            "partial": report.data.partial,
        },
        "settings": {
            "strategies": list(report.settings.strategies) if report.settings.strategies else None,
            "equipped": list(report.settings.equipped),
            "coverage": dict(report.settings.coverage),
            "random_seeds": report.settings.random_seeds,
            "precover_equipped": report.settings.precover_equipped,
            "zero_case": report.settings.zero_case,
        },
        "notes": report.notes,
        "targets": targets,
    }
    return json.dumps(_clean(doc), indent=1, sort_keys=False)
