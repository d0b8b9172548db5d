"""Oracle units: distances, NaN/Inf patterns, shape/dtype/count mismatches, thresholds."""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest

from opera.errors import OperaError
from opera.verdict.oracles import chebyshev_distance, compare_outputs, load_oracle_config, nonfinite_mismatch


@pytest.fixture(scope="module")
def config():
    return load_oracle_config()


def test_distance_is_max_abs_difference() -> None:
    a = np.array([1.0, 2.0, 3.0], np.float32)
    b = np.array([1.0, 2.5, 2.0], np.float32)
    assert chebyshev_distance(a, b) == pytest.approx(1.0)
    assert chebyshev_distance(a, a) == 0.0


def test_distance_empty_int_bool_complex() -> None:
    assert chebyshev_distance(np.zeros((0, 3)), np.zeros((0, 3))) == 0.0
    big = np.array([np.iinfo(np.int64).max, 0], np.int64)
    other = np.array([np.iinfo(np.int64).min, 0], np.int64)
    assert chebyshev_distance(big, other) == float(2**64 - 1)  # no int64 overflow
    assert chebyshev_distance(np.array([True, False]), np.array([True, True])) == 1.0
    assert chebyshev_distance(np.array([3 + 4j]), np.array([0j])) == pytest.approx(5.0)


def test_distance_ignores_matching_nonfinite_positions() -> None:
    a = np.array([np.nan, np.inf, -np.inf, 1.0])
    b = np.array([np.nan, np.inf, -np.inf, 1.25])
    assert chebyshev_distance(a, b) == pytest.approx(0.25)
    assert nonfinite_mismatch(a, b) is None


def test_nan_pattern_mismatch_is_infinite_distance(config) -> None:
    a = np.array([np.nan, 1.0], np.float32)
    b = np.array([0.0, 1.0], np.float32)
    assert "NaN" in (nonfinite_mismatch(a, b) or "")
    assert chebyshev_distance(a, b) == math.inf
    verdict = compare_outputs([a], [b], config)
    assert not verdict.consistent and "NaN" in verdict.reason
    inf_sign = compare_outputs([np.array([np.inf])], [np.array([-np.inf])], config)
    assert not inf_sign.consistent and "Inf" in inf_sign.reason


def test_shape_dtype_count_mismatch(config) -> None:
    x = np.ones((2, 3), np.float32)
    assert not compare_outputs([x], [x.reshape(3, 2)], config).consistent
    assert "shape" in compare_outputs([x], [x.reshape(3, 2)], config).reason
    assert "dtype" in compare_outputs([x], [x.astype(np.float64)], config).reason
    count = compare_outputs([x], [x, x], config)
    assert not count.consistent and "count" in count.reason


def test_threshold_default_and_recorded_distance(config) -> None:
    x = np.zeros(4, np.float32)
    small = compare_outputs([x], [x + 5e-4], config)
    assert small.consistent and small.distance == pytest.approx(5e-4, rel=1e-3)
    assert not compare_outputs([x], [x + 2e-3], config).consistent


def test_half_precision_is_looser_and_instance_tolerance_applies(config) -> None:
    h = np.zeros(4, np.float16)
    assert compare_outputs([h], [h + np.float16(5e-3)], config).consistent
    bf = np.zeros(4, ml_dtypes.bfloat16)
    assert compare_outputs(
        [bf], [(bf.astype(np.float32) + 0.03).astype(ml_dtypes.bfloat16)], config
    ).consistent
    # float32 output of a float16 computation is judged with the float16 threshold
    f = np.zeros(4, np.float32)
    assert compare_outputs([f], [f + 5e-3], config, input_dtypes=["float16"]).consistent
    assert not compare_outputs([f], [f + 5e-3], config).consistent
    assert compare_outputs([f], [f + 5e-3], config, tolerance=(1e-2, None)).consistent


def test_integers_exact(config) -> None:
    i = np.array([1, 2, 3], np.int32)
    assert not compare_outputs([i], [i + 1], config).consistent


