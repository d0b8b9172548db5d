"""notebooks/*.ipynb executed top to bottom on a small real store and a small corpus slice.

The notebooks are parameterized by environment variables (OPERA_STORE, OPERA_RUN, OPERA_CORPUS,
OPERA_MANIFEST, OPERA_EQUIPPED), which the kernel inherits. A cell that raises fails the test; a few
figures of the outputs are checked against what the store and the slice hold.
"""

from __future__ import annotations

import itertools
import json
import os
import sys
from pathlib import Path

import nbformat
import pytest
from _run_fixtures import fault, relus, write
from nbclient import NotebookClient

from opera.corpus import read_corpus, write_corpus
from opera.harvest.manifest import write_manifest
from opera.prioritize.partitions import operator_key
from opera.run.runner import RunConfig, start_run

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"
SLICE = 150  # instances taken from the head of each shipped corpus file

# A compiler-side equipped ONNX corpus in the artifact's line format: two operators the slice has,
# one it does not.
EQUIPPED_ONNX = """\
make_graph(op_type='Abs', kwargs={}, input_name=('x',), input_shape=([3, 4],), input_dtype=('FLOAT',), output_name=('y',), output_shape=([3, 4],), output_dtype=('FLOAT',))
make_graph(op_type='Add', kwargs={}, input_name=('a', 'b'), input_shape=([2, 3], [2, 3]), input_dtype=('FLOAT', 'FLOAT'), output_name=('y',), output_shape=([2, 3],), output_dtype=('FLOAT',))
make_graph(op_type='Gemm', kwargs={'alpha': 1.0}, input_name=('a', 'b'), input_shape=([2, 3], [3, 4]), input_dtype=('FLOAT', 'FLOAT'), output_name=('y',), output_shape=([2, 4],), output_dtype=('FLOAT',))
"""
EQUIPPED_KERAS = """\
layer_test(keras.layers.Dense,args=(3,),kwargs={},input_shape=[None, 4],input_dtype='float32',)
"""


@pytest.fixture(scope="module")
def kernel_env(tmp_path_factory) -> Path:
    """A kernelspec named like the notebooks' (python3) that runs this interpreter, found first."""
    root = tmp_path_factory.mktemp("jupyter")
    spec = root / "kernels" / "python3"
    spec.mkdir(parents=True)
    argv = [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    (spec / "kernel.json").write_text(
        json.dumps({"argv": argv, "display_name": "Python 3 (opera tests)", "language": "python"})
    )
    return root


def _execute(name: str, env: dict[str, str], jupyter_path: Path, monkeypatch) -> tuple[str, int]:
    """Run notebooks/<name> in its own directory: (the text of every output, PNG figures shown)."""
    monkeypatch.setenv("JUPYTER_PATH", str(jupyter_path))
    monkeypatch.setenv("MPLBACKEND", "module://matplotlib_inline.backend_inline")
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    book = nbformat.read(NOTEBOOKS / name, as_version=4)
    client = NotebookClient(
        book, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(NOTEBOOKS)}}
    )
    client.execute()  # CellExecutionError when a cell raises
    texts, pngs = [], 0
    for cell in book.cells:
        for out in cell.get("outputs", []):
            if out.get("output_type") == "error":
                pytest.fail(f"{name}: {out.get('ename')}: {out.get('evalue')}")
            texts.append(out.get("text", ""))
            data = out.get("data", {})
            texts += [data.get("text/plain", ""), data.get("text/markdown", "")]
            pngs += "image/png" in data
    return "\n".join(texts), pngs


def test_committed_notebooks_have_no_outputs() -> None:
    for path in sorted(NOTEBOOKS.glob("*.ipynb")):
        book = nbformat.read(path, as_version=4)
        nbformat.validate(book)
        assert book.metadata.kernelspec.name == "python3", path.name
        for cell in book.cells:
            if cell.cell_type == "code":
                assert cell.outputs == [] and cell.execution_count is None, path.name


@pytest.mark.slow
def test_apfd_notebook_on_a_small_real_store(tmp_path: Path, kernel_env: Path, monkeypatch) -> None:
    # test-faults: raise, segv, abort (3 unique bugs) at ranks 7, 8, 9 of 16 tests; test-wrong: 1 bug
    instances = (
        relus(6) + [fault("raise", 1), fault("segv", 2), fault("abort@compile", 3)] + relus(7, start=10)
    )
    corpus = write(tmp_path / "c.jsonl", instances)
    store = tmp_path / "opera.db"
    config = RunConfig(
        corpus=[str(corpus)], targets=["test-faults", "test-wrong"], store=str(store), workers=1
    )
    assert start_run(config, show_progress=False).status == "complete"
    env = {"OPERA_STORE": str(store), "OPERA_RUN": "1", "OPERA_STRATEGIES": "", "OPERA_EQUIPPED": ""}
    text, pngs = _execute("apfd.ipynb", env, kernel_env, monkeypatch)
    # the run order's APFD on test-faults: 1 - (7 + 8 + 9) / (16 * 3) + 1 / 32
    assert f"{1 - 24 / 48 + 1 / 32:.3f}" == "0.531" and "0.531" in text
    assert "**Run 1**" in text and "random: the mean over 5 seeds" in text
    for strategy in ("opera", "op-only", "param-only", "random", "fast", "run"):
        assert strategy in text
    assert pngs == 2  # one time-to-bug plot per target


@pytest.mark.slow
def test_corpus_notebook_on_a_corpus_slice(tmp_path: Path, kernel_env: Path, monkeypatch) -> None:
    corpus_dir = tmp_path / "harvested"
    corpus_dir.mkdir()
    ops: dict[str, set[str]] = {}
    for lib in ("torch", "keras", "onnx"):
        head = list(itertools.islice(read_corpus(ROOT / "harvested" / f"{lib}.jsonl.gz"), SLICE))
        write_corpus(corpus_dir / f"{lib}.jsonl.gz", head, header={"library": lib})
        ops[lib] = {operator_key(i) for i in head if i.valid is not False}
    manifest = write_manifest(corpus_dir)
    equipped = [tmp_path / "tvm_equipped_onnx_tc.txt", tmp_path / "ov_equipped_keras_tc.txt"]
    equipped[0].write_text(EQUIPPED_ONNX)
    equipped[1].write_text(EQUIPPED_KERAS)
    env = {
        "OPERA_CORPUS": os.pathsep.join(str(p) for p in sorted(corpus_dir.glob("*.jsonl.gz"))),
        "OPERA_MANIFEST": str(manifest),
        "OPERA_EQUIPPED": os.pathsep.join(map(str, equipped)),
    }
    text, pngs = _execute("corpus.ipynb", env, kernel_env, monkeypatch)
    assert pngs == 2  # instances per operator, partition coverage
    assert {"onnx::Abs", "onnx::Add", "keras.layers.Dense"} <= ops["onnx"] | ops["keras"]
    for lib in ("torch", "keras", "onnx"):
        assert f"{lib}.jsonl.gz" in text
    # the overlap lines: 2 of the slice's ONNX operators used (Gemm only in the equipped corpus),
    # 1 keras operator used, the rest never used
    assert f"tvm_equipped_onnx_tc.txt: {len(ops['onnx']) - 2} never used" in text
    assert f"ov_equipped_keras_tc.txt: {len(ops['keras']) - 1} never used" in text
    assert f"onnx: {len(ops['onnx']) - 2} of {len(ops['onnx'])} corpus operators no equipped" in text
