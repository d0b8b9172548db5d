"""The equipped-corpus reader on every file the research artifact and ../equipped ship."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from opera.model import InstanceKind, OperatorInstance
from opera.prioritize.equipped import EquippedReader, read_equipped
from opera.values import ObjectSpec, Opaque, TensorSpec

# the equipped corpora (4 MB) are read from shared/ beside the checkout when it is there
SHARED = Path(os.environ.get("OPERA_SHARED", Path(__file__).resolve().parents[2] / "shared"))
ARTIFACT = SHARED / "opera-artifact"
TVM_027 = SHARED / "equipped" / "tvm-0.27_equipped_onnx_tc.txt"
ALL_FILES = sorted(ARTIFACT.glob("*/data/*_equipped_*_tc*.txt")) + [TVM_027]

pytestmark = pytest.mark.skipif(
    not TVM_027.exists(), reason="the shared equipped corpora are not on this machine"
)


def _expected_records(path: Path) -> int:
    """Records counted from the raw text: '# test_id' headers (torch) or call lines."""
    lines = path.read_text().splitlines()
    if any(line.startswith("# test_id") for line in lines):
        return sum(line.startswith("# test_id") for line in lines)
    return sum(line.startswith(("make_graph(", "layer_test(")) for line in lines)


@pytest.mark.parametrize("path", ALL_FILES, ids=lambda p: p.name)
def test_every_record_of_every_shipped_file_is_read_and_serializable(path: Path) -> None:
    reader = EquippedReader(path)
    instances = list(reader)
    assert reader.skipped == {}
    assert reader.records == _expected_records(path) == len(instances)
    for inst in instances:
        assert OperatorInstance.from_json(json.loads(inst.to_line())).id == inst.id
        assert inst.source.suite == "equipped" and inst.source.test.startswith(path.name + ":")


@pytest.mark.parametrize(
    ("path", "records", "op_types"),
    [
        (TVM_027, 1991, 160),  # ../equipped/README.md
        (ARTIFACT / "onnx/data/tvm_equipped_onnx_tc.txt", 758, 142),  # the same README: TVM 0.13
        (ARTIFACT / "onnx/data/original_migrated_onnx_tc.txt", 1013, 182),  # ../opera-artifact/README.md
    ],
    ids=["tvm-0.27", "tvm-0.13", "migrated"],
)
def test_counts_match_the_published_figures(path: Path, records: int, op_types: int) -> None:
    instances = list(read_equipped([path]))
    assert len(instances) == records
    assert len({inst.api for inst in instances}) == op_types
    assert all(inst.library == "onnx" and inst.api.startswith("onnx::") for inst in instances)


def test_onnx_record_fields() -> None:
    instances = list(EquippedReader(TVM_027))
    matmul = next(i for i in instances if i.api == "onnx::MatMul")
    assert matmul.kind is InstanceKind.ONNX_NODE
    assert matmul.inputs == (TensorSpec("float32", (None, None)), TensorSpec("float32", (48, 64)))
    attention = next(i for i in instances if i.api == "onnx::Attention")
    assert attention.extra["domain"] == "com.microsoft"
    assert attention.kwargs["num_heads"] == 12
    assert attention.inputs[3].dtype == "int32" and attention.inputs[4] is None  # omitted optional input
    sequence_inputs = [x for i in instances for x in i.inputs if isinstance(x, Opaque)]
    assert sequence_inputs and all(
        "SEQUENCE" in x.reason or "OPTIONAL" in x.reason or "STRING" in x.reason for x in sequence_inputs
    )


def test_torch_function_and_module_records() -> None:
    ov_torch = list(EquippedReader(ARTIFACT / "torch/data/ov_equipped_torch_tc.txt"))
    first = ov_torch[0]
    assert first.api == "torch.nn.functional.adaptive_avg_pool3d" and first.kind is InstanceKind.FUNCTION
    assert first.args == (TensorSpec("float32", (1, 2, 8, 9, 10)), [5, 7, 9])
    trt_torch = list(EquippedReader(ARTIFACT / "torch/data/trt_equipped_torch_tc.txt"))
    conv = trt_torch[1]  # verify_model(torch.nn.Conv2d(512,1000,kernel_size=1,).eval(), input_data=[...])
    assert conv.api == "torch.nn.Conv2d" and conv.kind is InstanceKind.MODULE
    assert conv.args == (512, 1000) and conv.kwargs == {"kernel_size": 1}
    assert conv.inputs == (TensorSpec("float16", (1, 3, 224, 224)),)
    methods = [i for i in ov_torch + trt_torch if i.api.startswith("torch.Tensor.")]
    assert all(isinstance(i.args[0], TensorSpec) for i in methods)


def test_keras_records() -> None:
    tvm_keras = list(EquippedReader(ARTIFACT / "keras/data/tvm_equipped_keras_tc.txt"))
    conv = tvm_keras[
        0
    ]  # layer_test(keras.layers.Conv2D,args=(8,[3, 3],),kwargs={'padding':"same",},input_shape=[None, 32, 32, 3],...)
    assert conv.api == "keras.layers.Conv2D" and conv.kind is InstanceKind.MODULE
    assert conv.args == (8, [3, 3]) and conv.kwargs == {"padding": "same"}
    assert conv.inputs == (TensorSpec("float32", (None, 32, 32, 3)),)
    add = tvm_keras[2]  # three inputs
    assert add.api == "keras.layers.Add" and len(add.inputs) == 3
    assert not any(
        isinstance(v, ObjectSpec) and v.api == "layer_test" for i in tvm_keras for v in i.kwargs.values()
    )
