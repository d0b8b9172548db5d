"""Time and peak memory of the ``opera`` prioritization strategy vs. corpus size.

Synthetic corpora of 10k, 100k and 1M instances are drawn from a real corpus: operators in the
real corpus's frequencies, each synthetic instance a real instance of that operator with its
integers, floats and tensor dimensions perturbed (each with probability ``PERTURB``), so the
partition structure (repeats and new partitions) resembles real data. Every instance gets a unique
``extra["synthetic"]`` number (part of the id, not of any partition) so all ``n`` are distinct.
Instances are streamed into the strategy, as from a corpus file; their ids are computed by the
generator, as the corpus reader does. Also measured: the artifact's 1,013-instance ONNX corpus.
The template corpus is the first of harvested/{torch,onnx,keras}.jsonl.gz with 500 instances or
more, else the artifact's ONNX corpus.

Each size runs in its own subprocess (peak RSS from ``resource.getrusage``); prioritization time
excludes generation. The growth exponent ``b`` of ``time ~ a * n^b`` is fitted (least squares in
log-log) over the synthetic sizes. Writes ``benchmarks/results/prioritize_scaling.json``.

    nice -n 10 python benchmarks/prioritize_scaling.py [--sizes 10000 100000 1000000] \
        [--artifact-corpus ORIGINAL_MIGRATED_ONNX] [--equipped-onnx F] [--equipped-torch F] [--equipped-keras F] \
        [--history TARGET STORE -o benchmarks/results/prioritize_scaling_history.json]

Data paths default to files in $OPERA_SHARED, else in shared/ beside the checkout (see --help); a
missing file is a usage error.
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import platform
import random
import resource
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
from _common import ROOT, SHARED, data_path, shown

RESULTS = ROOT / "benchmarks" / "results" / "prioritize_scaling.json"
ARTIFACT_ONNX = SHARED / "opera-artifact/onnx/data/original_migrated_onnx_tc.txt"
# Default equipped corpus per template library (the operator score needs the compiler's own tests).
EQUIPPED = {
    "onnx": SHARED / "equipped/tvm-0.27_equipped_onnx_tc.txt",
    "torch": SHARED / "opera-artifact/torch/data/tvm_equipped_torch_tc.txt",
    "keras": SHARED / "opera-artifact/keras/data/tvm_equipped_keras_tc.txt",
}
PERTURB = 0.3


@functools.cache
def _real_corpus(artifact_onnx: Path) -> tuple[str, list[Any]]:
    from opera.corpus import read_corpus
    from opera.prioritize.equipped import read_equipped

    for name in ("torch", "onnx", "keras"):
        path = ROOT / "harvested" / f"{name}.jsonl.gz"
        if path.exists() and path.stat().st_size > 0:
            try:
                insts = list(read_corpus(path, skip_malformed=True))
            except Exception:
                continue
            if len(insts) >= 500:
                return str(path.relative_to(ROOT)), insts
    return shown(artifact_onnx), list(read_equipped([artifact_onnx]))


def _perturb_value(value: Any, rng: random.Random, seed: int) -> Any:
    from opera.values import TensorSpec

    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, int):
        return rng.choice((-2, -1, 0, 1, 2, value * 2, value + 1)) if rng.random() < PERTURB else value
    if isinstance(value, float):
        return rng.choice((-1.0, 0.0, 0.5, value * 2)) if rng.random() < PERTURB else value
    if isinstance(value, (TensorSpec, np.ndarray)):
        dtype = value.dtype if isinstance(value, TensorSpec) else str(value.dtype)
        shape = tuple(
            (rng.choice((0, 1, 2, 3, 8)) if d is not None and rng.random() < PERTURB else d)
            for d in value.shape
        )
        if rng.random() < PERTURB / 3:
            shape = shape + (1,) if rng.random() < 0.5 else shape[:-1]
        return TensorSpec(dtype=dtype, shape=shape, seed=seed)
    if isinstance(value, list):
        return [_perturb_value(v, rng, seed) for v in value]
    if isinstance(value, tuple):
        return tuple(_perturb_value(v, rng, seed) for v in value)
    return value


def synthetic(real: list[Any], n: int, seed: int, clock: list[float]) -> Iterator[Any]:
    """``n`` distinct synthetic instances drawn from ``real``; generation time accumulates in ``clock[0]``."""
    t0 = time.perf_counter()
    by_op: dict[str, list[Any]] = {}
    for inst in real:
        by_op.setdefault(inst.api, []).append(inst)
    ops = sorted(by_op)
    weights = [len(by_op[op]) for op in ops]
    rng = random.Random(seed)
    clock[0] += time.perf_counter() - t0
    for k in range(n):
        t0 = time.perf_counter()
        op = rng.choices(ops, weights)[0]
        base = rng.choice(by_op[op])
        inst = replace(
            base,
            args=tuple(_perturb_value(v, rng, k) for v in base.args),
            kwargs={key: _perturb_value(v, rng, k) for key, v in base.kwargs.items()},
            inputs=tuple(_perturb_value(v, rng, k) for v in base.inputs),
            extra={**base.extra, "synthetic": k},
        )
        inst.__dict__.pop("_id", None)
        _ = inst.id  # the corpus reader computes ids while reading
        clock[0] += time.perf_counter() - t0
        yield inst


def measure_one(
    kind: str, n: int, seed: int, artifact_onnx: Path, equipped_files: dict[str, Path], history: list[str] | None = None
) -> dict[str, Any]:
    """Run in a child process: prioritize one corpus, report times and peak RSS."""
    from opera.prioritize import PrioritizeContext, prioritize
    from opera.prioritize.equipped import read_equipped

    clock = [0.0]
    if kind == "artifact-onnx":
        equipped = list(read_equipped([equipped_files["onnx"]]))
        t0 = time.perf_counter()
        instances: Any = list(read_equipped([artifact_onnx]))
        for inst in instances:
            _ = inst.id
        clock[0] = time.perf_counter() - t0
        n = len(instances)
    else:
        _, real = _real_corpus(artifact_onnx)
        equipped = list(read_equipped([equipped_files[real[0].library]]))
        instances = synthetic(real, n, seed, clock)
    ctx = PrioritizeContext(equipped=equipped, precover_equipped=True)
    if history and kind == "synthetic":  # the strategy with what earlier runs on a target say
        from opera.prioritize.history import OperatorHistory

        ctx.history = OperatorHistory.from_store(history[1], history[0])
    generated_before = clock[0]
    start = time.perf_counter()
    ordering = prioritize(instances, "opera", ctx)
    streamed = clock[0] - generated_before  # generation interleaved with compiling the stream
    total = time.perf_counter() - start - streamed
    rss_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {
        "kind": kind,
        "n": n,
        "ordered": len(ordering.ids),
        "prioritize_seconds": round(total, 3),
        "generate_seconds": round(clock[0], 3),
        "peak_rss_mib": round(rss_kib / 1024, 1),
        "operators": ctx.notes.get("operators"),
        "operators_in_equipped": ctx.notes.get("operators_in_equipped"),
        "elements": ctx.notes.get("elements"),
        "groups": ctx.notes.get("groups"),
        "rescored": ctx.notes.get("rescored"),
        "compile_seconds": round(float(ctx.notes.get("compile_seconds", 0.0)) - streamed, 3),
        "greedy_seconds": ctx.notes.get("greedy_seconds"),
    }


def fit_exponent(points: list[tuple[int, float]]) -> float | None:
    pts = [(math.log(n), math.log(t)) for n, t in points if t > 0]
    if len(pts) < 2:
        return None
    mx = sum(x for x, _ in pts) / len(pts)
    my = sum(y for _, y in pts) / len(pts)
    sxx = sum((x - mx) ** 2 for x, _ in pts)
    return sum((x - mx) * (y - my) for x, y in pts) / sxx


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--child", nargs=2, metavar=("KIND", "N"), help=argparse.SUPPRESS)
    parser.add_argument("-o", "--output", default=str(RESULTS))
    parser.add_argument(
        "--history",
        nargs=2,
        metavar=("TARGET", "STORE"),
        help="give the strategy the history of TARGET in results store STORE (a run of the template "
        "library's target): operator scores and per-instance weights, as `opera prioritize --history`",
    )
    parser.add_argument(
        "--artifact-corpus",
        type=data_path,
        default=str(ARTIFACT_ONNX),
        help="the OPERA artifact's onnx/data/original_migrated_onnx_tc.txt "
        "(default: under $OPERA_SHARED/opera-artifact, else shared/opera-artifact beside the checkout)",
    )
    for library, default in EQUIPPED.items():
        parser.add_argument(
            f"--equipped-{library}",
            type=data_path,
            default=str(default),
            help=f"equipped corpus for {library} templates (default: {shown(default)})",
        )
    args = parser.parse_args()
    equipped_files = {library: getattr(args, f"equipped_{library}") for library in EQUIPPED}
    if args.child:
        row = measure_one(args.child[0], int(args.child[1]), args.seed, args.artifact_corpus, equipped_files, args.history)
        print(json.dumps(row))
        return 0
    source, real = _real_corpus(args.artifact_corpus)
    data_args = ["--artifact-corpus", str(args.artifact_corpus)]
    for library, path in equipped_files.items():
        data_args += [f"--equipped-{library}", str(path)]
    if args.history:
        data_args += ["--history", *args.history]
    rows = []
    for kind, n in [("artifact-onnx", 0)] + [("synthetic", n) for n in args.sizes]:
        proc = subprocess.run(
            [sys.executable, __file__, "--child", kind, str(n), "--seed", str(args.seed), *data_args],
            capture_output=True,
            text=True,
            check=False,
        )
        if proc.returncode != 0:
            print(proc.stderr[-2000:], file=sys.stderr)
            return 1
        row = json.loads(proc.stdout.strip().splitlines()[-1])
        rows.append(row)
        print(
            f"{row['kind']:>14} n={row['n']:>9,}  prioritize {row['prioritize_seconds']:>8.2f} s  "
            f"generate {row['generate_seconds']:>8.2f} s  peak RSS {row['peak_rss_mib']:>8.1f} MiB  "
            f"ops {row['operators']} ({row['operators_in_equipped']} equipped)  groups {row['groups']}  "
            f"compile {row['compile_seconds']} s  greedy {row['greedy_seconds']} s",
            flush=True,
        )
    synth = [(r["n"], r["prioritize_seconds"]) for r in rows if r["kind"] == "synthetic"]
    exponent = fit_exponent(synth)
    print(
        f"growth exponent (time ~ n^b over {len(synth)} synthetic sizes): b = {exponent:.3f}"
        if exponent
        else "no fit"
    )
    out = {
        "benchmark": "prioritize_scaling",
        "strategy": "opera (equipped partitions precovered)"
        + (f", history of {args.history[0]} from {Path(args.history[1]).name}" if args.history else ""),
        "template_corpus": source,
        "artifact_corpus": shown(args.artifact_corpus),
        "equipped": {lib: shown(p) for lib, p in equipped_files.items()},
        "template_instances": len(real),
        "perturb_probability": PERTURB,
        "machine": {
            "python": platform.python_version(),
            "processor": platform.processor() or platform.machine(),
        },
        "rows": rows,
        "growth_exponent": exponent,
    }
    Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    Path(args.output).write_text(json.dumps(out, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
