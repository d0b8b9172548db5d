"""Re-judge the hand-judged root causes with today's Opera: which are still reported as bugs?

The judged triage (``bugs/verdicts.tsv``: one line per root cause with its REAL / UNSUPPORTED /
HARNESS / UNDEFINED / LIBRARY verdict) was made on an older Opera. Each verdict class that is not
REAL was then fixed as a class (issue 11). This script re-runs every judged root cause's example
instance (from ``root-causes.json`` of the triage that judged it) on its target with the current
checkout, in isolated workers (``opera run``), and reports per verdict how many are still reported
as a bug (crash, native-crash, timeout, inconsistent), how many became a coverage gap
(``unsupported``) and how many no longer fail. The rates issue 11 asks for are computed over the
root causes still reported as bugs: UNSUPPORTED listed as bugs, and HARNESS + UNDEFINED + LIBRARY.

One example instance stands for its root cause (the one the report and the reproducer show).

    python benchmarks/verdict_recheck.py --verdicts bugs/verdicts.tsv \
        --root-causes TRIAGE_DIR/root-causes.json [--root-causes ...] -o benchmarks/results/verdict_recheck.json
"""

from __future__ import annotations

import argparse
import gzip
import json
import subprocess
import sys
import tempfile
from collections import Counter, defaultdict
from pathlib import Path

from opera.outcomes import FAILURE_OUTCOMES
from opera.store import ResultStore

ROOT = Path(__file__).resolve().parents[1]
CORPORA = sorted((ROOT / "harvested").glob("*.jsonl.gz"))
NOT_A_BUG = ("HARNESS", "UNDEFINED", "LIBRARY")


def read_verdicts(paths: list[Path]) -> dict[str, tuple[str, str]]:
    """root cause id -> (target, verdict); a later file wins."""
    out: dict[str, tuple[str, str]] = {}
    for path in paths:
        for line in path.read_text().splitlines():
            cells = line.split("\t")
            if len(cells) < 3 or cells[0] == "id":
                continue
            out[cells[0]] = (cells[1], cells[2].strip())
    return out


def examples(paths: list[Path]) -> dict[str, str]:
    """root cause id -> its example instance id."""
    out: dict[str, str] = {}
    for path in paths:
        for cause in json.loads(path.read_text()):
            out[cause["id"]] = cause["example_instance"]
    return out


def corpus_lines(wanted: set[str]) -> dict[str, tuple[str, str]]:
    """instance id -> (library, JSON line) for the wanted ids, from every shipped corpus."""
    found: dict[str, tuple[str, str]] = {}
    for path in CORPORA:
        with gzip.open(path, "rt") as f:
            header = json.loads(next(f))
            for line in f:
                at = line.find('"id":"')
                if at < 0 or line[at + 6 : at + 26] not in wanted:
                    continue
                ident = json.loads(line)["id"]
                if ident in wanted and ident not in found:
                    found[ident] = (header["library"], line)
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--verdicts", type=Path, action="append", required=True)
    parser.add_argument("--root-causes", type=Path, action="append", required=True)
    parser.add_argument("-o", "--output", type=Path, required=True)
    parser.add_argument("--workers", type=int, default=1)
    args = parser.parse_args()

    verdicts = read_verdicts(args.verdicts)
    example = examples(args.root_causes)
    missing = sorted(c for c in verdicts if c not in example)
    judged = {c: v for c, v in verdicts.items() if c in example}
    lines = corpus_lines({example[c] for c in judged})
    by_target: dict[str, list[str]] = defaultdict(list)
    for cause, (target, _) in sorted(judged.items()):
        if example[cause] in lines:
            by_target[target].append(cause)
    now: dict[str, str] = {}
    with tempfile.TemporaryDirectory(prefix="opera-recheck-") as tmp:
        for target, causes in sorted(by_target.items()):
            library = lines[example[causes[0]]][0]
            corpus = Path(tmp) / f"{target}.jsonl"
            header = {"$schema": "opera-corpus", "version": 1, "library": library, "sources": ["recheck"]}
            ids = sorted({example[c] for c in causes})
            corpus.write_text(json.dumps(header) + "\n" + "".join(lines[i][1].rstrip("\n") + "\n" for i in ids))
            store = Path(tmp) / f"{target}.db"
            command = [sys.executable, "-c", "import sys; from opera.cli import main; sys.exit(main())", "run", str(corpus), "-t", target, "--store", str(store)]
            command += ["--no-reproducers", "--no-verify", "-q", "--workers", str(args.workers)]
            print(f"{target}: {len(ids)} example instance(s)", file=sys.stderr)
            subprocess.run(command, check=False, stdout=subprocess.DEVNULL)
            with ResultStore(str(store)) as db:
                outcome = {r.instance_id: r.outcome.value for r in db.results()}
            for cause in causes:
                now[cause] = outcome.get(example[cause], "not run")

    failure = {o.value for o in FAILURE_OUTCOMES}

    def state(cause: str) -> str:
        got = now.get(cause, "not run")
        return "bug" if got in failure else "gap" if got == "unsupported" else "not run" if got == "not run" else "no failure"

    table: dict[str, Counter[str]] = defaultdict(Counter)
    for cause, (_, verdict) in judged.items():
        table[verdict][state(cause)] += 1
    still = {c: v for c, (_, v) in judged.items() if state(c) == "bug"}
    n = len(still)
    counted = Counter(still.values())
    result = {
        "judged": len(judged),
        "without_example": missing,
        "per_verdict": {v: dict(c) for v, c in sorted(table.items())},
        "still_reported_as_bugs": n,
        "among_them": dict(counted),
        "unsupported_share": round(counted["UNSUPPORTED"] / n, 4) if n else None,
        "harness_undefined_library_share": round(sum(counted[v] for v in NOT_A_BUG) / n, 4) if n else None,
        "real_share": round(counted["REAL"] / n, 4) if n else None,
        "per_root_cause": {c: {"verdict": judged[c][1], "target": judged[c][0], "now": now.get(c, "not run")} for c in sorted(judged)},
    }
    args.output.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps({k: v for k, v in result.items() if k != "per_root_cause"}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
