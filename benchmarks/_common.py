"""Pieces shared by the benchmarks: the seeded sample, the per-mode child process, the load average
and the results file (runner_overhead, ray_throughput, parallel_ceiling, runner_throughput); the
data-path arguments of the prioritize_* benchmarks; a timer around a library function (batch_ceiling,
batch_profile)."""

from __future__ import annotations

import argparse
import functools
import json
import os
import random
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
# Default folder of the data the prioritize_* benchmarks read when no path is given on the command
# line: the published OPERA artifact as opera-artifact/ and the TVM 0.27 equipped corpus as
# equipped/. $OPERA_SHARED, else shared/ beside the checkout. The repository does not ship them
# (tests/data/ holds only the slices the tests need).
SHARED = Path(os.environ.get("OPERA_SHARED", ROOT.parent / "shared"))


def add_sample_arguments(parser: argparse.ArgumentParser, n: int, reps: int) -> None:
    """--corpus, --target, -n, --seed, --reps: which seeded sample runs where, how often."""
    parser.add_argument("--corpus", default="harvested/onnx.jsonl.gz")
    parser.add_argument("--target", "-t", default="ov-onnx")
    parser.add_argument("-n", type=int, default=n)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--reps", type=int, default=reps)


def data_path(text: str) -> Path:
    """argparse ``type`` of a data file or folder that must exist: a missing one is a usage error
    (exit 2, naming the path), never a silent skip. argparse applies it to string defaults too."""
    path = Path(text)
    if not path.exists():
        raise argparse.ArgumentTypeError(
            f"{text} does not exist (pass the path on the command line, or set OPERA_SHARED; see --help)"
        )
    return path


def shown(path: str | Path) -> str:
    """``path`` relative to the checkout, as results files record it (no machine paths)."""
    return os.path.relpath(Path(path).resolve(), ROOT)


def write_sample(corpus: str, n: int, seed: int, out: Path) -> int:
    """A seeded random sample of ``n`` valid, migratable instances, in corpus order."""
    from opera.corpus import CorpusReader, CorpusWriter

    usable = [i for i in CorpusReader([corpus]) if i.valid is not False and i.migratable]
    picked = sorted(random.Random(seed).sample(range(len(usable)), min(n, len(usable))))
    with CorpusWriter(out, header={"sample_of": corpus, "n": n, "seed": seed}) as writer:
        for k in picked:
            writer.write(usable[k])
    return len(picked)


def spawn(script: str, mode: str, sample: str, target: str, seed: int) -> dict[str, Any]:
    """Run ``script --one MODE`` in a fresh Python process; its last ``RESULT {json}`` line."""
    cmd = [
        sys.executable,
        script,
        "--one",
        mode,
        "--sample",
        sample,
        "--target",
        target,
        "--seed",
        str(seed),
    ]
    env = {**os.environ, "CI": "true", "TF_CPP_MIN_LOG_LEVEL": "2"}  # CI=true: no OpenVINO telemetry
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    if proc.returncode != 0 or not lines:
        raise SystemExit(f"{mode} failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
    return json.loads(lines[-1][len("RESULT ") :])


def load() -> list[float]:
    """The 1-, 5- and 15-minute load averages, rounded to 0.01."""
    return [round(x, 2) for x in os.getloadavg()]


def save_row(results: Path, row: dict[str, Any], key: tuple[str, ...]) -> None:
    """Merge ``row`` into the JSON list at ``results``, replacing the row with the same ``key`` fields."""
    rows = json.loads(results.read_text()) if results.exists() else []
    rows = [r for r in rows if tuple(r[k] for k in key) != tuple(row[k] for k in key)] + [row]
    results.parent.mkdir(parents=True, exist_ok=True)
    results.write_text(json.dumps(rows, indent=2) + "\n")


def time_calls(
    owner: Any, name: str, spent: dict[str, float], label: str | Callable[[Any], str], count: Counter | None = None
) -> None:
    """Wrap ``owner.name`` so that each call adds its seconds to ``spent[label]`` (and one to
    ``count[label]``); ``label`` may be a function of the call's result (a call that raises counts
    under ``"<name> raised"``)."""
    real = getattr(owner, name)

    @functools.wraps(real)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        key = f"{name} raised"
        try:
            result = real(*args, **kwargs)
            key = label(result) if callable(label) else label
            return result
        finally:
            spent[key] = spent.get(key, 0.0) + time.perf_counter() - started
            if count is not None:
                count[key] += 1

    setattr(owner, name, wrapper)
