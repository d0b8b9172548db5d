"""opera bugs [--store] [--run]: unique bug signatures with counts and one reproducer each."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from opera.errors import OperaError
from opera.store import ResultStore

HELP = "list unique bug signatures (crash, native crash, timeout, inconsistency) with a reproducer each"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--store", default="opera.db", help="SQLite results store (default: opera.db)")
    parser.add_argument("--run", type=int, help="only signatures seen in this run (counts are that run's)")
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.add_argument(
        "--by-source",
        action="store_true",
        help="outcomes and unique signatures per source (human-written vs generated instances) instead",
    )


def run(args: argparse.Namespace) -> int:
    if not Path(args.store).exists():
        raise OperaError(f"store not found: {args.store}")
    with ResultStore(args.store) as store:
        if args.run is not None:
            store.get_run(args.run)  # a clear error for an unknown run
        if args.by_source:
            return _by_source(store, args)
        bugs = store.bugs(args.run)
    if args.json:
        print(json.dumps([{**b.__dict__, "outcome": b.outcome.value} for b in bugs], indent=2))
        return 0
    if not bugs:
        print("no bug signatures" + (f" in run {args.run}" if args.run is not None else ""))
        return 0
    for b in bugs:
        print(f"{b.count:>5}  {b.signature}")
        print(
            f"       first run {b.first_run}, last run {b.last_run}, example {b.example_instance} ({b.example_api})"
        )
        print(f"       reproducer: {b.reproducer or '-'}")
    print(f"{len(bugs)} signature(s)")
    return 0


def _by_source(store: ResultStore, args: argparse.Namespace) -> int:
    from opera.by_source import breakdown_by_source

    breakdown = breakdown_by_source(store.results(args.run))
    print(json.dumps(breakdown.to_json(), indent=2) if args.json else breakdown.render())
    return 0
