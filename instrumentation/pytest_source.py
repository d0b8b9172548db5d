"""Harvest any pytest suite: run it in a subprocess with the recording plugin, stream the result.

A subprocess keeps the suite's global state, crashes and hangs away from the harvest driver, which
then validates each instance in a clean process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

from opera.corpus import CorpusReader
from opera.errors import HarvestError
from opera.instrumentation import BaseRecorder, HarvestOptions, harvest_source
from opera.model import OperatorInstance

__all__ = ["run_pytest_harvest"]

_PLUGIN_MODULE = "opera.instrumentation.pytest_plugin"

# pytest exit codes that mean the run never really started (usage error, internal error, no tests).
_FAILED_TO_START = {2: "interrupted", 3: "internal error", 4: "usage error", 5: "no tests were collected"}


def run_pytest_harvest(
    recorder: BaseRecorder,
    pytest_args: Sequence[str],
    *,
    suite: str = "pytest",
    limit: int | None = None,
    cwd: str | None = None,
    extra_env: dict[str, str] | None = None,
    quiet: bool = True,
    on_event: Callable[[dict[str, Any]], None] | None = None,
) -> Iterator[OperatorInstance]:
    """Run ``pytest pytest_args`` under the recording plugin and yield what it recorded.
    ``on_event`` hears the suite's progress while it runs (``HarvestOptions.on_event``)."""
    emit = on_event or (lambda event: None)
    with tempfile.TemporaryDirectory(prefix="opera-harvest-") as tmp:
        raw = Path(tmp) / "raw.jsonl.gz"
        events = Path(tmp) / "events.jsonl"
        env = dict(os.environ)
        env.update(
            {
                "OPERA_HARVEST_OUT": str(raw),
                "OPERA_HARVEST_EVENTS": str(events),
                "OPERA_HARVEST_LIBRARY": recorder.library,
                "OPERA_HARVEST_SUITE": suite,
                "OPERA_HARVEST_LIMIT": str(limit or 0),
                "TF_CPP_MIN_LOG_LEVEL": "2",
            }
        )
        env.update(extra_env or {})
        cmd = [sys.executable, "-m", "pytest", *_plugin_args(env), "-p", "no:cacheprovider"]
        cmd += ["-q", "--no-header", "--tb=no"] if quiet else []
        cmd += list(pytest_args)
        output = Path(tmp) / "pytest.out"
        with open(output, "w") as out:
            proc = subprocess.Popen(cmd, env=env, cwd=cwd, stdout=out, stderr=subprocess.STDOUT, text=True)
            try:
                _follow(proc, events, emit)
            except BaseException:  # Ctrl-C: stop the suite too, then keep what it recorded
                proc.terminate()
                proc.wait()
                raise
        returncode = proc.returncode
        if returncode in (3, 4):
            tail = " | ".join(line.strip() for line in output.read_text(errors="replace").strip().splitlines()[-2:])
            raise HarvestError(f"pytest failed to start ({_FAILED_TO_START[returncode]}): {tail}")
        if returncode == 5:
            raise HarvestError(f"pytest collected no tests from: {' '.join(pytest_args)}")
        # One raw file, or one per pytest-xdist worker (gw0.raw.jsonl.gz, ...).
        raw_files = [p for p in [raw, *sorted(Path(tmp).glob(f"*.{raw.name}"))] if p.exists()]
        for raw_file in raw_files:
            errors_file = Path(str(raw_file) + ".errors.json")
            if errors_file.exists():
                for reason, n in json.loads(errors_file.read_text()).items():
                    recorder.errors[reason] = recorder.errors.get(reason, 0) + n
        if not raw_files:
            raise HarvestError(f"pytest exited with code {returncode} before recording anything")
        emit({"validating": sum(_count_records(f) for f in raw_files)})
        # A suite killed by a signal (negative code) still leaves its synced instances.
        yield from CorpusReader(raw_files, skip_malformed=True)


def _follow(proc: subprocess.Popen[str], events: Path, emit: Callable[[dict[str, Any]], None]) -> None:
    """Hand on the plugin's event lines (appended by every pytest process) until pytest exits."""
    offset, pending = 0, ""
    while True:
        finished = proc.poll() is not None
        if events.exists():
            with open(events) as fh:
                fh.seek(offset)
                chunk = fh.read()
                offset = fh.tell()
            pending += chunk
            *lines, pending = pending.split("\n")
            for line in lines:
                if line.strip():
                    emit(json.loads(line))
        if finished:
            return
        time.sleep(0.2)


def _count_records(path: Path) -> int:
    """Instances in a raw file (its lines less the header), to size the validation's progress bar."""
    import gzip

    lines = 0
    try:
        with gzip.open(path, "rt") as fh:
            for _ in fh:
                lines += 1
    except (EOFError, OSError):  # a suite killed mid-write: its synced part still counts
        pass
    return max(0, lines - 1)


def _plugin_args(env: dict[str, str]) -> list[str]:
    """``-p`` for the recording plugin unless its ``pytest11`` entry point loads it already.

    Naming a plugin with ``-p`` that the entry point has registered under its own name makes
    pytest stop with "Plugin already registered under a different name".
    """
    autoload = not env.get("PYTEST_DISABLE_PLUGIN_AUTOLOAD")
    if autoload and any(ep.value == _PLUGIN_MODULE for ep in entry_points(group="pytest11")):
        return []
    return ["-p", _PLUGIN_MODULE]


@harvest_source("torch", "pytest")
def torch_pytest(recorder: BaseRecorder, options: HarvestOptions) -> Iterator[OperatorInstance]:
    """Any pytest suite (arguments after --)."""
    return _generic(recorder, options)


@harvest_source("keras", "pytest")
def keras_pytest(recorder: BaseRecorder, options: HarvestOptions) -> Iterator[OperatorInstance]:
    """Any pytest suite (arguments after --)."""
    return _generic(recorder, options)


@harvest_source("onnx", "pytest")
def onnx_pytest(recorder: BaseRecorder, options: HarvestOptions) -> Iterator[OperatorInstance]:
    """Any pytest suite (arguments after --)."""
    return _generic(recorder, options)


def _generic(recorder: BaseRecorder, options: HarvestOptions) -> Iterator[OperatorInstance]:
    if not options.pytest_args:
        raise HarvestError("the pytest source needs test paths after '--', e.g. opera harvest torch -o out.jsonl.gz -- tests/")
    return run_pytest_harvest(recorder, options.pytest_args, limit=options.limit, on_event=options.on_event)
