"""opera run CORPUS... --target T: run instances through compiler targets into the results store."""

from __future__ import annotations

import argparse
import re
import sys

from opera.errors import OperaError
from opera.run.rules import REFERENCE, parse_oracles, rule_names
from opera.run.runner import RunConfig, RunSettings, parse_duration, resume_run, start_run
from opera.selection import add_selection_arguments, selection_from_args
from opera.store import RUN_INTERRUPTED

_DEFAULTS = RunSettings()  # the flags' defaults are the settings' own

HELP = "run corpus instances through compiler targets (isolated workers, oracles, results store)"


def _size(text: str) -> int:
    match = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([kmgt]?)i?b?", text.strip().lower())
    if match is None:
        raise OperaError(f"bad memory size {text!r}: use e.g. 4G, 512M")
    return int(float(match.group(1)) * 1024 ** " kmgt".index(match.group(2) or " "))


def add_executor_arguments(parser: argparse.ArgumentParser) -> None:
    """--executor / --address (part of ``add_run_settings_arguments``; also used by `opera targets`)."""
    from opera.run.executors import EXECUTORS

    parser.add_argument(
        "--executor",
        choices=EXECUTORS.names(),  # the executor modules of opera/run/executors (and plugins)
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


def add_run_settings_arguments(parser: argparse.ArgumentParser, seed_help: str) -> None:
    """The flags of ``RunSettings`` (--store, --workers ... --torch-tensor-args, --onnx-data-inputs, --executor,
    --address): how each test runs, the same for `opera run` and `opera nightly`; read back with
    ``run_settings_from_args``."""
    parser.add_argument(
        "--store", default=_DEFAULTS.store, help=f"SQLite results store (default: {_DEFAULTS.store})"
    )
    parser.add_argument("--workers", type=int, default=None, help="worker processes (default: one per core)")
    parser.add_argument("--timeout", default=None, help="per-test timeout (default 60s)")
    parser.add_argument(
        "--max-rss",
        default=None,
        help="per-worker memory limit, e.g. 4G (default: 80%% of free memory / workers)",
    )
    parser.add_argument("--seed", type=int, default=_DEFAULTS.seed, help=seed_help)
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
        default=_DEFAULTS.torch_tensor_args,
        help="torch function instances: 'constants' (default: the data tensor is the graph input; "
        "weights, bias, indices, ... are constants, as in a real model) or 'inputs' (every tensor "
        "argument is a graph input)",
    )
    parser.add_argument(
        "--onnx-data-inputs",
        choices=["runtime", "constants"],
        default=_DEFAULTS.onnx_data_inputs,
        help="ONNX integer and bool data operands (Add's B, BitShift's Y, ...): 'runtime' graph inputs "
        "(default: the operator's kernel runs) or 'constants' (initializers: a frontend may fold the "
        "operator away at conversion). Parameter operands (shapes, axes, indices) are always constants",
    )
    parser.add_argument(
        "--oracle",
        default=REFERENCE,
        metavar="NAMES",
        help=f"oracles, comma-separated: {REFERENCE} (the library's reference; always on) and the "
        f"metamorphic/differential rules {', '.join(rule_names())}, or 'all' (default: {REFERENCE}). "
        "A rule's outcome per test is stored beside the test's; its failures are bugs of their own",
    )
    parser.add_argument(
        "--batch",
        default="auto",
        metavar="K",
        help="compile up to K tests of a batchable target (tvm-torch, ov-torch, inductor-torch, tvm-keras) as one "
        "model; passes, and the gaps a target can attribute, are decided in a batch, every other test runs alone, "
        "so verdicts are those of single runs (local executor). 1: every test alone. Default auto: batches of "
        "16 on the targets where they pay on a random slice of the corpus (tvm-torch, ov-torch, inductor-torch; "
        "docs/results.md), every test alone elsewhere",
    )
    add_executor_arguments(parser)
    add_selection_arguments(parser)


