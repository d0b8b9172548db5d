"""Equipped-corpus reader over every shipped file (opera.equipped)."""

from __future__ import annotations

from pathlib import Path

import pytest

from opera.corpus import write_corpus
from opera.equipped import EquippedError, read_equipped
from opera.model import InstanceKind, OperatorInstance, Source
from opera.values import Opaque, TensorSpec

SHARED = Path("/work/shared")
ARTIFACT = SHARED / "opera-artifact"
TVM027 = SHARED / "equipped" / "tvm-0.27_equipped_onnx_tc.txt"

LINE_FILES = sorted(ARTIFACT.glob("*/data/*_equipped_*.txt")) + [TVM027, ARTIFACT / "onnx/data/original_migrated_onnx_tc.txt"]

pytestmark = pytest.mark.skipif(not TVM027.exists(), reason="shared equipped corpora not present")


def _expected_records(path: Path) -> int:
    text = path.read_text(encoding="utf-8").splitlines()
    if "torch" in path.parent.parent.name:
        return sum(1 for line in text if line.startswith("# test_id"))
    return sum(1 for line in text if line.strip())


def test_tvm_027_figures_from_its_readme() -> None:
    corpus = read_equipped(TVM027)
    assert len(corpus.instances) == 1991
    assert len(corpus.op_counts()) == 160
    assert corpus.skipped == []
    assert corpus.library == "onnx"
    ms = {i.api for i in corpus.instances if i.extra.get("domain") == "com.microsoft"}
    assert ms == {f"onnx::{op}" for op in ("Attention", "BiasGelu", "EmbedLayerNormalization", "FastGelu", "Gelu", "MatMulInteger16", "SkipLayerNormalization")}


@pytest.mark.parametrize("path", LINE_FILES, ids=lambda p: p.name)
def test_every_shipped_record_parses(path: Path) -> None:
    corpus = read_equipped(path)
    assert corpus.skipped == []
    assert len(corpus.instances) == _expected_records(path)
    prefix = {"onnx": "onnx::", "keras": "keras.layers.", "torch": "torch."}[corpus.library]
    assert all(i.api.startswith(prefix) for i in corpus.instances)
    assert all(i.source.suite == "equipped" for i in corpus.instances)


def test_onnx_record_fields() -> None:
    corpus = read_equipped(ARTIFACT / "onnx/data/ov_equipped_onnx_tc.txt")
    pad = corpus.instances[0]  # make_graph(op_type='Pad', kwargs={'mode': b'constant', ...}, ...)
    assert pad.api == "onnx::Pad" and pad.kind is InstanceKind.ONNX_NODE
    assert pad.kwargs["mode"] == "constant"  # bytes decoded like our harvest does
    assert pad.kwargs["pads"] == [0, 0, 1, 2, 0, 0, 3, 4]
    assert pad.inputs == (TensorSpec("float32", (6, 8, 10, 12)),)


def test_onnx_omitted_and_symbolic_inputs() -> None:
    corpus = read_equipped(TVM027)
    with_none = [i for i in corpus.instances if None in i.inputs]
    assert with_none, "the tvm-0.27 file has omitted optional inputs (dtype UNDEFINED)"
    assert all(i.inputs[-1] is not None for i in corpus.instances if i.inputs)  # trailing omitted dropped
    seq = [i for i in corpus.instances if any(isinstance(v, Opaque) for v in i.inputs)]
    assert seq and all(not i.migratable for i in seq)


def test_torch_functional_and_module_records() -> None:
    corpus = read_equipped(ARTIFACT / "torch/data/ov_equipped_torch_tc.txt")
    first = corpus.instances[0]  # adaptive_avg_pool3d(args[0], para_1) with para_0 the input
    assert first.api == "torch.nn.functional.adaptive_avg_pool3d"
    assert first.kind is InstanceKind.FUNCTION
    assert first.args == (TensorSpec("float32", (1, 2, 8, 9, 10)), [5, 7, 9])
    tvm = read_equipped(ARTIFACT / "torch/data/tvm_equipped_torch_tc.txt")
    shuffle = tvm.instances[1]  # torch.nn.PixelShuffle(2,) with tensor(N) dims
    assert shuffle.api == "torch.nn.PixelShuffle" and shuffle.kind is InstanceKind.MODULE
    assert shuffle.args == (2,)
    assert shuffle.inputs == (TensorSpec("float32", (1, 144, 16, 16)),)


def test_keras_multi_input_shapes() -> None:
    corpus = read_equipped(ARTIFACT / "keras/data/tvm_equipped_keras_tc.txt")
    add = next(i for i in corpus.instances if i.api == "keras.layers.Add")
    assert len(add.inputs) == 3 and add.inputs[0] == TensorSpec("float32", (None, 32, 32, 8))
    conv = corpus.instances[0]
    assert conv.args == (8, [3, 3]) and conv.kwargs == {"padding": "same"}


def test_records_are_parsed_not_executed(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    f = tmp_path / "evil_equipped_onnx_tc.txt"
    f.write_text(
        f"make_graph(op_type=__import__('pathlib').Path({str(marker)!r}).touch(), kwargs={{}})\n"
        "make_graph(op_type='Relu', kwargs={}, input_name=('x',), input_shape=([2],), input_dtype=('FLOAT',))\n"
    )
    corpus = read_equipped(f)
    assert not marker.exists()
    assert [i.api for i in corpus.instances] == ["onnx::Relu"]
    assert [s.line for s in corpus.skipped] == [1]


def test_opera_corpus_format_accepted(tmp_path: Path) -> None:
    inst = OperatorInstance(library="onnx", api="onnx::Relu", kind=InstanceKind.ONNX_NODE, inputs=(TensorSpec("float32", (3,)),), source=Source("pytest"))
    path = tmp_path / "tvm_own.jsonl.gz"
    write_corpus(path, [inst])
    corpus = read_equipped(path)
    assert [i.id for i in corpus.instances] == [inst.id]


def test_missing_or_unknown_file(tmp_path: Path) -> None:
    with pytest.raises(EquippedError, match="not found"):
        read_equipped(tmp_path / "nope.txt")
    junk = tmp_path / "junk.txt"
    junk.write_text("hello world\n")
    with pytest.raises(EquippedError, match="not an equipped corpus"):
        read_equipped(junk)
