"""Reduction on real failures (issue 13, item 2): how small, how fast, and do the reduced ones still fail?

For each bug signature of a store (of one run, or of all runs; the first N with ``--limit``), the
signature's example instance (the smallest failing one, found in the corpus files) is reduced on
its target with ``opera.triage.reduce`` (each candidate isolated on a worker of the local executor,
one worker per target kept for all its signatures). Then every reduced instance is checked twice:

- re-run as a test on a *fresh* worker: does it still fail with the same signature?
- its standalone reproducer script (written by that worker for the reduced instance, run in a fresh
  process by ``opera.reproduce.verify``): does it reproduce? (a worker that died writes none: then
  the fresh-worker verdict is all there is.)

Writes ``benchmarks/results/reduction.json``: median instance size before/after, median seconds per
reduction, the share of reduced instances that still fail and of reproducers that reproduce, and
one row per signature.

    python benchmarks/reduction.py STORE CORPUS [CORPUS ...] [--run N] [--limit N] [--budget 60]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import shown  # noqa: E402

from opera.model import OperatorInstance  # noqa: E402
from opera.run.executors import WorkerSettings  # noqa: E402
from opera.run.runner import RunConfig, load_instances  # noqa: E402
from opera.store import BugRecord, ResultStore  # noqa: E402
from opera.triage.reduce import Reduction, reduce_instance, still_fails_on, tensor_elements  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results" / "reduction.json"


def _settings(store: ResultStore, bug: BugRecord, timeout_s: float | None) -> WorkerSettings:
    """The worker settings of the run that first saw the bug (seed, oracle and unsupported configs)."""
    config = RunConfig.from_json(store.get_run(bug.first_run).config)
    return WorkerSettings(
        seed=config.seed,
        timeout_s=timeout_s or config.timeout_s,
        oracle_config=config.oracle_config,
        unsupported_config=config.unsupported_config,
        torch_tensor_args=config.torch_tensor_args,
    )


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("store", type=Path)
    parser.add_argument("corpus", nargs="+", type=Path)
    parser.add_argument("--run", type=int, default=None, help="only this run's signatures (default: all)")
    parser.add_argument("--limit", type=int, default=None, help="the first N signatures")
    parser.add_argument("--budget", type=float, default=60.0, help="seconds per reduction")
    parser.add_argument("--max-candidates", type=int, default=200)
    parser.add_argument("--rechecks", type=int, default=1, help="re-checks of the original before it is flaky")
    parser.add_argument("--timeout", type=float, default=None, help="per-candidate timeout (default: the run's)")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    for path in [args.store, *args.corpus]:
        if not path.exists():
            parser.error(f"{path} does not exist")

    instances = load_instances([str(p) for p in args.corpus])
    with ResultStore(str(args.store)) as store:
        bugs = store.bugs(args.run)
        bugs = bugs[: args.limit] if args.limit else bugs
        settings = {b.signature: _settings(store, b, args.timeout) for b in bugs}
    missing = [b.signature for b in bugs if b.example_instance not in instances]
    bugs = [b for b in bugs if b.example_instance in instances]

    rows: list[dict[str, Any]] = []
    reductions: dict[str, tuple[BugRecord, Reduction]] = {}
    started = time.monotonic()
    by_target: dict[str, list[BugRecord]] = {}
    for bug in bugs:
        by_target.setdefault(bug.target, []).append(bug)
    for target, target_bugs in by_target.items():
        first = target_bugs[0]
        timeout = settings[first.signature].timeout_s
        with still_fails_on(target, first.signature, timeout_s=timeout, settings=settings[first.signature]) as pred:
            for bug in target_bugs:
                pred.signature = bug.signature
                original: OperatorInstance = instances[bug.example_instance]
                reduction = reduce_instance(
                    original, pred, budget_s=args.budget, max_candidates=args.max_candidates, rechecks=args.rechecks
                )
                reductions[bug.signature] = (bug, reduction)
                print(f"{bug.signature}: {reduction.summary()}", flush=True)

    # re-check each reduced instance on a fresh worker, and its standalone reproducer
    from opera.reproduce.verify import REPRODUCES, classify, run_reproducer

    with tempfile.TemporaryDirectory(prefix="opera-reduction-") as repro_dir:
        for target, target_bugs in by_target.items():
            first = target_bugs[0]
            timeout = settings[first.signature].timeout_s
            with still_fails_on(
                target, first.signature, timeout_s=timeout, settings=settings[first.signature], reproducer_dir=repro_dir
            ) as fresh:
                for bug in target_bugs:
                    _, reduction = reductions[bug.signature]
                    fresh.signature = bug.signature
                    outcome = fresh.run_task(reduction.reduced)
                    assert outcome.result is not None
                    still = fresh.matches(outcome.result)
                    repro_status, repro_detail = None, ""
                    if outcome.reproducer is not None:
                        script = run_reproducer(outcome.reproducer, target, timeout)
                        repro_status, repro_detail = classify(bug.outcome, bug.signature, script)
                        os.unlink(outcome.reproducer)
                    rows.append(
                        {
                            "signature": bug.signature,
                            "target": target,
                            "api": bug.example_api,
                            **reduction.to_json(),
                            "elements_before": tensor_elements(reduction.original),
                            "elements_after": tensor_elements(reduction.reduced),
                            "still_fails": still,
                            "recheck": outcome.result.signature or outcome.result.outcome.value,
                            "reproducer": repro_status,
                            "reproducer_detail": repro_detail[:200],
                        }
                    )

    done = [r for r in rows if not r["flaky"]]
    scripts = [r for r in done if r["reproducer"] is not None]
    summary = {
        "store": shown(args.store),
        "corpus": [shown(p) for p in args.corpus],
        "run": args.run,
        "budget_s": args.budget,
        "max_candidates": args.max_candidates,
        "rechecks": args.rechecks,
        "cpus": os.cpu_count(),
        "signatures": len(rows),
        "not_in_corpus": missing,
        "flaky": len(rows) - len(done),
        "median_size_before": _median([r["size_before"] for r in done]),
        "median_size_after": _median([r["size_after"] for r in done]),
        "median_size_ratio": _median([r["size_after"] / r["size_before"] for r in done]),
        "median_elements_before": _median([r["elements_before"] for r in done]),
        "median_elements_after": _median([r["elements_after"] for r in done]),
        "median_seconds": _median([r["seconds"] for r in done]),
        "median_candidates": _median([r["candidates"] for r in done]),
        "stopped_because": dict(Counter(r["stopped_because"] for r in done)),
        "still_failing": sum(r["still_fails"] for r in done),
        "still_failing_rate": (sum(r["still_fails"] for r in done) / len(done)) if done else None,
        "reproducers_written": len(scripts),
        "reproducers_reproducing": sum(r["reproducer"] == REPRODUCES for r in scripts),
        "total_seconds": round(time.monotonic() - started, 1),
        "rows": rows,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(summary, indent=2, sort_keys=False) + "\n")
    print(json.dumps({k: v for k, v in summary.items() if k != "rows"}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
