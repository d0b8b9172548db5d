"""opera targets [--all]: the registered compiler targets, with versions or why they are unavailable."""

from __future__ import annotations

import argparse
import json
from typing import Any

from opera.targets import all_targets

HELP = "list compiler targets with their versions, or the reason they are unavailable"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--all", action="store_true", help="include Opera's own test-only targets")
    parser.add_argument("--json", action="store_true", help="print JSON")


def run(args: argparse.Namespace) -> int:
    rows: list[dict[str, Any]] = []
    for target in all_targets(include_test_only=args.all):
        try:
            reason = target.availability()
        except Exception as exc:  # a broken install must not hide the other targets
            reason = f"{type(exc).__name__}: {exc}"
        versions: dict[str, str] = {}
        if reason is None:
            try:
                versions = dict(target.versions())
            except Exception as exc:
                reason = f"versions failed: {type(exc).__name__}: {exc}"
        rows.append(
            {
                "name": target.name,
                "library": target.library,
                "compiler": target.compiler,
                "available": reason is None,
                "reason": reason,
                "versions": versions,
                "test_only": target.test_only,
            }
        )
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    width = max((len(r["name"]) for r in rows), default=4)
    for r in rows:
        detail = (
            ", ".join(f"{k} {v}" for k, v in r["versions"].items())
            if r["available"]
            else f"unavailable: {r['reason']}"
        )
        tag = " (test-only)" if r["test_only"] else ""
        print(f"{r['name']:<{width}}  {r['library']:<6} {detail}{tag}")
    return 0
