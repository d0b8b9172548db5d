"""The machine's own ceiling for 2 workers: two independent bare loops (no Opera runner at all),
each on half of the same seeded sample, at the same time, against one bare loop on all of it.

`runner_overhead.py` asks 2 workers for >= 1.7x the throughput of 1. This measures what two
processes doing exactly the per-test work of the bare loop reach on this machine: if they cannot
reach 1.7x either, the gap is the machine's and the frameworks' (OpenVINO/TVM use more than one
thread per process), not the runner's.

Run: python benchmarks/parallel_ceiling.py [-n 1000] [--reps 2] [-t ov-onnx]
Writes benchmarks/results/parallel_ceiling.json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _common import add_sample_arguments, write_sample  # noqa: E402

_CHILD = (
    "import sys; sys.path.insert(0, sys.argv[3]); import runner_overhead as ro; "
    "r = ro.run_bare(sys.argv[1], sys.argv[2], 0); print(r['tests'])"
)


def _run(files: list[Path], target: str) -> tuple[float, int]:
    env = {**os.environ, "CI": "true"}  # OpenVINO telemetry off, as in runner_overhead.py
    started = time.perf_counter()
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _CHILD, str(f), target, str(HERE)],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
        )
        for f in files
    ]
    tests = sum(int(p.communicate()[0].decode().strip() or 0) for p in procs)
    return time.perf_counter() - started, tests


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_sample_arguments(parser, n=1000, reps=2)
    args = parser.parse_args()
    from opera.corpus import CorpusReader, CorpusWriter

    with tempfile.TemporaryDirectory(prefix="opera-ceiling-") as tmp:
        whole = Path(tmp) / "all.jsonl"
        write_sample(args.corpus, args.n, args.seed, whole)
        instances = list(CorpusReader([whole]))
        halves = [Path(tmp) / f"half{k}.jsonl" for k in range(2)]
        for k, path in enumerate(halves):
            with CorpusWriter(path) as writer:
                for inst in instances[k::2]:
                    writer.write(inst)
        one, two = [], []
        for rep in range(args.reps):
            wall1, tests1 = _run([whole], args.target)
            wall2, tests2 = _run(halves, args.target)
            assert tests1 == tests2, (tests1, tests2)
            one.append(wall1)
            two.append(wall2)
            print(f"rep {rep + 1}: one process {wall1:.1f} s, two processes {wall2:.1f} s ({tests1} tests)", flush=True)
    row = {
        "corpus": args.corpus,
        "target": args.target,
        "n": args.n,
        "reps": args.reps,
        "one_process_s": one,
        "two_processes_s": two,
        "ceiling_speedup": round(statistics.median(one) / statistics.median(two), 3),
        "load_average": os.getloadavg(),
    }
    print(f"two independent bare processes vs one: {row['ceiling_speedup']:.2f}x (median of {args.reps})")
    out = HERE / "results" / "parallel_ceiling.json"
    out.write_text(json.dumps(row, indent=2) + "\n")
    print(f"-> {out}")


if __name__ == "__main__":
    main()
