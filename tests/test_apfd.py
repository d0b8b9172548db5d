"""APFD / RAUC / time curves, and the paper's Table II from the artifact's bug positions."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from opera.report.apfd import (
    ApfdUndefined,
    apfd,
    apfd_from_outcomes,
    bugs_over_time,
    first_bug_positions,
    rauc,
    rauc_levels,
)

# vendored from the paper's artifact (tests/data/README.md)
POSITIONS = Path(__file__).resolve().parent / "data" / "apfd_bug_positions_from_cal_APFD_all.json"

# Table II of the paper (compiler, frontend) -> strategy -> APFD. TensorRT-Keras has no cell.
TABLE_II = {
    ("tvm", "torch"): (0.984, 0.913, 0.930, 0.815, 0.778),
    ("tvm", "keras"): (0.976, 0.905, 0.906, 0.691, 0.868),
    ("tvm", "onnx"): (0.727, 0.577, 0.487, 0.316, 0.575),
    ("trt", "torch"): (0.982, 0.867, 0.930, 0.706, 0.854),
    ("trt", "onnx"): (0.768, 0.645, 0.628, 0.663, 0.334),
    ("ov", "torch"): (0.983, 0.877, 0.927, 0.608, 0.670),
    ("ov", "keras"): (0.946, 0.850, 0.919, 0.750, 0.740),
    ("ov", "onnx"): (0.816, 0.716, 0.689, 0.323, 0.416),
}
AVERAGE = (0.898, 0.794, 0.802, 0.609, 0.654)
STRATEGIES = ("our", "random", "fast", "cov", "delta_cov")
# The artifact's positions give 0.90448 for TVM-Keras random; the paper prints 0.905 (probably
# rounded from another of its five repetitions). Checked to within 0.001 instead of 3 decimals.
OFF_BY_ROUNDING = {("tvm", "keras", "random")}

def _load() -> dict:
    return json.loads(POSITIONS.read_text())


def _apfd_of(data: dict, compiler: str, frontend: str, strategy: str) -> float:
    return apfd(data[compiler][f"{frontend}_{strategy}"], data["n_tests"][frontend])


@pytest.mark.parametrize("subject", sorted(TABLE_II), ids=lambda s: "-".join(s))
def test_table_ii_cells(subject: tuple[str, str]) -> None:
    data = _load()
    for strategy, expected in zip(STRATEGIES, TABLE_II[subject], strict=True):
        value = _apfd_of(data, *subject, strategy)
        if (*subject, strategy) in OFF_BY_ROUNDING:
            assert abs(value - expected) < 1e-3, (subject, strategy, value)
            assert round(value, 3) != expected  # documents the mismatch; fails once it is explained
        else:
            assert round(value, 3) == expected, (subject, strategy, value)


def test_table_ii_average_row() -> None:
    data = _load()
    for i, strategy in enumerate(STRATEGIES):
        values = [_apfd_of(data, c, f, strategy) for c, f in TABLE_II]
        assert round(sum(values) / len(values), 3) == AVERAGE[i], strategy


def test_apfd_formula_by_hand() -> None:
    # n = 10, bugs first revealed at ranks 1 and 4: 1 - 5/20 + 1/20 = 0.8
    assert apfd([1, 4], 10) == pytest.approx(0.8)
    # the best order for m = n = 1 gives 1 - 1 + 1/2
    assert apfd([1], 1) == pytest.approx(0.5)


def test_apfd_undefined_without_bugs() -> None:
    with pytest.raises(ApfdUndefined, match="m = 0"):
        apfd([], 10)
    with pytest.raises(ApfdUndefined, match="m = 0"):
        apfd_from_outcomes(["a", "b"], {"a": None})
    with pytest.raises(ApfdUndefined, match="n = 0"):
        apfd([1], 0)
    with pytest.raises(ValueError):
        apfd([11], 10)


def test_first_positions_count_unique_signatures_once() -> None:
    order = ["t1", "t2", "t3", "t4", "t5"]
    bug_of = {"t2": "crash:A", "t3": "crash:A", "t5": "wrong:B"}
    assert first_bug_positions(order, bug_of) == {"crash:A": 2, "wrong:B": 5}
    assert apfd_from_outcomes(order, bug_of) == pytest.approx(1 - 7 / 10 + 1 / 10)
    # the reverse order finds B first
    assert first_bug_positions(order[::-1], bug_of) == {"wrong:B": 1, "crash:A": 3}


def test_rauc() -> None:
    # ideal: the m bugs at ranks 1..m
    assert rauc([1, 2, 3], 100) == pytest.approx(1.0)
    # n = 4, one bug at rank 2: curve 0,1,1,1 -> 3; ideal 1,1,1,1 -> 4
    assert rauc([2], 4) == pytest.approx(0.75)
    # first half only (cutoff 2): curve 0,1 -> 1; ideal 1,1 -> 2
    assert rauc([2], 4, 0.5) == pytest.approx(0.5)
    # a bug after the cutoff adds nothing
    assert rauc([3], 4, 0.5) == 0.0
    levels = rauc_levels([2, 30, 90], 100)
    assert list(levels) == [0.25, 0.5, 0.75, 1.0]
    assert levels[0.25] < levels[0.5] < levels[1.0] < 1.0
    with pytest.raises(ApfdUndefined):
        rauc([], 4)


def test_bugs_over_time_counts_prioritization_time() -> None:
    order = ["a", "b", "c", "d"]
    bug_of = {"b": "X", "c": "X", "d": "Y"}
    durations = {"a": 1.0, "b": 2.0, "c": 4.0, "d": 8.0}
    curve = bugs_over_time(order, bug_of, durations, prioritization_seconds=10.0)
    assert curve.times == (13.0, 25.0)
    assert curve.bugs == (1, 2)
    assert curve.total_time == 25.0
    assert curve.bugs_at(12.9) == 0 and curve.bugs_at(13.0) == 1 and curve.bugs_at(100) == 2
    assert curve.time_to_all() == 25.0
    assert bugs_over_time(order, {}, durations).time_to_all() is None
