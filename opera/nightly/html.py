"""The nightly's HTML report: one self-contained file (inline CSS, plots as data URIs, no script).

Sections: the verdict (new failures or not, first night), a summary table per target (run,
versions and their changes, outcome counts, change counts), the changed tests (new failures,
changed symptoms, fixed, still failing) with links to their reproducers, the newly unsupported /
now supported operators, the time-to-bug plot (``opera.report.plots``) and the per-operator heat
map. Reproducer links are relative to the report's folder, so a CI job can archive the store's
folder and the report together. Each reproducer's verdict when re-run on its own (``reproduces``,
``not-reproduced``, ...; ``opera.reproduce.verify``) is shown next to it, and a "Reproducers"
section counts them per target and lists those that do not show their failure. With a ledger of
known bugs (``opera.nightly.known``), the new failures it knows are listed apart ("Known
failures", with the entry's status and URL), entries whose root cause stopped failing after an
upgrade are "Fixed upstream?", and entries that matched nothing tonight are listed.
"""

from __future__ import annotations

import base64
import html
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from opera.nightly.compare import Change, ChangeKind, group_changes
from opera.nightly.heatmap import plot_outcome_heatmap
from opera.outcomes import Outcome
from opera.report.plots import plot_bugs_over_time

if TYPE_CHECKING:
    from opera.nightly.pipeline import NightlyOutcome, TargetNight
    from opera.store import BugRecord

__all__ = ["bug_curve", "write_html"]

_ROW_LIMIT = 500  # per change table; the JUnit file has every test

_CSS = """
body { font-family: system-ui, sans-serif; margin: 1.5em; color: #222; max-width: 1400px; }
h1 { font-size: 1.4em; } h2 { font-size: 1.15em; margin-top: 1.6em; border-bottom: 1px solid #ccc; }
table { border-collapse: collapse; margin: 0.5em 0; font-size: 0.85em; }
th, td { border: 1px solid #ccc; padding: 3px 7px; text-align: left; vertical-align: top; }
td { overflow-wrap: anywhere; max-width: 36em; }
th { background: #f2f2f2; } td.n { text-align: right; font-variant-numeric: tabular-nums; }
.verdict { padding: 0.6em 1em; border-radius: 4px; font-weight: 600; }
.bad { background: #fde2e1; border: 1px solid #e0a09c; } .good { background: #e3f4e1; border: 1px solid #9fcf98; }
.note { background: #fff6d6; border: 1px solid #e8d48a; padding: 0.4em 0.8em; border-radius: 4px; }
code { font-size: 0.95em; } .muted { color: #777; } img { max-width: 100%; }
"""


def bug_curve(night: TargetNight) -> list[tuple[float, int]]:
    """(seconds, unique bug signatures found) along the run's prioritized order; time starts with
    the prioritization and adds each test's measured duration."""
    t = night.prioritization_s
    seen: set[str] = set()
    curve = [(0.0, 0), (t, 0)]
    for ranked in night.results:
        r = ranked.result
        t += r.duration
        if r.is_failure and r.signature and r.signature not in seen:
            seen.add(r.signature)
            curve.append((t, len(seen)))
    curve.append((t, len(seen)))
    return curve


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


def _link(path: str | None, base: Path) -> str:
    if not path:
        return '<span class="muted">-</span>'
    try:
        href = os.path.relpath(Path(path).resolve(), base.resolve())
    except ValueError:  # another drive (Windows)
        href = Path(path).resolve().as_uri()
    return f'<a href="{_e(Path(href).as_posix())}">{_e(Path(path).name)}</a>'


def _image(path: Path, alt: str) -> str:
    data = base64.b64encode(path.read_bytes()).decode("ascii")
    return f'<img alt="{_e(alt)}" src="data:image/png;base64,{data}">'


def _summary_table(outcome: NightlyOutcome) -> str:
    outcomes = list(Outcome)
    head = (
        "<tr><th>target</th><th>run</th><th>previous</th><th>status</th><th>budget (s)</th><th>tests</th>"
        + "".join(f"<th>{_e(o.value)}</th>" for o in outcomes)
        + "</tr>"
    )
    rows = []
    for night in outcome.nights:
        cmp = night.comparison
        counts = dict.fromkeys(outcomes, 0)
        for ranked in night.results:
            counts[ranked.result.outcome] += 1
        rows.append(
            "<tr>"
            f"<td>{_e(night.target)}</td><td class=n>{night.run.id}</td>"
            f"<td class=n>{_e(cmp.previous_run_id or 'first night')}</td><td>{_e(night.run.status)}</td>"
            f"<td class=n>{night.budget_s:.0f}</td><td class=n>{len(night.results)} / {night.planned}</td>"
            + "".join(f"<td class=n>{counts[o]}</td>" for o in outcomes)
            + "</tr>"
        )
    return f'<table id="summary">{head}{"".join(rows)}</table>'


