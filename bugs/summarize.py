"""Regenerate the summary table of bugs/README.md from bugs/verdicts.tsv (the hand-judged verdict of
every triaged root cause; its optional ``source`` column says whether the root cause came from
the human-written corpus or the generated one, default human) and the per-bug folders
bugs/<target>/<id>/ and bugs/generated/<target>/<id>/.

    python bugs/summarize.py            # prints the Markdown table block; paste it into README.md
"""

from __future__ import annotations

import csv
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main() -> None:
    with (HERE / "verdicts.tsv").open() as f:
        rows = list(csv.DictReader(f, delimiter="\t"))
    targets = sorted({r["target"] for r in rows})
    verdicts = ["REAL", "UNSUPPORTED", "UNDEFINED", "LIBRARY", "HARNESS"]
    print("| target | judged | " + " | ".join(verdicts) + " | REAL crash | REAL wrong result | REAL hang |")
    print("|---|---:|" + "---:|" * (len(verdicts) + 3))
    total: Counter[str] = Counter()
    for t in targets + ["all"]:
        mine = [r for r in rows if t == "all" or r["target"] == t]
        c = Counter(r["verdict"] for r in mine)
        real = [r for r in mine if r["verdict"] == "REAL"]
        sym = Counter(r["symptom"] for r in real)
        name = f"**{t}**" if t == "all" else t
        cells = [str(len(mine))] + [str(c.get(v, 0)) for v in verdicts]
        cells += [str(sym.get("crash", 0)), str(sym.get("wrong-result", 0)), str(sym.get("hang", 0))]
        print(f"| {name} | " + " | ".join(cells) + " |")
        total += c
    print("\n| source | judged | REAL | REAL crash | REAL wrong result | REAL hang |")
    print("|---|---:|---:|---:|---:|---:|")
    for source in ("human", "generated", "tvm-suite"):
        mine = [r for r in rows if (r.get("source") or "human") == source]
        real = [r for r in mine if r["verdict"] == "REAL"]
        sym = Counter(r["symptom"] for r in real)
        cells = [len(mine), len(real), sym.get("crash", 0), sym.get("wrong-result", 0), sym.get("hang", 0)]
        print(f"| {source} | " + " | ".join(str(c) for c in cells) + " |")
    folders = sorted(p.parent.name for p in HERE.glob("**/rc-*/README.md"))
    print(f"\n{len(folders)} REAL root causes have a folder with README.md (evidence) and a reproducer.")


if __name__ == "__main__":
    main()
