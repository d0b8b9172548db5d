"""Recording overhead of the harvest hooks: the same workload with and without the recorder.

One function per measurement, grouped per library (``--only torch|keras``). Each returns a row
(name, workload, calls, median seconds without / with the recorder, ratio, instances recorded);
rows are printed as a table and merged into ``benchmarks/results/harvest_overhead.json`` (rows of
the other library already there are kept).

    .venv/bin/python benchmarks/harvest_overhead.py --only torch [--first-ops 150] [--repeats 3]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import statistics
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results" / "harvest_overhead.json"


def _median_seconds(run: Callable[[], int], repeats: int) -> tuple[float, int, list[float]]:
    """Median wall time of ``repeats`` runs, the last run's count, and every time."""
    times, count = [], 0
    for _ in range(repeats):
        seconds, count = _timed(run)
        times.append(seconds)
    return statistics.median(times), count, times


def _timed(run: Callable[[], int], clock: Callable[[], float] = time.perf_counter) -> tuple[float, int]:
    started = clock()
    count = run()
    return clock() - started, count


def _alternating_medians(
    plain: Callable[[], int], hooked: Callable[[], int], repeats: int, clock: Callable[[], float] = time.perf_counter
) -> tuple[list[float], list[float], int]:
    """Run the two configurations alternately (load from other processes drifts; alternating
    spreads it over both) and return both lists of times and the call count."""
    plain_times, hooked_times, count = [], [], 0
    for _ in range(repeats):
        seconds, count = _timed(plain, clock)
        plain_times.append(seconds)
        seconds, _ = _timed(hooked, clock)
        hooked_times.append(seconds)
    return plain_times, hooked_times, count


def torch_opinfo_overhead(repeats: int = 3, first_ops: int | None = None) -> dict[str, Any]:
    """Enumerate the CPU float32 samples of op_db and call the op (function variant) on each."""
    import torch

    from opera.instrumentation.torch_recorder import TorchRecorder
    from opera.instrumentation.torch_sources import iter_opinfo_calls

    def float32_only(op: Any) -> list[Any]:
        return [torch.float32] if torch.float32 in op.supported_dtypes("cpu") else []

    def enumerate_calls(recorder: TorchRecorder | None) -> int:
        calls = 0
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for _test, _index, call in iter_opinfo_calls(
                recorder, first_ops=first_ops, dtypes=float32_only, method_variants=False
            ):
                with contextlib.suppress(Exception):  # a sample the op rejects still costs its call
                    call()
                calls += 1
        return calls

    recorded: list[Any] = []

    def with_recorder() -> int:
        recorded.clear()
        recorder = TorchRecorder(recorded.append)
        with recorder:
            return enumerate_calls(recorder)

    enumerate_calls(None)  # warm-up: imports, first-call caches
    # CPU time of this process, not wall time: the shared 2-core machine runs other jobs, which
    # made wall-clock runs of the same configuration differ by 6x. torch runs single-threaded here
    # (set below), so process time is the work done.
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        plain_runs, hooked_runs, calls = _alternating_medians(
            lambda: enumerate_calls(None), with_recorder, repeats, clock=time.process_time
        )
    finally:
        torch.set_num_threads(threads)
    plain, hooked = statistics.median(plain_runs), statistics.median(hooked_runs)
    return {
        "name": "torch-opinfo",
        "clock": "process CPU time, 1 torch thread",
        "workload": f"op_db[:{first_ops}]" if first_ops else "op_db (all OpInfos)",
        "calls": calls,
        "instances": len(recorded),
        "seconds_without": round(plain, 3),
        "seconds_with": round(hooked, 3),
        "ratio": round(hooked / plain, 3),
        "runs_without": [round(t, 3) for t in plain_runs],
        "runs_with": [round(t, 3) for t in hooked_runs],
        "load_average_1min": round(os.getloadavg()[0], 2),
    }


