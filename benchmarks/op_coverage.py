#!/usr/bin/env python3
"""Operator-level coverage (paper 004's OTC/IDC/ODC/SPC/OLC) of a human corpus alone and with each
generated corpus, against the union of all of them (issue 14, section 4: before and after new
mutation kinds).

    python benchmarks/op_coverage.py HUMAN GENERATED_A [GENERATED_B ...] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from opera.corpus import CorpusReader
from opera.report.op_coverage import CoverageSets, operator_level_coverage


def _sets(paths: list[str]) -> CoverageSets:
    sets = CoverageSets()
    for inst in CorpusReader(paths):
        if inst.valid is not False:
            sets.add(inst)
    return sets


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("human")
    parser.add_argument("generated", nargs="+")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    block = _sets([args.human, *args.generated])
    rows = {"human": operator_level_coverage(_sets([args.human]), block).to_json()}
    for path in args.generated:
        rows[f"human + {Path(path).name}"] = operator_level_coverage(_sets([args.human, path]), block).to_json()
    print("corpus" + " " * 34 + "OTC     IDC     ODC     SPC     OLC")
    for name, row in rows.items():
        print(f"{name:<40}" + "  ".join(f"{row[k]:.4f}" for k in ("otc", "idc", "odc", "spc", "olc")))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