def _rules_section(outcome: NightlyOutcome) -> str:
    """Per target and rule (``--oracle``): outcome counts, then the signatures the rules found."""
    from opera.run.rules import RULE_OUTCOMES

    rows = [
        f"<tr><td>{_e(night.target)}</td><td>{_e(rule)}</td>"
        + "".join(f"<td class=n>{counts.get(o, 0)}</td>" for o in RULE_OUTCOMES)
        + "</tr>"
        for night in outcome.nights
        for rule, counts in sorted(night.rule_counts.items())
    ]
    if not rows:
        return '<p class="muted">none ran tonight (<code>--oracle</code> names them)</p>'
    head = "<tr><th>target</th><th>oracle</th>" + "".join(f"<th>{_e(o)}</th>" for o in RULE_OUTCOMES) + "</tr>"
    found = [
        f"<tr><td>{_e(b.target)}</td><td class=n>{b.count}</td><td><code>{_e(b.signature)}</code></td>"
        f"<td><code>{_e(b.example_instance)}</code> ({_e(b.example_api)})</td></tr>"
        for night in outcome.nights
        for b in night.rule_bugs()
    ]
    table = f'<table id="oracles">{head}{"".join(rows)}</table>'
    if not found:
        return table + '<p class="muted">no rule failed tonight</p>'
    return (
        table
        + '<table id="oracle-findings"><tr><th>target</th><th>tests</th><th>signature</th><th>example</th></tr>'
        + "".join(found)
        + "</table>"
    )


def _changes_table(outcome: NightlyOutcome) -> str:
    kinds = list(ChangeKind)
    known = "<th>known (ledger)</th>" if outcome.ledger else ""  # new failures the ledger knows
    head = (
        "<tr><th>target</th>" + "".join(f"<th>{_e(k.value)}</th>" for k in kinds) + known + "<th>not rerun</th></tr>"
    )
    rows = [
        f"<tr><td>{_e(n.target)}</td>"
        + "".join(
            f"<td class=n>{len(n.comparison.new_failures if k is ChangeKind.NEW_FAILURE else n.comparison.of(k))}</td>"
            for k in kinds
        )
        + (f"<td class=n>{len(n.comparison.known_failures)}</td>" if outcome.ledger else "")
        + f"<td class=n>{n.comparison.not_rerun}</td></tr>"
        for n in outcome.nights
    ]
    return f'<table id="changes">{head}{"".join(rows)}</table>'


def _versions_table(outcome: NightlyOutcome) -> str:
    head = "<tr><th>target</th><th>compiler and library versions</th><th>changes since the previous nightly</th></tr>"
    rows = []
    for night in outcome.nights:
        cmp = night.comparison
        versions = night.run.versions.get(night.target, {})
        changed = "; ".join(cmp.version_changes) or ("none" if cmp.previous_run_id else "n/a (first night)")
        rows.append(
            f"<tr><td>{_e(night.target)}</td>"
            f"<td>{_e(', '.join(f'{k} {v}' for k, v in sorted(versions.items())))}, opera {_e(night.run.tool_version)}</td>"
            f"<td>{_e(changed)}</td></tr>"
        )
    return f'<table id="versions">{head}{"".join(rows)}</table>'


def _reproduces(bug: BugRecord | None) -> str:
    """A reproducer's verdict when re-run on its own, for a table cell."""
    if bug is None or not bug.reproducer:
        return '<span class="muted">-</span>'
    if bug.repro_status is None:
        return '<span class="muted">not verified</span>'
    if bug.repro_status == "reproduces":
        return "reproduces"
    return f'<b title="{_e(bug.repro_detail)}">{_e(bug.repro_status)}</b>'


