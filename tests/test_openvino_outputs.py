"""OpenVINO exposes 8-bit floats as uint8 and sub-byte types as packed bytes: the target unpacks
them so that a Cast to INT4 is compared value by value, not as a (false) shape mismatch."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

ov = pytest.importorskip("openvino")
ml_dtypes = pytest.importorskip("ml_dtypes")

from opera.run.targets._ov_io import from_ov_tensor as _from_ov_tensor  # noqa: E402


def _cast_through_openvino(values: np.ndarray, to: int, tmp_path) -> np.ndarray:
    import onnx

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, list(values.shape))
    y = helper.make_tensor_value_info("y", to, list(values.shape))
    graph = helper.make_graph([helper.make_node("Cast", ["x"], ["y"], to=to)], "g", [x], [y])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)], ir_version=10)
    path = tmp_path / "cast.onnx"
    onnx.save_model(model, str(path))
    compiled = ov.Core().compile_model(ov.convert_model(str(path)), "CPU")
    request = compiled.create_infer_request()
    request.infer([ov.Tensor(values)])
    return _from_ov_tensor(request.get_output_tensor(0))


@pytest.mark.parametrize(
    ("to", "dtype", "values"),
    [
        (TensorProto.INT4, "int4", [-8, -3, -1, 0, 1, 2, 5, 7, 3]),  # odd count: the last byte is half used
        (TensorProto.UINT4, "uint4", [0, 1, 2, 9, 15, 4, 7]),
        (TensorProto.FLOAT8E5M2, "float8_e5m2", [-2.0, -0.5, 0.0, 0.25, 1.5, 3.0]),
        (TensorProto.FLOAT8E4M3FN, "float8_e4m3fn", [-2.0, -0.5, 0.0, 0.25, 1.5, 3.0]),
    ],
)
def test_raw_bit_outputs_come_back_as_values(to: int, dtype: str, values: list[float], tmp_path) -> None:
    source = np.array(values, np.float32).reshape(-1)
    out = _cast_through_openvino(source, to, tmp_path)
    assert out.dtype == np.dtype(getattr(ml_dtypes, dtype))
    assert out.shape == source.shape
    np.testing.assert_array_equal(out.astype(np.float32), source)


@pytest.mark.slow
def test_ov_torch_feeds_only_the_parameters_openvino_kept() -> None:
    """``linspace(0, t, steps=0)`` does not depend on ``t``: OpenVINO drops that parameter, and
    feeding it anyway failed at run time ("Input port for index 0 was not found")."""
    pytest.importorskip("torch")
    from opera.model import InstanceKind, OperatorInstance, Source
    from opera.run.targets.openvino import OvTorchTarget
    from opera.templates.torch_template import TorchTemplate
    from opera.values import DType

    inst = OperatorInstance(
        library="torch",
        api="torch.linspace",
        kind=InstanceKind.FUNCTION,
        args=(0, np.array(4), 0),
        kwargs={"dtype": DType("float32")},
        source=Source(suite="opera-tests", test="linspace"),
    )
    built = TorchTemplate().build(inst)
    target = OvTorchTarget()
    converted = target.convert(built)
    assert converted.input_indices == []
    (out,) = target.run(target.compile(converted), built.inputs)
    assert out.shape == (0,) and out.dtype == np.float32


def test_ov_reproducer_decodes_raw_bit_outputs_like_the_target(tmp_path) -> None:
    """The reproducer reads OpenVINO's outputs with the target's own decoder: an INT4 Cast that
    passes in Opera runs clean on its own (exit 0, 25 int4 values compared, not 13 packed bytes)."""
    import subprocess
    import sys
    from pathlib import Path

    from opera.corpus import CorpusReader
    from opera.outcomes import Outcome, Stage, TestResult
    from opera.reproduce.write import write_reproducer
    from opera.run.targets import get_target

    corpus = Path(__file__).resolve().parents[1] / "harvested" / "onnx.jsonl.gz"
    inst = next(i for i in CorpusReader([corpus]) if i.source.test == "test_cast_FLOAT_to_INT4")
    result = TestResult(
        instance_id=inst.id, api=inst.api, target="ov-onnx", outcome=Outcome.INCONSISTENT, stage=Stage.RUN
    )
    path = write_reproducer(inst, get_target("ov-onnx"), result, tmp_path)
    assert path is not None and "import opera" not in path.read_text()
    proc = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "output 0: int4[5, 5] chebyshev distance 0" in proc.stdout
