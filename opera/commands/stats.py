"""opera stats CORPUS...: what a corpus holds (per library, API, source, validity)."""

from __future__ import annotations

import argparse
import json

from opera.harvest.stats import corpus_stats

HELP = "summarize corpus files: instances, distinct APIs, sources, validity"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("corpus", nargs="+", help="corpus files (.jsonl / .jsonl.gz)")
    parser.add_argument("--skip-malformed", action="store_true", help="skip and count malformed lines instead of failing")
    parser.add_argument("--json", action="store_true", help="print JSON instead of text")
    parser.add_argument("--top", type=int, default=10, help="how many of the most frequent APIs to list")
    parser.add_argument(
        "--op-coverage",
        action="store_true",
        help="operator-level coverage (OTC, IDC, ODC, SPC, OLC of ../shared/papers/004) per library and origin "
        "(human-written, tool-generated, both), against the union of the given corpora",
    )


def run(args: argparse.Namespace) -> int:
    if args.op_coverage:
        return _op_coverage(args)
    stats = corpus_stats(args.corpus, skip_malformed=args.skip_malformed)
    print(json.dumps(stats.to_json(), indent=2) if args.json else stats.render(top=args.top))
    return 0


def _op_coverage(args: argparse.Namespace) -> int:
    from opera.corpus import CorpusReader
    from opera.model import Origin
    from opera.report.op_coverage import CoverageSets, operator_level_coverage

    groups: dict[str, dict[str, CoverageSets]] = {}
    for inst in CorpusReader(args.corpus, skip_malformed=args.skip_malformed):
        if inst.valid is False:
            continue
        origin = "generated" if inst.source.origin is Origin.TOOL else "human"
        sets = groups.setdefault(inst.library, {"human": CoverageSets(), "generated": CoverageSets(), "both": CoverageSets()})
        sets[origin].add(inst)
        sets["both"].add(inst)
    report = {
        library: {origin: operator_level_coverage(s, sets["both"]).to_json() for origin, s in sets.items() if s.operators}
        for library, sets in sorted(groups.items())
    }
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    print("library  origin      operators  OTC     IDC     ODC     SPC     OLC")
    for library, rows in report.items():
        for origin, row in rows.items():
            print(
                f"{library:<8} {origin:<11} {row['operators']:>9}  "
                + "  ".join(f"{row[k]:.4f}" for k in ("otc", "idc", "odc", "spc", "olc"))
            )
    return 0