def _change_table(
    table_id: str,
    changes: list[Change],
    base: Path,
    first_night: bool = False,
    bug_of: Callable[[str | None], BugRecord | None] | None = None,
) -> str:
    """One row per group of changes with the same verdicts (one bug signature, usually)."""
    if not changes:
        return f'<p id="{table_id}" class="muted">none</p>'
    head = (
        "<tr><th>target</th><th>tests</th><th>operators</th><th>before</th><th>now</th>"
        "<th>example instance</th><th>reproducer</th><th>on its own</th><th>tied to version change</th></tr>"
    )
    rows = []
    groups = group_changes(changes)
    for g in groups[:_ROW_LIMIT]:
        apis = g.apis
        shown = ", ".join(apis[:6]) + (f" and {len(apis) - 6} more" if len(apis) > 6 else "")
        example = g.changes[0].instance_id
        if g.changes[0].before is None:
            tied = "n/a (first night)" if first_night else "n/a (not run last time)"
        else:
            tied = "; ".join(g.version_changes) or "no version change"
        first = g.changes[0]
        failing = first.after if first.after.is_failure else first.before
        bug = bug_of(failing.signature) if bug_of is not None and failing is not None else None
        rows.append(
            "<tr>"
            f"<td>{_e(g.target)}</td><td class=n>{len(g.changes)}</td><td><code>{_e(shown)}</code></td>"
            f"<td>{_e(g.before)}</td><td>{_e(g.after)}</td>"
            f'<td><code title="{_e(example)}">{_e(example[:12])}</code></td>'
            f"<td>{_link(g.reproducer, base)}</td><td>{_reproduces(bug)}</td><td>{_e(tied)}</td>"
            "</tr>"
        )
    more = len(groups) - _ROW_LIMIT
    tail = f'<p class="muted">{more} more groups; every test is in the JUnit file</p>' if more > 0 else ""
    return f'<table id="{table_id}">{head}{"".join(rows)}</table>{tail}'


def _reproducers_section(outcome: NightlyOutcome, base: Path) -> str:
    """Per target: how many of its signatures' reproducers show their failure on their own; then
    the ones that do not (or were not verified), with what they did instead."""
    from opera.reproduce.verify import summarize

    head = (
        "<tr><th>target</th><th>signatures</th><th>reproduce</th><th>verified</th><th>not verified</th>"
        "<th>verdict</th></tr>"
    )
    rows, failing = [], []
    for night in outcome.nights:
        summary = summarize(night.bugs)
        rows.append(
            f"<tr><td>{_e(night.target)}</td><td class=n>{len(night.bugs)}</td>"
            f"<td class=n>{summary.reproducing}</td><td class=n>{summary.verified}</td>"
            f"<td class=n>{summary.unverified}</td><td>{_e(summary.headline())}</td></tr>"
        )
        failing += [(night.target, b) for b in night.bugs if b.reproducer and b.repro_status != "reproduces"]
    table = f'<table id="reproducers">{head}{"".join(rows)}</table>'
    if not failing:
        return table
    head = (
        "<tr><th>target</th><th>signature</th><th>reproducer</th><th>on its own</th><th>what it did</th></tr>"
    )
    items = "".join(
        f"<tr><td>{_e(t)}</td><td><code>{_e(b.signature)}</code></td><td>{_link(b.reproducer, base)}</td>"
        f"<td>{_e(b.repro_status or 'not verified')}</td><td>{_e(b.repro_detail)}</td></tr>"
        for t, b in failing[:_ROW_LIMIT]
    )
    note = "Reproducers that do not show their failure on their own (re-run them: opera bugs --verify):"
    return f'{table}<p>{_e(note)}</p><table id="reproducers-failing">{head}{items}</table>'


def _operator_table(table_id: str, outcome: NightlyOutcome, kind: ChangeKind) -> str:
    rows = [
        f"<tr><td>{_e(n.target)}</td><td><code>{_e(api)}</code></td><td class=n>{count}</td>"
        f"<td>{_e('; '.join(n.comparison.version_changes) or 'no version change')}</td></tr>"
        for n in outcome.nights
        for api, count in n.comparison.operators(kind).items()
    ]
    if not rows:
        return f'<p id="{table_id}" class="muted">none</p>'
    head = "<tr><th>target</th><th>operator</th><th>tests</th><th>tied to version change</th></tr>"
    return f'<table id="{table_id}">{head}{"".join(rows)}</table>'


def _gaps_table(outcome: NightlyOutcome) -> str:
    if not outcome.gaps:
        return '<p class="muted">none</p>'
    rows = "".join(
        f"<tr><td>{_e(g.target)}</td><td>{_e(g.api)}</td><td>{_e(g.feature)}</td><td>{g.tests}</td>"
        f"<td><code>{_e(g.example_instance)}</code></td><td>{_e(g.evidence)}</td></tr>"
        for g in outcome.gaps
    )
    return (
        '<table id="coverage-gaps"><tr><th>target</th><th>operator</th><th>missing</th><th>tests</th>'
        f"<th>example</th><th>the frontend's words</th></tr>{rows}</table>"
    )


