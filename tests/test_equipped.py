"""The equipped-corpus reader on the corpora the research artifact ships and TVM 0.27's own.

The files are vendored under tests/data/equipped/ (tests/data/README.md): whole for the three ONNX
corpora whose counts are published, a slice (the first records and the first record of every
operator) of the others.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from opera.model import InstanceKind, OperatorInstance
from opera.prioritize.equipped import EquippedReader, read_equipped
from opera.values import ObjectSpec, Opaque, TensorSpec

VENDORED = Path(__file__).resolve().parent / "data" / "equipped"
NAMES = sorted(p.name.removesuffix(".gz") for p in VENDORED.glob("*.txt.gz"))
TVM_027 = "tvm-0.27_equipped_onnx_tc.txt"


@pytest.fixture(scope="module")
def equipped_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The vendored files unpacked under their original names (the reader keys on the name)."""
    out = tmp_path_factory.mktemp("equipped")
    for name in NAMES:
        (out / name).write_bytes(gzip.decompress((VENDORED / f"{name}.gz").read_bytes()))
    return out


def test_every_equipped_corpus_is_vendored() -> None:
    # 11 files: 6 ONNX (TVM 0.27 and the artifact's five), 2 Keras, 3 PyTorch
    assert len(NAMES) == 11 and TVM_027 in NAMES
    assert {n.split("_tc")[0].rsplit("_", 1)[1] for n in NAMES} == {"onnx", "keras", "torch"}


def _expected_records(path: Path) -> int:
    """Records counted from the raw text: '# test_id' headers (torch) or call lines."""
    lines = path.read_text().splitlines()
    if any(line.startswith("# test_id") for line in lines):
        return sum(line.startswith("# test_id") for line in lines)
    return sum(line.startswith(("make_graph(", "layer_test(")) for line in lines)


@pytest.mark.parametrize("name", NAMES)
def test_every_record_of_every_shipped_file_is_read_and_serializable(equipped_dir: Path, name: str) -> None:
    path = equipped_dir / name
    reader = EquippedReader(path)
    instances = list(reader)
    assert reader.skipped == {}
    assert reader.records == _expected_records(path) == len(instances)
    for inst in instances:
        assert OperatorInstance.from_json(json.loads(inst.to_line())).id == inst.id
        assert inst.source.suite == "equipped" and inst.source.test.startswith(path.name + ":")


@pytest.mark.parametrize(
    ("name", "records", "op_types"),
    [
        (TVM_027, 1991, 160),  # the README of the TVM 0.27 corpus
        ("tvm_equipped_onnx_tc.txt", 758, 142),  # the same README: TVM 0.13
        ("original_migrated_onnx_tc.txt", 1013, 182),  # the artifact's README
    ],
    ids=["tvm-0.27", "tvm-0.13", "migrated"],
)
def test_counts_match_the_published_figures(
    equipped_dir: Path, name: str, records: int, op_types: int
) -> None:
    instances = list(read_equipped([equipped_dir / name]))
    assert len(instances) == records
    assert len({inst.api for inst in instances}) == op_types
    assert all(inst.library == "onnx" and inst.api.startswith("onnx::") for inst in instances)


def test_onnx_record_fields(equipped_dir: Path) -> None:
    instances = list(EquippedReader(equipped_dir / TVM_027))
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


def test_torch_function_and_module_records(equipped_dir: Path) -> None:
    ov_torch = list(EquippedReader(equipped_dir / "ov_equipped_torch_tc.txt"))
    first = ov_torch[0]
    assert first.api == "torch.nn.functional.adaptive_avg_pool3d" and first.kind is InstanceKind.FUNCTION
    assert first.args == (TensorSpec("float32", (1, 2, 8, 9, 10)), [5, 7, 9])
    trt_torch = list(EquippedReader(equipped_dir / "trt_equipped_torch_tc.txt"))
    conv = trt_torch[1]  # verify_model(torch.nn.Conv2d(512,1000,kernel_size=1,).eval(), input_data=[...])
    assert conv.api == "torch.nn.Conv2d" and conv.kind is InstanceKind.MODULE
    assert conv.args == (512, 1000) and conv.kwargs == {"kernel_size": 1}
    assert conv.inputs == (TensorSpec("float16", (1, 3, 224, 224)),)


def test_torch_method_record(tmp_path: Path) -> None:
    # No artifact file has a Tensor-method record (forward returning args[0].m(...)); one in their format.
    path = tmp_path / "method_equipped_torch_tc.txt"
    path.write_text(
        "# test_id: 0 \n"
        "para_0 = torch.randn([2, 6], dtype=torch.float32)\n"
        "para_1 = [3, 4]\n"
        "class view(Module):\n"
        "    def forward(self, *args):\n"
        "        return args[0].view(para_1,)\n"
        "verify_model(view().float().eval(), input_data=para_0)\n"
    )
    (method,) = EquippedReader(path)
    assert method.api == "torch.Tensor.view" and method.kind is InstanceKind.FUNCTION
    assert method.args == (TensorSpec("float32", (2, 6)), [3, 4])


def test_keras_records(equipped_dir: Path) -> None:
    tvm_keras = list(EquippedReader(equipped_dir / "tvm_equipped_keras_tc.txt"))
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
