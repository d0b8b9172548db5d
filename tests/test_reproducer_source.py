"""Reproducers embed Opera's source as the process loaded it (opera/reproduce/source.py).

A whole-corpus run's workers outlived a commit of ``opera/verdict/oracles.py``: ``inspect.getsource``
read the new file at the old line numbers, and 14 reproducers written in the next half hour were
fragments that did not parse (IndentationError).
"""

from __future__ import annotations

import importlib
import inspect
import os
import sys
import textwrap
from pathlib import Path

import pytest

from opera.reproduce.source import pin_loaded_sources

OLD = textwrap.dedent(
    '''\
    def compare(a, b):
        """The loaded version."""
        return abs(a - b)
    '''
)
NEW = textwrap.dedent(
    '''\
    import math


    def helper(x):
        return math.sqrt(x)


    def compare(a, b):
        return helper(abs(a - b)) if a != b else 0.0
    '''
)


@pytest.fixture
def loaded_module(tmp_path, monkeypatch):
    """A real module imported from a file that is then rewritten, as a commit rewrites Opera's."""
    path = tmp_path / "opera_pin_probe.py"
    path.write_text(OLD)
    monkeypatch.syspath_prepend(str(tmp_path))
    module = importlib.import_module("opera_pin_probe")
    yield module, path
    sys.modules.pop("opera_pin_probe", None)


def _rewrite(path: Path) -> None:
    path.write_text(NEW)
    later = path.stat().st_mtime + 10
    os.utime(path, (later, later))  # a later mtime, as a commit gives


def test_a_pinned_module_keeps_the_source_it_was_loaded_from(loaded_module) -> None:
    module, path = loaded_module
    assert pin_loaded_sources(("opera_pin_probe",)) == 1
    _rewrite(path)
    assert inspect.getsource(module.compare) == OLD
    assert pin_loaded_sources(("opera_pin_probe",)) == 0  # pinned once, not re-read


def test_without_the_pin_the_source_is_read_from_the_changed_file(loaded_module) -> None:
    """What the pin prevents: the function's old line numbers cut the new text."""
    module, path = loaded_module
    _rewrite(path)
    assert inspect.getsource(module.compare) != OLD


def test_a_reproducer_that_would_not_parse_is_not_written(tmp_path, monkeypatch) -> None:
    """The last line of defence: the assembled script is parsed before it is saved, and a fragment
    of embedded source is refused with the reason (the worker logs it; the test's verdict stands)."""
    pytest.importorskip("tvm")
    from opera.corpus import CorpusReader
    from opera.outcomes import Outcome, Stage, TestResult
    from opera.reproduce import write
    from opera.run.targets import get_target

    corpus = Path(__file__).resolve().parents[1] / "harvested" / "onnx.jsonl.gz"
    inst = next(i for i in CorpusReader([corpus]) if i.source.test == "test_shape_start_negative_1")
    result = TestResult(instance_id=inst.id, api=inst.api, target="tvm-onnx", outcome=Outcome.INCONSISTENT, stage=Stage.RUN)
    fragment = "    return _as_comparable(a)\n\n\ndef chebyshev_distance(a, b):\n    return 0.0\n"
    monkeypatch.setattr(write, "_oracle_source", lambda: fragment)
    with pytest.raises(ValueError, match="does not parse"):
        write.write_reproducer(inst, get_target("tvm-onnx"), result, tmp_path / "out")
    assert not (tmp_path / "out").exists() or not list((tmp_path / "out").iterdir())
