#!/usr/bin/env python3
"""Where a batched run's time goes (issue 16): one warmed worker, batches formed as the executor
forms them, every step timed.

A seeded sample of torch instances (``fixed_costs.sample``: valid, migratable, in corpus order)
goes through ``opera.run.batch.execute_batch`` K at a time in one process, and every test a batch
sends back runs alone right after it (``execute_task``, remembering its failure as the worker
does). Recorded: the time in successful and failed batch builds (``_compile_and_judge``), in the
batches' references, and in the alone tests by their outcome; how many tests the batches decided;
the batches' notes (why a build failed and what was done). ``--inductor-steps`` adds timers on
Inductor's code generation (``GraphLowering.codegen``) and on loading the compiled module
(``PyCodeCache.load_by_key_path``, which waits for its C++ compiles).

    python benchmarks/batch_profile.py -t tvm-torch -n 400 [--batch 16] [--skip-db STORE]

``--skip-db``: a store whose ``native-crash`` and ``timeout`` results name instances to leave out
(one process cannot outlive them; ov-torch has a few). Rows are merged into
``benchmarks/results/batch_profile.json`` keyed by (target, n, seed, batch).
"""

from __future__ import annotations

import argparse
import collections
import sqlite3
import sys
import time
from pathlib import Path

from _common import save_row, time_calls
from fixed_costs import sample

RESULTS = Path(__file__).resolve().parent / "results" / "batch_profile.json"
CORPUS = Path(__file__).resolve().parents[1] / "harvested" / "torch.jsonl.gz"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-t", "--target", default="tvm-torch")
    parser.add_argument("-n", type=int, default=400)
    parser.add_argument("--seed", type=int, default=5)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--skip-db", help="leave out the instances this store found native-crash or timeout")
    parser.add_argument("--inductor-steps", action="store_true")
    args = parser.parse_args(argv)

    import opera.run.batch as batch
    import opera.run.execution as execution
    from opera.run.executors import TestTask, WorkerSettings

    instances = sample(str(CORPUS), "torch", 1000, args.seed)[: args.n]
    if args.skip_db:
        query = "SELECT instance_id FROM results WHERE outcome IN ('native-crash', 'timeout')"
        deadly = {row[0] for row in sqlite3.connect(args.skip_db).execute(query)}
        instances = [i for i in instances if i.id not in deadly]
    spent: dict[str, float] = collections.defaultdict(float)
    count: collections.Counter = collections.Counter()
    time_calls(execution, "library_reference", spent, "batch: references", count)
    time_calls(batch, "_compile_and_judge", spent, lambda failure: "batch: builds that failed" if failure else "batch: builds that passed", count)
    if args.inductor_steps:
        import torch._inductor.codecache as codecache
        import torch._inductor.graph as graph

        time_calls(graph.GraphLowering, "codegen", spent, "inductor: code generation", count)
        time_calls(codecache.PyCodeCache, "load_by_key_path", spent, "inductor: load (C++ compiles)", count)

    state = execution.WorkerState(WorkerSettings(seed=args.seed, batch_targets=(args.target,), batch=args.batch))
    state.warm_up(args.target, "torch")
    queue = [TestTask(k, inst, args.target) for k, inst in enumerate(instances)]
    notes: collections.Counter = collections.Counter()
    decided = 0
    started = time.perf_counter()
    for k in range(0, len(queue), args.batch):
        step = time.perf_counter()
        out = batch.execute_batch(queue[k : k + args.batch], state, lambda stage: None)
        spent["batch: all"] += time.perf_counter() - step
        count["batch: all"] += 1
        decided += len(out.decided)
        for note in filter(None, out.note.split("; ")):
            notes[note.split(" (")[0].split(":")[0]] += 1
        for task in out.alone:
            step = time.perf_counter()
            outcome = execution.execute_task(task, state, lambda stage: None, lambda *a: None)
            batch.remember_failure(state, task, outcome)
            key = f"alone: {outcome.result.outcome.value if outcome.result else 'no result'}"
            spent[key] += time.perf_counter() - step
            count[key] += 1
    total = time.perf_counter() - started
    row = {
        "target": args.target,
        "n": args.n,
        "seed": args.seed,
        "batch": args.batch,
        "tests": len(instances),
        "seconds": round(total, 1),
        "tests_per_s_one_worker": round(len(instances) / total, 2),
        "decided_in_batches": decided,
        "steps": {k: {"s": round(v, 1), "calls": count[k], "share": round(v / total, 3)} for k, v in sorted(spent.items())},
        "notes": dict(notes.most_common()),
    }
    save_row(RESULTS, row, ("target", "n", "seed", "batch"))
    print(f"{args.target}: {len(instances)} tests in {total:.1f} s, {row['tests_per_s_one_worker']} tests/s, {decided} decided in batches")
    for key, value in row["steps"].items():
        print(f"  {key:34s} {value['s']:7.1f} s  {value['calls']:5d} calls  {100 * value['share']:5.1f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