def run_settings_from_args(args: argparse.Namespace) -> RunSettings:
    """The ``RunSettings`` given by ``add_run_settings_arguments``'s flags, checked (bad values are
    one ``OperaError``)."""
    if args.workers is not None and args.workers < 1:
        raise OperaError("--workers must be at least 1")
    check_executor_arguments(args)
    return RunSettings(
        store=args.store,
        seed=args.seed,
        timeout_s=parse_duration(args.timeout) if args.timeout else _DEFAULTS.timeout_s,
        workers=args.workers or _DEFAULTS.workers,
        max_rss_bytes=_size(args.max_rss) if args.max_rss else None,
        oracle_config=args.oracle_config,
        unsupported_config=args.unsupported_config,
        reproducers=not args.no_reproducers,
        verify_reproducers=not args.no_verify,
        executor=args.executor or _DEFAULTS.executor,
        address=args.address,
        torch_tensor_args=args.torch_tensor_args,
        onnx_data_inputs=args.onnx_data_inputs,
        rules=_rules(args.oracle),
        batch=_batch(args.batch),
        selection=selection_from_args(args),
    )


def _batch(value: str | int) -> int:
    """``--batch``: ``auto`` (0) or a size of at least 1."""
    if value == "auto":
        return 0
    try:
        size = int(value)
    except ValueError:
        raise OperaError(f"--batch takes 'auto' or a number, not {value!r}") from None
    if size < 1:
        raise OperaError("--batch must be at least 1 (or 'auto')")
    return size


def _rules(text: str) -> list[str]:
    try:
        return list(parse_oracles(text))
    except ValueError as exc:
        raise OperaError(f"--oracle: {exc}") from None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("corpus", nargs="*", help="corpus files (.jsonl / .jsonl.gz); not with --resume")
    parser.add_argument(
        "--target", "-t", action="append", default=[], help="target name (repeatable; see `opera targets`)"
    )
    parser.add_argument(
        "--order", help="file of instance ids, one per line (# comments); others run after them"
    )
    parser.add_argument("--limit", type=int, help="run only the first N instances (after ordering)")
    parser.add_argument("--budget", help="stop starting tests after this long: 90s, 30m, 2h, 1h30m")
    parser.add_argument(
        "--resume",
        type=int,
        metavar="RUN",
        help="finish run RUN of the store (corpus, targets, order, limit, seed come from it)",
    )
    add_run_settings_arguments(parser, seed_help="seed for generated inputs and weights (default 0)")
    parser.add_argument("--quiet", "-q", action="store_true", help="no progress bar")


def run(args: argparse.Namespace) -> int:
    budget = parse_duration(args.budget) if args.budget else None
    settings = run_settings_from_args(args)
    if args.limit is not None and args.limit < 1:
        raise OperaError("--limit must be at least 1")
    if args.resume is not None:
        given = [
            flag
            for flag, value in (
                ("CORPUS", args.corpus),
                ("--target", args.target),
                ("--order", args.order),
                ("--limit", args.limit),
                ("--oracle-config", args.oracle_config),
                ("--unsupported-config", args.unsupported_config),
                ("--seed", args.seed != _DEFAULTS.seed),
                ("--torch-tensor-args", args.torch_tensor_args != _DEFAULTS.torch_tensor_args),
                ("--onnx-data-inputs", args.onnx_data_inputs != _DEFAULTS.onnx_data_inputs),
                ("--oracle", args.oracle != REFERENCE),
                ("--batch", _batch(args.batch) != _DEFAULTS.batch),
                ("--api/--test/--id/--sample", bool(settings.selection)),
            )
            if value
        ]
        if given:
            raise OperaError(f"--resume takes {', '.join(given)} from the stored run; leave them out")
        summary = resume_run(
            args.store,
            args.resume,
            workers=args.workers,
            timeout_s=settings.timeout_s if args.timeout else None,
            budget_s=budget,
            show_progress=not args.quiet,
            executor=args.executor,
            address=args.address,
            verify_reproducers=False if args.no_verify else None,
            max_rss_bytes=settings.max_rss_bytes,
            reproducers=False if args.no_reproducers else None,
        )
    else:
        if not args.corpus:
            raise OperaError("no corpus file given")
        config = RunConfig(
            corpus=list(args.corpus),
            targets=list(args.target),
            limit=args.limit,
            order=args.order,
            budget_s=budget,
            **settings.run_settings(),
        )
        summary = start_run(config, show_progress=not args.quiet)
    print(summary.render(args.store))
    if summary.status == RUN_INTERRUPTED:
        return 130
    sys.stdout.flush()
    return 0