def test_config_override_per_target_and_dtype(tmp_path, config) -> None:
    path = tmp_path / "o.toml"
    path.write_text(
        '[default]\natol = 0.5\n[target."t1"]\natol = 0.01\n[target."t1".dtype.float64]\natol = 2.0\n'
    )
    cfg = load_oracle_config(path)
    assert cfg.threshold(None, "float32").atol == 0.5
    assert cfg.threshold("t1", "float32").atol == 0.01
    assert cfg.threshold("t1", "float64").atol == 2.0
    x = np.zeros(2, np.float32)
    assert compare_outputs([x], [x + 0.1], cfg).consistent
    assert not compare_outputs([x], [x + 0.1], cfg, target="t1").consistent


def test_bad_config_is_a_user_error(tmp_path) -> None:
    path = tmp_path / "bad.toml"
    path.write_text("[default]\natool = 1\n")
    with pytest.raises(OperaError, match="atool"):
        load_oracle_config(path)
    with pytest.raises(OperaError, match="not found"):
        load_oracle_config(tmp_path / "missing.toml")
    # [[undefined]] rules: a known condition and the specification's words are required
    for body, message in (
        ("[[undefined]]\napis = ['^x$']\nwhen = 'sometimes'\nreason = 'r'\n", "when = 'sometimes'; known: always"),
        ("[[undefined]]\napis = ['^x$']\nwhen = 'always'\n", "a reason"),
        ("[[undefined]]\napis = ['(']\nwhen = 'always'\nreason = 'r'\n", "bad pattern"),
        ("[undefined]\napis = ['^x$']\n", "as \\[\\[undefined\\]\\] tables"),
        ("[[undefined]]\napis = ['^x$']\nwhen = 'always'\nreason = 'r'\ndomain = 'yes'\n", "domain = true or false"),
        ("[[undefined]]\napis = ['^x$']\nwhen = 'always'\nreason = 'r'\nopsets = [10]\n", "opsets = \\[first, last\\]"),
        ("[[undefined]]\napis = ['^x$']\nwhen = 'always'\nreason = 'r'\nunless = 'sum'\n", "unless = \\{argument"),
        ("[[undefined]]\napis = ['^x$']\nwhen = 'always'\nreason = 'r'\nonly_if = {ord = 2}\n", "only_if = \\{argument"),
        ("[[undefined]]\napis = ['^x$']\nwhen = 'always'\nreason = 'r'\npositions = {k = 'one'}\n", "positions = \\{argument = index\\}"),
    ):
        path.write_text(body)
        with pytest.raises(OperaError, match=message):
            load_oracle_config(path)


def test_strings_of_either_numpy_kind_are_one_type(config) -> None:
    held = np.array(["a", "bc"], dtype=object)
    assert compare_outputs([held], [np.array(["a", "bc"])], config).consistent  # object vs <U2
    assert not compare_outputs([held], [np.array([1, 2])], config).consistent


def test_library_tolerance_does_not_loosen_integers(config) -> None:
    big = np.array([2**30, 5], np.int32)
    assert not compare_outputs([big], [big + 1], config, tolerance=(1e-7, 1e-3)).consistent
    f = np.array([1000.0], np.float32)
    assert compare_outputs([f], [f + 0.5], config, tolerance=(1e-7, 1e-3)).consistent


def test_string_outputs_compare_by_equality(config) -> None:
    words = np.array(["a", "bc"], dtype=object)
    assert compare_outputs([words], [words.copy()], config).consistent
    verdict = compare_outputs([words], [np.array(["a", "x"], dtype=object)], config)
    assert not verdict.consistent and verdict.distance == math.inf


def test_nan_in_float_output_of_an_integer_reference_is_caught(config) -> None:
    verdict = compare_outputs([np.array([1, 2], np.int64)], [np.array([1.0, np.nan])], config)
    assert not verdict.consistent and verdict.distance == math.inf


def test_random_operators_compare_shapes_not_values(config) -> None:
    assert config.is_random("onnx::RandomUniformLike") and not config.is_random("onnx::Relu")
    ref, other = np.zeros((2, 3), np.float32), np.ones((2, 3), np.float32)
    assert compare_outputs([ref], [other], config, compare_values=False).consistent
    assert not compare_outputs([ref], [other.reshape(3, 2)], config, compare_values=False).consistent
    assert not compare_outputs([ref], [other], config).consistent
