"""Coverage gaps (issue 11, class 9): unsupported results become an operator x feature table.

Real tests on OpenVINO's ONNX frontend: ``Cast`` to FLOAT8E4M3FNUZ is refused at load ("Unsupported
type") while other ``Cast``s convert, so the gap is the dtype, not the operator; ``TfIdfVectorizer``
has no converter at all, so the gap is the operator.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from opera.corpus import CorpusReader
from opera.outcomes import Outcome
from opera.report.coverage_gaps import coverage_gaps, gap_table_lines
from opera.run.execution import WorkerState, execute_task
from opera.run.executors import TestTask, WorkerSettings

pytestmark = pytest.mark.slow

HARVESTED = Path(__file__).resolve().parents[1] / "harvested"
TESTS = ("test_cast_FLOAT_to_FLOAT16", "test_cast_FLOAT_to_FLOAT8E4M3FNUZ", "test_cast_FLOAT16_to_FLOAT")


def test_unsupported_results_become_operator_and_dtype_gaps() -> None:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    state = WorkerState(WorkerSettings(seed=0))
    if state.target("ov-onnx").availability() is not None:
        pytest.skip("ov-onnx is not available here")
    chosen = {}
    for inst in CorpusReader([HARVESTED / "onnx.jsonl.gz"]):
        if (inst.source.test in TESTS and inst.api == "onnx::Cast") or (
            inst.api == "onnx::TfIdfVectorizer" and "tfidf" not in chosen
        ):
            chosen.setdefault("tfidf" if inst.api == "onnx::TfIdfVectorizer" else inst.source.test, inst)
    assert len(chosen) == 4, sorted(chosen)
    results = [execute_task(TestTask(0, i, "ov-onnx"), state, lambda s: None).result for i in chosen.values()]
    assert [r.outcome for r in results].count(Outcome.UNSUPPORTED) == 2, [(r.api, r.outcome) for r in results]
    by_id = {i.id: i for i in chosen.values()}
    gaps = coverage_gaps(results, by_id)
    table = {(g.api, g.feature): g for g in gaps}
    # TensorProto.FLOAT8E4M3FNUZ = 18: the destination type is what OpenVINO lacks
    assert set(table) == {("onnx::Cast", "attribute:to=18"), ("onnx::TfIdfVectorizer", "operator")}, table
    assert table[("onnx::TfIdfVectorizer", "operator")].evidence.startswith("-- No conversion rule")
    assert any(line.strip().startswith("ov-onnx:") for line in gap_table_lines(gaps))
    # without the instances, an operator that converted elsewhere is still not an operator gap
    assert {g.feature for g in coverage_gaps(results) if g.api == "onnx::Cast"} == {"other"}
