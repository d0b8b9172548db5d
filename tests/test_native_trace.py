"""The worker's fatal-signal handler (opera.run.native_trace): where in native code a process died."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from opera.run.native_trace import helper_library, read_trace

needs_cc = pytest.mark.skipif(helper_library() is None, reason="no C compiler to build the handler")


@needs_cc
def test_a_segfault_is_traced_to_the_code_that_faulted(tmp_path: Path) -> None:
    report = tmp_path / "trace"
    script = "import ctypes, sys\nfrom opera.run.native_trace import install\nassert install(sys.argv[1])\nctypes.string_at(0)\n"
    proc = subprocess.run([sys.executable, "-c", script, str(report)], capture_output=True, timeout=120)
    assert proc.returncode == -11  # the process still dies of its own signal
    trace = read_trace(report)
    assert trace is not None and trace.signal == 11
    # string_at reads address 0 inside libc's strlen/memmove (a runtime frame, skipped): the culprit
    # is its caller, ctypes' own extension module
    assert trace.culprit is not None and os.path.basename(trace.culprit.path).startswith("_ctypes")
    assert trace.summary().startswith("at _ctypes") and "+0x" in trace.summary()


@needs_cc
def test_a_process_that_lives_leaves_no_trace(tmp_path: Path) -> None:
    report = tmp_path / "trace"
    script = "import sys\nfrom opera.run.native_trace import install\nassert install(sys.argv[1])\nassert install(sys.argv[1])\n"
    proc = subprocess.run([sys.executable, "-c", script, str(report)], capture_output=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert report.exists() and read_trace(report) is None


def test_a_missing_or_torn_report_reads_as_none(tmp_path: Path) -> None:
    assert read_trace(tmp_path / "absent") is None
    torn = tmp_path / "torn"
    torn.write_text("frame\t/lib/libx.so\tnot-hex\t\n")
    assert read_trace(torn) is None
