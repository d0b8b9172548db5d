"""Operator-level coverage (../shared/papers/004_*, III-B) of corpora: hand-made instances with known
degrees and vectors, and `opera stats --op-coverage` on the shipped ONNX corpus."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest

from opera.cli import main
from opera.model import InstanceKind, OperatorInstance, Source
from opera.report.op_coverage import N_MAXSPC, coverage_sets, operator_level_coverage

REPO = Path(__file__).resolve().parents[1]


def _node(op: str, *inputs: np.ndarray, outputs: int = 1, **attrs: object) -> OperatorInstance:
    return OperatorInstance(
        library="onnx", api=f"onnx::{op}", kind=InstanceKind.ONNX_NODE, inputs=tuple(inputs), kwargs=dict(attrs),
        extra={"opset": 17}, source=Source(suite="t"), outputs=tuple(["float32[2]"] * outputs), valid=True,
    )  # fmt: skip


def test_each_criterion_counts_what_the_paper_defines() -> None:
    a, b = np.zeros(2, np.float32), np.zeros(3, np.float32)
    block = coverage_sets(
        [_node("Relu", a), _node("Relu", b), _node("Split", a, outputs=2), _node("Split", a, a, outputs=3), _node("Abs", a)]
    )
    measured = coverage_sets([_node("Relu", a), _node("Split", a, outputs=2)])
    cov = operator_level_coverage(measured, block)
    assert cov.otc == pytest.approx(2 / 3)  # Abs is missing
    assert cov.idc == pytest.approx((1 + 0.5 + 0) / 3)  # Split: degree 1 of {1, 2}
    assert cov.odc == pytest.approx((1 + 0.5 + 0) / 3)  # Split: 2 outputs of {2, 3}
    assert cov.spc == pytest.approx((1 + 1 + 0) / 3 / N_MAXSPC)  # one vector each of Relu and Split
    assert cov.olc == pytest.approx((cov.otc + cov.idc + cov.odc + cov.spc) / 4)
    assert operator_level_coverage(block, block).otc == 1.0 and operator_level_coverage(block, block).idc == 1.0


def test_rejected_instances_cover_nothing_and_attributes_make_new_vectors() -> None:
    a = np.zeros(2, np.float32)
    bad = dataclasses.replace(_node("Relu", a), valid=False)
    assert coverage_sets([bad]).operators == set()
    sets = coverage_sets([_node("LeakyRelu", a, alpha=0.1), _node("LeakyRelu", a, alpha=0.2), _node("LeakyRelu", a, alpha=0.2)])
    assert len(sets.vectors["onnx::LeakyRelu"]) == 2


def test_stats_reports_human_generated_and_both(capsys) -> None:
    corpora = [str(REPO / "harvested" / "onnx.jsonl.gz"), str(REPO / "harvested" / "generated-onnx.jsonl.gz")]
    assert main(["stats", *corpora, "--op-coverage", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)["onnx"]
    assert set(report) == {"human", "generated", "both"}
    assert report["both"]["otc"] == 1.0 and report["both"]["idc"] == 1.0
    # the generated corpus adds shape-and-parameter vectors the human one lacks
    assert report["both"]["spc"] > report["human"]["spc"] > 0
