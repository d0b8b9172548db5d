"""The `opera` command line: parse, call one function, print (docs/design.md, Command line).

Each verb lives in ``opera/commands/<verb>.py`` with ``HELP``, ``add_arguments(parser)`` and
``run(args) -> int``. A user error (``OperaError``) prints one line and exits with code 2.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence

from opera import __version__
from opera.errors import OperaError

# Verb -> module; the order is the order of the pipeline (docs/design.md, Command line).
VERBS: dict[str, str] = {
    "harvest": "opera.commands.harvest",
    "stats": "opera.commands.stats",
    "generate": "opera.commands.generate",
    "manifest": "opera.commands.manifest",
    "targets": "opera.commands.targets",
    "prioritize": "opera.commands.prioritize",
    "run": "opera.commands.run",
    "bugs": "opera.commands.bugs",
    "triage": "opera.commands.triage",
    "report": "opera.commands.report",
    "nightly": "opera.commands.nightly",
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="opera",
        description="Test DL-compiler frontends with operator instances migrated from DL library test suites.",
    )
    parser.add_argument("--version", action="version", version=f"opera {__version__}")
    sub = parser.add_subparsers(dest="verb", metavar="VERB")
    for verb, module_name in VERBS.items():
        module = importlib.import_module(module_name)
        verb_parser = sub.add_parser(verb, help=module.HELP, description=module.HELP)
        module.add_arguments(verb_parser)
        verb_parser.set_defaults(_run=module.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    argv = list(sys.argv[1:] if argv is None else argv)
    # Everything after a bare "--" goes to pytest untouched (opera harvest torch -o f -- tests/ -k x).
    passthrough: list[str] = []
    if "--" in argv:
        i = argv.index("--")
        argv, passthrough = argv[:i], argv[i + 1 :]
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.verb is None:
        parser.print_help()
        return 2
    args.passthrough = passthrough
    try:
        return int(args._run(args) or 0)
    except OperaError as exc:
        print(f"opera {args.verb}: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
