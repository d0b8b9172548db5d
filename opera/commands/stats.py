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


def run(args: argparse.Namespace) -> int:
    stats = corpus_stats(args.corpus, skip_malformed=args.skip_malformed)
    print(json.dumps(stats.to_json(), indent=2) if args.json else stats.render(top=args.top))
    return 0
