"""opera targets [--all] [--executor ray [--address A]]: the registered compiler targets, with
versions or why they are unavailable (with Ray: on every node of the cluster)."""

from __future__ import annotations

import argparse
import json
from typing import Any

from opera.quiet import quiet_native_logs
from opera.run.targets import all_targets

HELP = "list compiler targets with their versions, or the reason they are unavailable"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--all", action="store_true", help="include Opera's own test-only targets")
    parser.add_argument("--json", action="store_true", help="print JSON")
    from opera.commands.run import add_executor_arguments

    add_executor_arguments(parser)


def _ray_nodes(args: argparse.Namespace) -> int:
    from dataclasses import asdict

    from opera.run.executors.ray import connect, probe_nodes

    names = [t.name for t in all_targets(include_test_only=args.all)]
    where = connect(args.address)
    reports = probe_nodes(names)
    if args.json:
        print(json.dumps([asdict(r) for r in reports], indent=2))
        return 0
    width = max((len(n) for n in names), default=4)
    print(f"Ray cluster at {where}: {len(reports)} live node(s)")
    for r in reports:
        software = ", ".join(f"{k} {v}" for k, v in r.software.items())
        print(f"node {r.node_id[:12]} {r.address}  CPU {r.cpus:g} GPU {r.gpus:g}  {software}")
        if r.error:
            print(f"  {r.error}")
            continue
        for name in names:
            reason = r.targets.get(name)
            detail = ", ".join(f"{k} {v}" for k, v in r.versions.get(name, {}).items())
            print(f"  {name:<{width}}  {detail if reason is None else 'unavailable: ' + reason}")
    return 0


def run(args: argparse.Namespace) -> int:
    from opera.commands.run import check_executor_arguments

    check_executor_arguments(args)
    if args.executor == "ray":
        return _ray_nodes(args)
    with quiet_native_logs():  # probing imports TensorFlow, whose C++ start-up lines no one asked for
        rows = _probe(args.all)
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


def _probe(include_test_only: bool) -> list[dict[str, Any]]:
    """Each target's availability (or why not) and versions; a broken install hides no other target."""
    rows: list[dict[str, Any]] = []
    for target in all_targets(include_test_only=include_test_only):
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
    return rows
