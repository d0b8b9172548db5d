#!/usr/bin/env python3
"""The ceiling of batched compilation (issue 16): what a batch of passing tests only costs per test.

A random slice holds failures, and each of them runs alone at its full cost; but even a batch that
held nothing but passes would cost something per test. This measures that cost on one warmed
process: a seeded sample of torch instances runs alone once (to find the passes), the passes run
alone again (timed), then in batches of K (timed, with the time inside torch's export and
decomposition, the target's convert, compile and run per test). The ratio of the two is the most a
batch can gain over the fixed costs alone on these operators.

    python benchmarks/batch_ceiling.py -t tvm-torch -n 240 [--batch 16]

tvm-torch only: Inductor's on-disk kernel cache would serve the second pass from the first in one
process (so "alone" would skip code generation), and one process cannot outlive an instance that
kills it natively (a few ov-torch instances do). Rows are merged into
``benchmarks/results/batch_ceiling.json`` keyed by (target, n, seed, batch).
"""

from __future__ import annotations

import argparse
import collections
import sys
import time
from pathlib import Path
from typing import Any

from _common import save_row, time_calls
from fixed_costs import sample

RESULTS = Path(__file__).resolve().parent / "results" / "batch_ceiling.json"
CORPUS = Path(__file__).resolve().parents[1] / "harvested" / "torch.jsonl.gz"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("-t", "--target", default="tvm-torch", choices=["tvm-torch"])
    parser.add_argument("-n", type=int, default=240)
    parser.add_argument("--seed", type=int, default=5)
    parser.add_argument("--batch", type=int, default=16)
    args = parser.parse_args(argv)

    import opera.run.targets.tvm as tvm_target
    from opera.run import batch
    from opera.run.execution import WorkerState, execute_task
    from opera.run.executors import TestTask, WorkerSettings

    def alone(state: Any, insts: list[Any]) -> list[Any]:
        return [
            execute_task(TestTask(k, inst, args.target), state, lambda s: None, lambda *a: None)
            for k, inst in enumerate(insts)
        ]

    instances = sample(str(CORPUS), "torch", args.n, args.seed)
    state = WorkerState(WorkerSettings(seed=args.seed))
    state.warm_up(args.target, "torch")
    outcomes = alone(state, instances)
    passing = [
        inst
        for inst, o in zip(instances, outcomes, strict=True)
        if o.result is not None and o.result.outcome.value == "pass" and not batch.holds_empty_tensor(inst)
    ]
    passing = passing[: len(passing) // args.batch * args.batch]
    started = time.perf_counter()
    alone(state, passing)
    alone_s = time.perf_counter() - started

    batched_state = WorkerState(WorkerSettings(seed=args.seed, batch_targets=(args.target,)))
    batched_state.warm_up(args.target, "torch")
    spent: dict[str, float] = collections.defaultdict(float)
    target = batched_state.target(args.target)
    time_calls(tvm_target, "export_torch", spent, "export")
    time_calls(tvm_target, "decompose_torch", spent, "decompose")
    for stage in ("convert", "compile", "run"):
        time_calls(target, stage, spent, stage)
    tasks = [TestTask(k, inst, args.target) for k, inst in enumerate(passing)]
    decided = 0
    started = time.perf_counter()
    for k in range(0, len(tasks), args.batch):
        decided += len(batch.execute_batch(tasks[k : k + args.batch], batched_state, lambda s: None).decided)
    batched_s = time.perf_counter() - started
    row = {
        "target": args.target,
        "n": args.n,
        "seed": args.seed,
        "batch": args.batch,
        "passing": len(passing),
        "decided_in_batches": decided,
        "alone_s_per_test": round(alone_s / len(passing), 4),
        "batch_s_per_test": round(batched_s / len(passing), 4),
        "ceiling_over_alone": round(alone_s / batched_s, 2),
        "batch_s_per_test_by_step": {k: round(v / len(passing), 4) for k, v in sorted(spent.items())},
    }
    save_row(RESULTS, row, ("target", "n", "seed", "batch"))
    print(row)
    return 0


if __name__ == "__main__":
    sys.exit(main())
