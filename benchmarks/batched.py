#!/usr/bin/env python3
"""Tests per core (issue 16): the same instances through one target in three modes, verdicts compared
instance by instance.

- ``today``: every test alone, every fixed-cost fix undone (``OPERA_FIXED_COSTS_UNDO``: no warm-up
  op, no ``gc.freeze``, torch's uncached composite-op scan, Inductor's graph caches on, torch's own
  ``py_impl``), i.e. Opera as it was when issue 16 was filed;
- ``fixed``: every test alone, the code as shipped (``--batch 1``);
- ``batch``: ``--batch K`` (batchable targets only).

    python benchmarks/batched.py CORPUS --targets tvm-torch ov-torch inductor-torch --sample 1000 --batch 16 \\
        [--order ORDER --limit N] [--reps 1] [-o benchmarks/results/batched.json]

Instances: a seeded ``--sample N`` of the corpus (``--sample-seed``), or the first ``--limit N`` of
``--order``. Each mode runs in a fresh store (a subprocess ``opera run``, 2 workers, no reproducers,
no verification, a fresh Inductor cache folder); modes alternate per repetition. Throughput is
counted from the first to the last stored result, so worker start-up and warm-up are left out; the
median over repetitions is reported, with the outcome counts and every instance whose verdict
(outcome, stage, signature) differs from ``fixed``, and how many kept their verdict with another message
(the first 20 listed).
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import statistics
import subprocess
import sys
import sysconfig
import tempfile
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def portable(message: str) -> str:
    """A stored message with this machine's paths taken out (tracebacks name the checkout and
    the environment's site-packages): the results file holds no absolute path."""
    for path, name in ((sysconfig.get_paths()["purelib"], "<site-packages>"), (str(REPO), "<repo>")):
        message = message.replace(path, name)
    return message


UNDO_ALL = "warm-up-op,gc-freeze,cia-scan-cache,inductor-graph-caches,py-impl-annotations"


def run_mode(args: argparse.Namespace, target: str, mode: str) -> tuple[float, dict[str, tuple]]:
    with tempfile.TemporaryDirectory(prefix="opera-batched-") as tmp:
        store = Path(tmp) / "s.db"
        select = (
            ["--sample", str(args.sample), "--sample-seed", str(args.sample_seed)]
            if args.sample
            else ["--order", args.order, "--limit", str(args.limit)]
        )
        cmd = [
            sys.executable, "-m", "opera.cli", "run", args.corpus, "-t", target, *select,
            "--store", str(store), "--workers", str(args.workers), "--no-verify", "--no-reproducers", "-q",
            "--batch", str(args.batch if mode == "batch" else 1),
        ]  # fmt: skip
        env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(Path(tmp) / "inductor-cache")}
        if mode == "today":
            env["OPERA_FIXED_COSTS_UNDO"] = UNDO_ALL
        else:
            env.pop("OPERA_FIXED_COSTS_UNDO", None)
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
        db = sqlite3.connect(store)
        rows = db.execute("SELECT instance_id, outcome, stage, signature, finished, message FROM results ORDER BY finished").fetchall()
    finished = [r[4] for r in rows]
    rate = (len(rows) - 1) / (finished[-1] - finished[0]) if len(rows) > 1 and finished[-1] > finished[0] else 0.0
    return rate, {r[0]: (r[1], r[2], r[3], r[5]) for r in rows}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("corpus")
    parser.add_argument("--order")
    parser.add_argument("--limit", type=int, default=300)
    parser.add_argument("--sample", type=int)
    parser.add_argument("--sample-seed", type=int, default=0)
    parser.add_argument("--targets", nargs="+", default=["tvm-torch", "ov-torch", "inductor-torch"])
    parser.add_argument("--modes", nargs="+", default=["today", "fixed", "batch"], choices=["today", "fixed", "batch"])
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--reps", type=int, default=1)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("-o", "--output", type=Path)
    args = parser.parse_args(argv)
    if not args.sample and not args.order:
        parser.error("give --sample N or --order ORDER")
    report: dict[str, dict] = json.loads(args.output.read_text())["targets"] if args.output and args.output.exists() else {}
    for target in args.targets:
        rates: dict[str, list[float]] = {m: [] for m in args.modes}
        verdicts: dict[str, dict[str, tuple]] = {}
        for rep in range(args.reps):
            for mode in args.modes[rep % len(args.modes) :] + args.modes[: rep % len(args.modes)]:
                rate, seen = run_mode(args, target, mode)
                rates[mode].append(rate)
                verdicts[mode] = seen
                print(f"  {target} {mode}: {rate:.2f} tests/s", flush=True)
        full = verdicts.get("fixed") or next(iter(verdicts.values()))
        base = {i: v[:3] for i, v in full.items()}
        row: dict[str, object] = {"tests": len(base), "outcomes": dict(Counter(v[0] for v in base.values()))}
        for mode in args.modes:
            row[f"tests_per_s_{mode}"] = round(statistics.median(rates[mode]), 3)
            mine = {i: v[:3] for i, v in verdicts[mode].items()}
            differ = {i: (base.get(i), mine.get(i)) for i in set(base) | set(mine) if base.get(i) != mine.get(i)}
            row[f"verdicts_differ_{mode}"] = len(differ)
            if differ:
                row[f"differences_{mode}"] = {k: [list(v[0] or ()), list(v[1] or ())] for k, v in sorted(differ.items())}
            # the same verdict, another message (a gap a batch decided says what its own run says)
            worded = sorted(i for i in set(base) & set(mine) if i not in differ and full[i][3] != verdicts[mode][i][3])
            row[f"messages_differ_{mode}"] = len(worded)
            if worded:
                row[f"message_differences_{mode}"] = {i: [portable(full[i][3])[:300], portable(verdicts[mode][i][3])[:300]] for i in worded[:20]}
        today = statistics.median(rates["today"]) if "today" in rates else None
        for mode in args.modes:
            if today and mode != "today":
                row[f"speedup_{mode}_over_today"] = round(statistics.median(rates[mode]) / today, 2)
        report[target] = row
        print(f"{target}: " + ", ".join(f"{k}={v}" for k, v in row.items() if not k.startswith(("differences", "outcomes"))))
    if args.output:
        selection = {"sample": args.sample, "sample_seed": args.sample_seed} if args.sample else {"limit": args.limit}
        payload = {"corpus": Path(args.corpus).name, **selection, "batch": args.batch, "reps": args.reps, "workers": args.workers, "targets": report}
        args.output.write_text(json.dumps(payload, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