def _harness_table(outcome: NightlyOutcome) -> str:
    found: dict[tuple[str, str], list[str]] = {}
    for night in outcome.nights:
        for ranked in night.results:
            r = ranked.result
            if r.outcome is Outcome.HARNESS_ERROR:
                found.setdefault((r.target, r.signature or "harness:?"), []).append(r.instance_id)
    if not found:
        return '<p class="muted">none</p>'
    rows = "".join(
        f"<tr><td>{_e(t)}</td><td><code>{_e(sig)}</code></td><td>{len(ids)}</td><td><code>{_e(ids[0])}</code></td></tr>"
        for (t, sig), ids in sorted(found.items())
    )
    return (
        '<table id="harness-errors"><tr><th>target</th><th>signature</th><th>tests</th><th>example</th></tr>'
        f"{rows}</table>"
    )


def _url(url: str | None) -> str:
    return f'<a href="{_e(url)}">{_e(url)}</a>' if url else '<span class="muted">-</span>'


def _ledger_sections(outcome: NightlyOutcome) -> list[str]:
    """Known failures grouped by ledger entry, "fixed upstream?", entries that matched nothing."""
    if not outcome.ledger:
        return []
    known_rows = []
    for night in outcome.nights:
        by_entry: dict[int, list[Change]] = {}
        for change in night.comparison.known_failures:
            if change.known is not None:
                by_entry.setdefault(change.known.index, []).append(change)
        for changes in by_entry.values():
            entry = changes[0].known
            assert entry is not None
            for g in group_changes(changes):
                known_rows.append(
                    f"<tr><td>{_e(g.target)}</td><td class=n>{len(g.changes)}</td>"
                    f"<td><code>{_e(', '.join(g.apis[:6]))}</code></td><td>{_e(g.before)}</td><td>{_e(g.after)}</td>"
                    f"<td>{_e(entry.name)}</td><td>{_e(entry.status)}</td><td>{_url(entry.url)}</td>"
                    f"<td>{_e(entry.reason or entry.title or '')}</td></tr>"
                )
    head = (
        "<tr><th>target</th><th>tests</th><th>operators</th><th>before</th><th>now</th><th>ledger entry</th>"
        "<th>status</th><th>URL</th><th>note</th></tr>"
    )
    known = (
        f'<table id="known-failures">{head}{"".join(known_rows)}</table>'
        if known_rows
        else '<p id="known-failures" class="muted">none</p>'
    )
    fixed = [f for n in outcome.nights if n.known is not None for f in n.known.fixed_upstream]
    head = (
        "<tr><th>target</th><th>ledger entry</th><th>status</th><th>URL</th><th>root cause (previous run)</th>"
        "<th>operators</th><th>tests passing now</th><th>version changes</th></tr>"
    )
    rows = "".join(
        f"<tr><td>{_e(f.target)}</td><td>{_e(f.entry.name)}</td><td>{_e(f.entry.status)}</td>"
        f"<td>{_url(f.entry.url)}</td><td><code>{_e(f.cause_id)}</code> (run {f.previous_run_id})</td>"
        f"<td><code>{_e(', '.join(f.apis))}</code></td><td class=n>{f.passing}</td>"
        f"<td>{_e('; '.join(f.version_changes))}</td></tr>"
        for f in fixed
    )
    upstream = f'<table id="fixed-upstream">{head}{rows}</table>' if fixed else '<p id="fixed-upstream" class="muted">none</p>'
    stale = [e for n in outcome.nights if n.known is not None for e in n.known.unmatched]
    unmatched = (
        '<ul id="ledger-unmatched">' + "".join(f"<li>{_e(e.describe())}</li>" for e in stale) + "</ul>"
        if stale
        else '<p id="ledger-unmatched" class="muted">none</p>'
    )
    return [
        f'<h2>Known failures (in the ledger <code>{_e(outcome.ledger)}</code>, not counted as new)</h2>',
        known,
        "<h2>Fixed upstream? (known last night, passing after a version change)</h2>",
        upstream,
        "<h2>Ledger entries that matched no failure tonight</h2>",
        unmatched,
    ]


