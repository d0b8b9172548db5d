"""opera harvest {torch,keras,onnx} [--source ...] -o FILE [-- PYTEST_ARGS...]"""

from __future__ import annotations

import argparse
import json

from opera import __version__
from opera.errors import HarvestError
from opera.instrumentation import RECORDERS, HarvestOptions, sources_for

HELP = "record operator instances from library test suites into a corpus file"


EPILOG = """\
any pytest suite:
  everything after a bare -- goes to pytest unchanged (test paths, -k, -x, -n 4 with pytest-xdist);
  with no --source, a harvest given -- runs the 'pytest' source on it:
    opera harvest torch -o mine.jsonl.gz -- path/to/test_nn.py -k conv
    opera harvest onnx -o theirs.jsonl.gz -- tests/test_frontend_onnx.py -n 2
  the progress bar counts pytest's tests, with the instances recorded so far beside them; pytest's
  own pass / fail / skip / xfail counts are printed and kept in the corpus header.
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.usage = "%(prog)s LIBRARY -o FILE [--source NAME ...] [options] [-- PYTEST_ARGS ...]"
    parser.epilog = EPILOG
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.add_argument("library", help=f"source library: {', '.join(RECORDERS.names())}")
    parser.add_argument("--source", action="append", default=[], help="a ready-made source (repeatable); --list-sources shows them")
    parser.add_argument("-o", "--output", help="corpus file to write (.jsonl or .jsonl.gz)")
    parser.add_argument("--limit", type=int, default=None, help="stop each source after N instances")
    parser.add_argument("--no-validate", action="store_true", help="skip the validity gate (instances are written unchecked)")
    parser.add_argument("--list-sources", action="store_true", help="list the sources of LIBRARY and exit")
    parser.add_argument("--summary-json", help="also write the harvest summary as JSON to this file")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")


def run(args: argparse.Namespace) -> int:
    from opera.harvest.driver import run_harvest

    if args.library not in RECORDERS.names():
        raise HarvestError(f"unknown library {args.library!r}; known: {', '.join(RECORDERS.names())}")
    if args.list_sources:
        for spec in sources_for(args.library):
            print(f"{spec.name:16s} {'(default) ' if spec.default else ''}{spec.description}")
        return 0
    if not args.output:
        raise HarvestError("an output file is required: -o FILE")
    sources = list(args.source)
    if args.passthrough and not sources:
        sources = ["pytest"]
    if args.limit is not None and args.limit <= 0:
        raise HarvestError("--limit must be a positive number")
    options = HarvestOptions(limit=args.limit, pytest_args=tuple(args.passthrough), show_progress=not args.quiet)
    header = {"command": _command_line(args), "opera_version": __version__}
    summary = run_harvest(args.library, sources, args.output, options, validate=not args.no_validate, header=header)
    print(summary.render())
    if args.summary_json:
        with open(args.summary_json, "w") as fh:
            json.dump(summary.to_json(), fh, indent=2)
    return 130 if summary.interrupted else 0


def _command_line(args: argparse.Namespace) -> str:
    """The command that regenerates this corpus (recorded in its header and in MANIFEST.json)."""
    parts = ["opera", "harvest", args.library]
    for source in args.source:
        parts += ["--source", source]
    if args.limit is not None:
        parts += ["--limit", str(args.limit)]
    if args.no_validate:
        parts.append("--no-validate")
    parts += ["-o", args.output]
    if args.passthrough:
        parts += ["--", *args.passthrough]
    return " ".join(parts)
