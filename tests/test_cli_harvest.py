"""`opera harvest` / `opera stats` on bad input: one clear error line, exit code 2, nothing half-written.

These run the real CLI in a subprocess (the entry point users run), with the ONNX recorder because it
is the cheapest library to import.
"""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from opera.cli import VERBS
from opera.corpus import read_corpus

ENV = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}


def opera(*args: str, cwd: Path | None = None, timeout: int = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "opera.cli", *args], capture_output=True, text=True, env=ENV, cwd=cwd, timeout=timeout
    )


def error_lines(proc: subprocess.CompletedProcess[str]) -> list[str]:
    return [line for line in proc.stderr.splitlines() if line.strip()]


def test_help_lists_every_verb() -> None:
    proc = opera("--help")
    assert proc.returncode == 0
    for verb in VERBS:
        assert verb in proc.stdout


def test_unknown_library_is_one_line_exit_2(tmp_path: Path) -> None:
    proc = opera("harvest", "tensorflow2", "-o", str(tmp_path / "x.jsonl"))
    assert proc.returncode == 2
    lines = error_lines(proc)
    assert len(lines) == 1 and "unknown library 'tensorflow2'" in lines[0]
    assert not (tmp_path / "x.jsonl").exists()


def test_unknown_source_is_one_line_exit_2(tmp_path: Path) -> None:
    proc = opera("harvest", "onnx", "--source", "no-such-source", "-o", str(tmp_path / "x.jsonl"))
    assert proc.returncode == 2
    lines = error_lines(proc)
    assert len(lines) == 1 and "unknown source 'no-such-source'" in lines[0], proc.stderr


def test_unwritable_output_is_one_line_exit_2(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    proc = opera("harvest", "onnx", "--source", "node-tests", "--limit", "2", "-o", str(blocker / "out.jsonl"))
    assert proc.returncode == 2
    lines = error_lines(proc)
    assert len(lines) == 1 and "out.jsonl" in lines[0], proc.stderr


def test_pytest_that_fails_to_start_is_one_line_exit_2(tmp_path: Path) -> None:
    out = tmp_path / "x.jsonl"
    proc = opera("harvest", "onnx", "-o", str(out), "--", str(tmp_path / "no_such_tests_dir"))
    assert proc.returncode == 2
    lines = [line for line in error_lines(proc) if line.startswith("opera harvest: error")]
    assert len(lines) == 1 and "pytest" in lines[0], proc.stderr
    if out.exists():  # whatever was written is a valid (empty) corpus
        assert list(read_corpus(out)) == []


def test_malformed_corpus_line_names_file_and_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl.gz"
    with gzip.open(bad, "wt") as fh:
        fh.write(json.dumps({"$schema": "opera-corpus", "version": 1, "library": "onnx"}) + "\n")
        fh.write("{this is not json\n")
    proc = opera("stats", str(bad))
    assert proc.returncode == 2
    lines = error_lines(proc)
    assert len(lines) == 1 and f"{bad}:2" in lines[0], proc.stderr
    skipped = opera("stats", "--skip-malformed", str(bad))
    assert skipped.returncode == 0, skipped.stderr
    assert "malformed" in skipped.stdout


@pytest.mark.parametrize("limit", ["0", "-3"])
def test_non_positive_limit_is_rejected(tmp_path: Path, limit: str) -> None:
    proc = opera("harvest", "onnx", "--limit", limit, "-o", str(tmp_path / "x.jsonl"))
    assert proc.returncode == 2
    assert "--limit" in proc.stderr