def keras_pytest_overhead(repeats: int = 3, test_file: str = "layers/convolutional/conv_test.py") -> dict[str, Any]:
    """Run one test file of the keras wheel with pytest, plain and with the recording plugin active.

    Both runs are fresh subprocesses (TensorFlow import included, as in a real harvest); "with"
    sets ``OPERA_HARVEST_OUT`` so the plugin installs the Keras recorder before the tests import.
    """
    import re
    import subprocess
    import tempfile

    from opera.corpus import CorpusReader
    from opera.instrumentation.keras_sources import keras_source_root

    path = keras_source_root() / test_file
    base_env = {**os.environ, "KERAS_BACKEND": "tensorflow", "TF_CPP_MIN_LOG_LEVEL": "2"}
    base_env.pop("OPERA_HARVEST_OUT", None)
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--no-header", "--tb=no", str(path)]
    tests_run: list[int] = [0]
    recorded: list[int] = [0]

    def run_pytest(record: bool) -> int:
        with tempfile.TemporaryDirectory(prefix="opera-bench-") as tmp:
            env = dict(base_env)
            raw = Path(tmp) / "raw.jsonl.gz"
            if record:
                env.update({"OPERA_HARVEST_OUT": str(raw), "OPERA_HARVEST_LIBRARY": "keras", "OPERA_HARVEST_SUITE": "bench"})
            proc = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            counts = [int(n) for n in re.findall(r"(\d+) (?:passed|failed|skipped)", proc.stdout)]
            tests_run[0] = sum(counts)
            if record:
                recorded[0] = sum(1 for _ in CorpusReader([raw], skip_malformed=True)) if raw.exists() else 0
        return tests_run[0]

    run_pytest(False)  # warm-up: file-system caches, .pyc files
    plain_runs, hooked_runs, calls = _alternating_medians(lambda: run_pytest(False), lambda: run_pytest(True), repeats)
    plain, hooked = statistics.median(plain_runs), statistics.median(hooked_runs)
    return {
        "name": "keras-pytest",
        "workload": test_file.rsplit("/", 1)[-1],
        "calls": calls,  # tests run
        "instances": recorded[0],
        "seconds_without": round(plain, 3),
        "seconds_with": round(hooked, 3),
        "ratio": round(hooked / plain, 3),
        "runs_without": [round(t, 3) for t in plain_runs],
        "runs_with": [round(t, 3) for t in hooked_runs],
        "load_average_1min": round(os.getloadavg()[0], 2),
    }


# library -> measurement functions; the Keras half registers its own here.
MEASUREMENTS: dict[str, list[Callable[..., dict[str, Any]]]] = {
    "torch": [torch_opinfo_overhead],
    "keras": [keras_pytest_overhead],
}


def render(rows: list[dict[str, Any]]) -> str:
    header = f"{'measurement':<16} {'workload':<24} {'calls':>7} {'instances':>9} {'without s':>9} {'with s':>8} {'ratio':>6}"
    lines = [header, "-" * len(header)]
    for row in rows:
        lines.append(
            f"{row['name']:<16} {row['workload']:<24} {row['calls']:>7} {row['instances']:>9} "
            f"{row['seconds_without']:>9.3f} {row['seconds_with']:>8.3f} {row['ratio']:>5.2f}x"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=sorted(MEASUREMENTS), help="measure one library")
    parser.add_argument("--repeats", type=int, default=3, help="runs per configuration (median reported)")
    parser.add_argument("--first-ops", type=int, default=None, help="torch: only the first N OpInfos")
    parser.add_argument("--output", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

    libraries = [args.only] if args.only else sorted(MEASUREMENTS)
    rows: list[dict[str, Any]] = []
    for library in libraries:
        if not MEASUREMENTS[library]:
            print(f"{library}: no measurement implemented yet", file=sys.stderr)
        for measure in MEASUREMENTS[library]:
            kwargs: dict[str, Any] = {"repeats": args.repeats}
            if library == "torch":
                kwargs["first_ops"] = args.first_ops
            rows.append({"library": library, **measure(**kwargs)})
    print(render(rows))

    existing: dict[str, Any] = json.loads(args.output.read_text()) if args.output.exists() else {}
    by_name = {row["name"]: row for row in existing.get("rows", [])}
    by_name.update({row["name"]: row for row in rows})
    existing["rows"] = sorted(by_name.values(), key=lambda row: row["name"])
    existing["machine"] = {"python": platform.python_version(), "cpus": os.cpu_count(), "platform": platform.platform()}
    existing["measured_at"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(existing, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
