"""opera manifest [DIR]: rewrite DIR/MANIFEST.json from the corpus files in DIR."""

from __future__ import annotations

import argparse
import json

from opera.harvest.manifest import write_manifest

HELP = "rewrite MANIFEST.json (counts, versions, regeneration commands) for a corpus directory"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("directory", nargs="?", default="harvested", help="directory of corpus files (default: harvested)")


def run(args: argparse.Namespace) -> int:
    out = write_manifest(args.directory)
    totals = json.loads(out.read_text())["totals"]
    print(f"wrote {out}: {totals['instances']} instances, {totals['valid']} valid, distinct valid APIs {totals['distinct_valid_apis']}")
    return 0
