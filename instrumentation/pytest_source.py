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
from collections.abc import Iterator, Sequence
from importlib.metadata import entry_points
from pathlib import Path

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
) -> Iterator[OperatorInstance]:
    """Run ``pytest pytest_args`` under the recording plugin and yield what it recorded."""
    with tempfile.TemporaryDirectory(prefix="opera-harvest-") as tmp:
        raw = Path(tmp) / "raw.jsonl.gz"
        env = dict(os.environ)
        env.update(
            {
                "OPERA_HARVEST_OUT": str(raw),
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
        proc = subprocess.run(cmd, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if proc.returncode in (3, 4):
            tail = " | ".join(line.strip() for line in proc.stdout.strip().splitlines()[-2:])
            raise HarvestError(f"pytest failed to start ({_FAILED_TO_START[proc.returncode]}): {tail}")
        if proc.returncode == 5:
            raise HarvestError(f"pytest collected no tests from: {' '.join(pytest_args)}")
        # One raw file, or one per pytest-xdist worker (gw0.raw.jsonl.gz, ...).
        raw_files = [p for p in [raw, *sorted(Path(tmp).glob(f"*.{raw.name}"))] if p.exists()]
        for raw_file in raw_files:
            errors_file = Path(str(raw_file) + ".errors.json")
            if errors_file.exists():
                for reason, n in json.loads(errors_file.read_text()).items():
                    recorder.errors[reason] = recorder.errors.get(reason, 0) + n
        if not raw_files:
            raise HarvestError(f"pytest exited with code {proc.returncode} before recording anything")
        # A suite killed by a signal (negative code) still leaves its synced instances.
        yield from CorpusReader(raw_files, skip_malformed=True)


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
    return run_pytest_harvest(recorder, options.pytest_args, limit=options.limit)