def write_html(outcome: NightlyOutcome, path: str | Path) -> Path:
    out = Path(path)
    base = out.parent
    base.mkdir(parents=True, exist_ok=True)
    curves = {n.target: bug_curve(n) for n in outcome.nights}
    plot = plot_bugs_over_time(
        curves, base / "time-to-bug.png", title=f"Nightly {outcome.number}: bugs found over time"
    )
    heat = plot_outcome_heatmap(
        {n.target: [(r.result.api, r.result.outcome) for r in n.results] for n in outcome.nights},
        base / "outcome-heatmap.png",
    )
    new = outcome.new_failures()  # the ledger's known failures are listed apart
    n_known = len(outcome.known_failures())
    known_note = f" {n_known} known failure(s) in the ledger are not counted." if n_known else ""
    if outcome.interrupted:
        verdict = '<p class="verdict bad">Interrupted: the comparison covers the targets that ran.</p>'
    elif new:
        regressions = sum(len(n.comparison.regressions) for n in outcome.nights)
        verdict = (
            f'<p class="verdict bad">{len(new)} new failure(s) since the previous nightly run: '
            f"{regressions} in tests that ran without failing last time, {len(new) - regressions} in tests "
            f"not run last time.{known_note}</p>"
        )
    else:
        verdict = f'<p class="verdict good">No new failures since the previous nightly run.{known_note}</p>'
    first = outcome.first_night_targets
    notes = []
    if first:
        notes.append(
            f"First nightly run for {_e(', '.join(first))}: there is no previous nightly run to compare "
            "with, so every failure counts as new."
        )
    notes += [_e(n) for n in outcome.notes]
    upstream = [f for n in outcome.nights if n.known is not None for f in n.known.fixed_upstream]
    if upstream:
        notes.append(
            f"{len(upstream)} ledger entr{'y' if len(upstream) == 1 else 'ies'} may be fixed upstream: known last "
            "night, passing tonight after a version change (see Fixed upstream? below)."
        )
    for night in outcome.nights:
        cmp = night.comparison
        if cmp.not_rerun_failures:
            notes.append(
                f"{_e(night.target)}: {cmp.not_rerun_failures} test(s) failing in run {cmp.previous_run_id} "
                "were not run tonight (no longer in the corpus, or the budget ran out)."
            )
    started = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(outcome.started))
    junit = (
        f'<a href="{_e(os.path.relpath(outcome.junit.resolve(), base.resolve()))}">JUnit XML</a>'
        if outcome.junit
        else ""
    )
    sections = [
        f"<h1>Opera nightly {outcome.number}</h1>",
        f'<p class="muted">store <code>{_e(outcome.store)}</code>, started {started}, '
        f"{outcome.ended - outcome.started:.0f} s of a {outcome.budget_s:.0f} s budget. {junit}</p>",
        verdict,
        "".join(f'<p class="note">{n}</p>' for n in notes),
        "<h2>Summary per target</h2>",
        _summary_table(outcome),
        "<h2>Changes since the previous nightly</h2>",
        _changes_table(outcome),
        "<h2>Versions</h2>",
        _versions_table(outcome),
        "<h2>New failures</h2>",
        _change_table("new-failures", new, base, first_night=bool(first), bug_of=outcome.reproducer_status),
        *_ledger_sections(outcome),
        "<h2>Changed symptom</h2>",
        _change_table(
            "changed-symptom",
            outcome.changes(ChangeKind.CHANGED_SYMPTOM),
            base,
            bug_of=outcome.reproducer_status,
        ),
        "<h2>Fixed</h2>",
        _change_table("fixed", outcome.changes(ChangeKind.FIXED), base),
        "<h2>Still failing</h2>",
        _change_table(
            "still-failing", outcome.changes(ChangeKind.STILL_FAILING), base, bug_of=outcome.reproducer_status
        ),
        "<h2>Oracles beside the reference</h2>",
        _rules_section(outcome),
        "<h2>Reproducers</h2>",
        _reproducers_section(outcome, base),
        "<h2>Opera's own defects (harness errors)</h2>",
        _harness_table(outcome),
        "<h2>Coverage gaps (not bugs: what the frontends do not implement)</h2>",
        _gaps_table(outcome),
        "<h2>Newly unsupported operators</h2>",
        _operator_table("newly-unsupported", outcome, ChangeKind.NEWLY_UNSUPPORTED),
        "<h2>Now supported operators</h2>",
        _operator_table("now-supported", outcome, ChangeKind.NOW_SUPPORTED),
        "<h2>Time to bug</h2>",
        _image(plot, "unique bugs found over time, per target"),
        "<h2>Outcomes per operator</h2>",
        _image(heat, "heat map of outcomes per operator"),
    ]
    page = (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>Opera nightly {outcome.number}</title><style>{_CSS}</style></head><body>"
        + "\n".join(sections)
        + "</body></html>\n"
    )
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text(page, encoding="utf-8")
    tmp.replace(out)
    return out
