"""Verdicts on a compiler's own frontend tests (issue 17, issue 11): the classes of false alarm that
harvesting Apache TVM's ONNX frontend tests showed, each on an instance of that harvest
(``tests/data/tvm_frontend_onnx_slice.jsonl``, cut by ``tests/data/cut_tvm_onnx_suite.py``), and the
real bugs beside them, which must stay reported:

- an input outside the operator's defined domain at its opset (a 5-D GridSample or the opset-20
  mode names at opset 16, a per-axis scale for QuantizeLinear-10, a NaN Clip bound) is
  ``undefined`` before any compiler runs;
- a feature the frontend says or shows it lacks (BatchNormalization-15's mixed float types on
  OpenVINO, a bfloat16 LayerNormalization and an empty optional graph output on TVM) is a gap;
- a parameter operand the test never gave a value (an IR-only test's quantization scale) is not
  migratable: no negative scale is invented for it.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from _run_fixtures import verdict_in_process

from opera.corpus import CorpusReader
from opera.model import OperatorInstance
from opera.outcomes import Outcome
from opera.verdict.oracles import load_oracle_config
from opera.verdict.undefined import outside_domain

SLICE = Path(__file__).resolve().parent / "data" / "tvm_frontend_onnx_slice.jsonl"


def _by_test(suffix: str) -> OperatorInstance:
    for inst in CorpusReader([SLICE]):
        if inst.source.test.endswith("::" + suffix):
            return inst
    raise AssertionError(f"{suffix} is not in {SLICE.name}")


OUTSIDE_THE_DOMAIN = [
    ("test_grid_sample_5d[0-border-bilinear]", "4-D tensor"),
    ("test_grid_sample_linear_mode_translation", "bilinear (default), nearest and bicubic"),
    ("test_quantizelinear_default_axis_opset10", "is a scalar"),
    ("test_dequantizelinear_default_axis_opset10", "is a scalar"),
    ("test_clip_v13[input0-min1-max1]", "NaN bound"),
]


@pytest.mark.parametrize(("test", "words"), OUTSIDE_THE_DOMAIN)
@pytest.mark.parametrize("target", ["ov-onnx", "tvm-onnx"])
def test_an_instance_outside_the_operators_domain_is_undefined(test: str, words: str, target: str, state) -> None:
    result = verdict_in_process(state, _by_test(test), target)
    assert result.outcome is Outcome.UNDEFINED, (result.outcome, result.message[-300:])
    assert "outside the operator's domain" in result.message and words in result.message, result.message


def test_the_domain_rules_hold_only_where_the_text_does() -> None:
    """Clip with finite bounds, GridSample at opset 20 with its own mode names, a scalar scale at
    opset 10 and a 1-D scale at opset 13 are all in the domain."""
    import numpy as np

    rules = load_oracle_config().undefined
    x = np.zeros((1, 3, 4, 4), np.float32)
    assert outside_domain(rules, "onnx::Clip", {}, {"input_1": np.float32(0), "input_2": np.float32(6)}, [x]) is None
    assert outside_domain(rules, "onnx::Clip", {}, {"input_0": np.float32("nan")}, [x]) is None  # data, not a bound
    assert outside_domain(rules, "onnx::GridSample", {"mode": "linear"}, {"input_0": x}, [x], opset=20) is None
    assert outside_domain(rules, "onnx::GridSample", {"mode": "bilinear"}, {"input_0": x}, [x], opset=20) is not None
    assert outside_domain(rules, "onnx::GridSample", {}, {"input_0": x[..., None]}, [x], opset=20) is None
    scale = np.ones(3, np.float32)
    assert outside_domain(rules, "onnx::QuantizeLinear", {}, {"input_1": scale}, [x], opset=13) is None
    assert outside_domain(rules, "onnx::QuantizeLinear", {}, {"input_1": np.float32(1)}, [x], opset=10) is None
    assert outside_domain(rules, "onnx::QuantizeLinear", {}, {"input_1": scale}, [x], opset=None) is None


@pytest.mark.slow
def test_clip_with_finite_bounds_is_run_and_passes(state) -> None:
    result = verdict_in_process(state, _by_test("test_clip_v13[input0-min0-max0]"), "ov-onnx")
    assert result.outcome is Outcome.PASS, (result.outcome, result.message[-300:])


@pytest.mark.slow
@pytest.mark.parametrize(
    ("test", "target"),
    [
        ("test_batch_norm_mixed_dtype_params", "ov-onnx"),  # "Input element types do not match"
        ("test_layer_norm", "tvm-onnx"),  # "layer_norm: only support float32 and float16 for now"
        ("test_optional_has_element_empty", "tvm-onnx"),  # "Empty optional graph outputs are not supported"
    ],
)
def test_features_the_frontend_lacks_are_gaps(test: str, target: str, state) -> None:
    result = verdict_in_process(state, _by_test(test), target)
    assert result.outcome is Outcome.UNSUPPORTED, (result.outcome, result.message[-300:])


@pytest.mark.slow
@pytest.mark.parametrize(
    ("test", "target", "words"),
    [
        # OpenVINO's ReduceL1 at opsets 13-17 ignores the axes attribute and reduces every axis
        ("test_composite_reduce_funcs_axes_attr_ir", "ov-onnx", "shape (3, 1, 3) vs (1, 1, 1)"),
        # TVM returns the input for a composite reduction over no axes: ReduceL2-18's text says
        # 'composite-reduction operators will still perform the non-reduction steps' (|x| here)
        ("test_composite_reduce_funcs_axes_input_ir", "tvm-onnx", "distance"),
    ],
)
def test_the_real_bugs_beside_them_stay_reported(test: str, target: str, words: str, state) -> None:
    result = verdict_in_process(state, _by_test(test), target)
    assert result.outcome is Outcome.INCONSISTENT, (result.outcome, result.message[-300:])
    assert words in result.message, result.message


def test_a_parameter_the_test_never_gave_is_not_invented() -> None:
    inst = _by_test("test_quantizelinear_integer_saturate[21]")
    assert inst.valid is False and "parameter operand 1 (scale) of QuantizeLinear" in (inst.invalid_reason or "")
