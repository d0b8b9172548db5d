"""opera run CORPUS... --target T: run instances through compiler targets into the results store."""

from __future__ import annotations

import argparse
import re
import sys
from typing import Any

from opera.errors import OperaError
from opera.run.runner import RunConfig, parse_duration, resume_run, start_run
from opera.store import RUN_INTERRUPTED

HELP = "run corpus instances through compiler targets (isolated workers, oracles, results store)"


def _size(text: str) -> int:
    match = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([kmgt]?)i?b?", text.strip().lower())
    if match is None:
        raise OperaError(f"bad memory size {text!r}: use e.g. 4G, 512M")
    return int(float(match.group(1)) * 1024 ** " kmgt".index(match.group(2) or " "))


def add_executor_arguments(parser: argparse.ArgumentParser) -> None:
    """--executor / --address (also used by `opera nightly` and `opera targets`)."""
    parser.add_argument(
        "--executor",
        choices=["local", "ray"],
        default=None,
        help="where tests run: local worker pool (default) or a Ray cluster (pip install -e '.[ray]')",
    )
    parser.add_argument(
        "--address",
        metavar="auto|HOST:PORT",
        help="Ray cluster to use: auto (the one `ray start` runs on this machine) or its GCS HOST:PORT "
        "(default: start a private Ray instance here)",
    )


def check_executor_arguments(args: argparse.Namespace) -> None:
    if args.address and args.executor != "ray":
        raise OperaError("--address needs --executor ray")


def add_worker_arguments(parser: argparse.ArgumentParser, seed_help: str) -> None:
    """--workers ... --no-reproducers: how each test runs (also used by `opera nightly`)."""
    parser.add_argument("--workers", type=int, default=None, help="worker processes (default: one per core)")
    parser.add_argument("--timeout", default=None, help="per-test timeout (default 60s)")
    parser.add_argument(
        "--max-rss",
        default=None,
        help="per-worker memory limit, e.g. 4G (default: 80%% of free memory / workers)",
    )
    parser.add_argument("--seed", type=int, default=0, help=seed_help)
    parser.add_argument("--oracle-config", help="oracle thresholds TOML (default: opera/verdict/oracles.toml)")
    parser.add_argument(
        "--unsupported-config", help="unsupported-pattern TOML (default: opera/verdict/unsupported.toml)"
    )
    parser.add_argument("--no-reproducers", action="store_true", help="do not write reproducer scripts")
    parser.add_argument(
        "--no-verify",
        action="store_true",
        help="do not re-run each bug signature's reproducer in a fresh process after the run to record "
        "whether it shows its failure (later: opera bugs --verify-pending)",
    )
    parser.add_argument(
        "--torch-tensor-args",
        choices=["constants", "inputs"],
        default="constants",
        help="torch function instances: 'constants' (default: the data tensor is the graph input; "
        "weights, bias, indices, ... are constants, as in a real model) or 'inputs' (every tensor "
        "argument is a graph input)",
    )


def worker_fields(args: argparse.Namespace, timeout_s: float | None) -> dict[str, Any]:
    """The ``RunConfig`` / ``NightlyConfig`` fields set by ``add_worker_arguments`` and
    ``add_executor_arguments`` (``timeout_s``: the parsed --timeout, None when not given)."""
    fields: dict[str, Any] = {
        "timeout_s": timeout_s if timeout_s is not None else 60.0,
        "workers": args.workers or 0,
        "seed": args.seed,
        "max_rss_bytes": _size(args.max_rss) if args.max_rss else None,
        "oracle_config": args.oracle_config,
        "unsupported_config": args.unsupported_config,
        "reproducers": not args.no_reproducers,
        "verify_reproducers": not args.no_verify,
        "executor": args.executor or "local",
        "address": args.address,
        "torch_tensor_args": args.torch_tensor_args,
    }
    return fields


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("corpus", nargs="*", help="corpus files (.jsonl / .jsonl.gz); not with --resume")
    parser.add_argument(
        "--target", "-t", action="append", default=[], help="target name (repeatable; see `opera targets`)"
    )
    parser.add_argument("--store", default="opera.db", help="SQLite results store (default: opera.db)")
    parser.add_argument(
        "--order", help="file of instance ids, one per line (# comments); others run after them"
    )
    parser.add_argument("--limit", type=int, help="run only the first N instances (after ordering)")
    parser.add_argument("--budget", help="stop starting tests after this long: 90s, 30m, 2h, 1h30m")
    add_worker_arguments(parser, seed_help="seed for generated inputs and weights (default 0)")
    parser.add_argument(
        "--resume",
        type=int,
        metavar="RUN",
        help="finish run RUN of the store (corpus, targets, order, limit, seed come from it)",
    )
    add_executor_arguments(parser)
    parser.add_argument("--quiet", "-q", action="store_true", help="no progress bar")


def run(args: argparse.Namespace) -> int:
    budget = parse_duration(args.budget) if args.budget else None
    timeout = parse_duration(args.timeout) if args.timeout else None
    if args.workers is not None and args.workers < 1:
        raise OperaError("--workers must be at least 1")
    if args.limit is not None and args.limit < 1:
        raise OperaError("--limit must be at least 1")
    check_executor_arguments(args)
    if args.resume is not None:
        given = [
            flag
            for flag, value in (
                ("CORPUS", args.corpus),
                ("--target", args.target),
                ("--order", args.order),
                ("--limit", args.limit),
                ("--oracle-config", args.oracle_config),
                ("--torch-tensor-args", args.torch_tensor_args != "constants"),
            )
            if value
        ]
        if given:
            raise OperaError(f"--resume takes {', '.join(given)} from the stored run; leave them out")
        summary = resume_run(
            args.store,
            args.resume,
            workers=args.workers,
            timeout_s=timeout,
            budget_s=budget,
            show_progress=not args.quiet,
            executor=args.executor,
            address=args.address,
            verify_reproducers=False if args.no_verify else None,
        )
    else:
        if not args.corpus:
            raise OperaError("no corpus file given")
        config = RunConfig(
            corpus=list(args.corpus),
            targets=list(args.target),
            store=args.store,
            limit=args.limit,
            order=args.order,
            budget_s=budget,
            **worker_fields(args, timeout),
        )
        summary = start_run(config, show_progress=not args.quiet)
    print(summary.render(args.store))
    if summary.status == RUN_INTERRUPTED:
        return 130
    sys.stdout.flush()
    return 0
