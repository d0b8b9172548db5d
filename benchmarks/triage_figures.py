"""Figures of `opera triage --reduce` (issue 13): signatures -> root causes per target, what the
reduction did (median instance size before/after, seconds per root cause), and how many reduced
reproducers still show their failure on their own.

    opera triage --store S -o DIR --reduce            # writes DIR/root-causes.json, DIR/reproducers/
    python benchmarks/triage_figures.py DIR [DIR ...] [--jobs 2] [--timeout 300] [-o benchmarks/results/triage.json]

Several DIRs (one `opera triage --target ...` each, run side by side) are counted as one triage.

Each reproducer runs in a fresh interpreter (exit 1: the failure shows; anything else: it does
not). ``--exit-codes FILE`` reuses lines ``<script> <exit status>`` from an earlier run instead.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from collections import Counter, defaultdict
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any


def _run(script: Path, timeout: float) -> int:
    try:
        return subprocess.run(
            [sys.executable, str(script)], cwd=script.parent, capture_output=True, timeout=timeout
        ).returncode
    except subprocess.TimeoutExpired:
        return 124


def _shows(kind: str, code: int) -> bool:
    """Exit 1: the script's own check failed; a native crash shows as its signal (128+n from a
    shell, -n from subprocess) and a hang as the timeout (124)."""
    if code == 1:
        return True
    if kind == "native-crash":
        return code < 0 or code > 128
    return kind == "timeout" and code == 124


def figures(entries: list[dict[str, Any]], exits: dict[str, int]) -> dict[str, Any]:
    per_target: dict[str, dict[str, Any]] = defaultdict(lambda: {"signatures": set(), "root_causes": 0})
    for e in entries:
        row = per_target[e["target"]]
        row["signatures"] |= set(e["signatures"])
        row["root_causes"] += 1
    table = {
        t: {
            "signatures": len(r["signatures"]),
            "root_causes": r["root_causes"],
            "ratio": round(r["root_causes"] / len(r["signatures"]), 2),
        }
        for t, r in sorted(per_target.items())
    }
    reductions = [e["reduction"] for e in entries if e.get("reduction")]
    out: dict[str, Any] = {
        "root_causes": len(entries),
        "signatures": len({s for e in entries for s in e["signatures"]}),
        "per_target": table,
        "symptoms": dict(Counter(e["kind"] for e in entries)),
    }
    if reductions:
        out["reduction"] = {
            "reduced": len(reductions),
            "median_size_before": statistics.median(r["size_before"] for r in reductions),
            "median_size_after": statistics.median(r["size_after"] for r in reductions),
            "median_seconds": round(statistics.median(r["seconds"] for r in reductions), 2),
            "max_seconds": round(max(r["seconds"] for r in reductions), 1),
            "stopped_because": dict(Counter(r["stopped_because"] for r in reductions)),  # flaky: the original did not fail again; reclassified: today undefined, invalid or unsupported
            "still_failing_in_the_run": sum(bool(r.get("still_fails")) for r in reductions),
        }
    if exits:
        shown = [e["id"] for e in entries if e["id"] in exits and _shows(e["kind"], exits[e["id"]])]
        out["reproducers"] = {
            "run": len(exits),
            "reproduce": len(shown),
            "share": round(len(shown) / len(exits), 4),
            "exit_codes": dict(Counter(str(c) for c in exits.values())),
            "not_reproduced": sorted(e["id"] for e in entries if e["id"] in exits and e["id"] not in shown),
        }
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("triage_dirs", type=Path, nargs="+", help="`opera triage -o DIR` folders")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=300.0, help="per reproducer, seconds")
    parser.add_argument("--exit-codes", type=Path, help="reuse '<script> <exit status>' lines")
    parser.add_argument("--no-scripts", action="store_true", help="do not run the reproducers")
    parser.add_argument("-o", "--output", type=Path, default=Path("benchmarks/results/triage.json"))
    args = parser.parse_args()
    entries: list[dict[str, Any]] = []
    scripts: dict[str, Path] = {}
    for folder in args.triage_dirs:
        listing = folder / "root-causes.json"
        if not listing.exists():
            parser.error(f"{listing} not found: run opera triage -o {folder} first")
        found = json.loads(listing.read_text())
        entries += found
        scripts |= {e["id"]: folder / "reproducers" / f"{e['id']}.py" for e in found}
    exits: dict[str, int] = {}
    if args.exit_codes is not None:
        for line in args.exit_codes.read_text().splitlines():
            name, _, code = line.rpartition(" ")
            if name:
                exits[Path(name).stem] = int(code)
    elif not args.no_scripts:
        present = {i: p for i, p in scripts.items() if p.exists()}
        with ThreadPoolExecutor(args.jobs) as pool:
            for rc_id, code in zip(present, pool.map(lambda p: _run(p, args.timeout), present.values()), strict=True):
                exits[rc_id] = code
    out = figures(entries, exits)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(out, indent=2) + "\n")
    print(json.dumps({k: v for k, v in out.items() if k != "reproducers"} | (
        {"reproducers": {k: v for k, v in out["reproducers"].items() if k != "not_reproduced"}} if "reproducers" in out else {}
    ), indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
