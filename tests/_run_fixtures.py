"""Small ONNX corpora for the runner tests (real instances through the real ONNX template)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from opera.corpus import CorpusWriter
from opera.model import InstanceKind, OperatorInstance, Source
from opera.values import Opaque

ONNX_EXTRA = {"opset": 17, "domain": "", "n_outputs": 1}


def relu(values: np.ndarray, test: str = "plain") -> OperatorInstance:
    return OperatorInstance(
        library="onnx",
        api="onnx::Relu",
        kind=InstanceKind.ONNX_NODE,
        inputs=(np.asarray(values, np.float32),),
        extra=dict(ONNX_EXTRA),
        source=Source(suite="opera-tests", test=test),
    )


def relus(n: int, start: int = 0, test: str = "plain") -> list[OperatorInstance]:
    """``n`` distinct Relu instances (distinct inputs, so distinct ids)."""
    return [relu(np.linspace(-1, 1, 6).reshape(2, 3) + k, test) for k in range(start, start + n)]


def fault(kind: str, k: int) -> OperatorInstance:
    """A Relu instance that makes the ``test-faults`` target misbehave (``kind[@stage]``)."""
    return relu(np.full((1, 3), float(k + 1)), test=f"fault:{kind}")


def add(shape_a: tuple[int, ...], shape_b: tuple[int, ...], seed: int = 0) -> OperatorInstance:
    rng = np.random.default_rng(seed)
    return OperatorInstance(
        library="onnx",
        api="onnx::Add",
        kind=InstanceKind.ONNX_NODE,
        inputs=(
            rng.standard_normal(shape_a).astype(np.float32),
            rng.standard_normal(shape_b).astype(np.float32),
        ),
        extra=dict(ONNX_EXTRA),
        source=Source(suite="opera-tests", test="add"),
    )


def tfidf() -> OperatorInstance:
    """TfIdfVectorizer: onnxruntime runs it; TVM and OpenVINO have no converter for it."""
    return OperatorInstance(
        library="onnx",
        api="onnx::TfIdfVectorizer",
        kind=InstanceKind.ONNX_NODE,
        inputs=(np.array([[1, 1, 3, 3, 3, 7], [8, 6, 7, 5, 6, 8]], np.int32),),
        kwargs={
            "mode": "TF",
            "min_gram_length": 2,
            "max_gram_length": 2,
            "max_skip_count": 0,
            "ngram_counts": [0, 4],
            "ngram_indexes": [0, 1, 2, 3, 4, 5, 6],
            "pool_int64s": [2, 3, 5, 4, 5, 6, 7, 8, 6, 7],
        },
        extra=dict(ONNX_EXTRA),
        source=Source(suite="opera-tests", test="tfidf"),
    )


def random_uniform_like() -> OperatorInstance:
    """No seed attribute: onnxruntime draws new values on every run (nondeterministic)."""
    return OperatorInstance(
        library="onnx",
        api="onnx::RandomUniformLike",
        kind=InstanceKind.ONNX_NODE,
        inputs=(np.zeros((4, 5), np.float32),),
        extra=dict(ONNX_EXTRA),
        source=Source(suite="opera-tests", test="random"),
    )


def dropout() -> OperatorInstance:
    """torch.nn.functional.dropout in training mode: random on every call."""
    return OperatorInstance(
        library="torch",
        api="torch.nn.functional.dropout",
        kind=InstanceKind.FUNCTION,
        args=(np.ones((8, 8), np.float32),),
        kwargs={"p": 0.5, "training": True},
        source=Source(suite="opera-tests", test="dropout"),
    )


def torch_gelu() -> OperatorInstance:
    return OperatorInstance(
        library="torch",
        api="torch.nn.functional.gelu",
        kind=InstanceKind.FUNCTION,
        args=(np.linspace(-2, 2, 12, dtype=np.float32).reshape(3, 4),),
        source=Source(suite="opera-tests", test="gelu"),
    )


def keras_dense() -> OperatorInstance:
    return OperatorInstance(
        library="keras",
        api="keras.layers.Dense",
        kind=InstanceKind.MODULE,
        args=(3,),
        inputs=(np.linspace(-2, 2, 8, dtype=np.float32).reshape(2, 4),),
        source=Source(suite="opera-tests", test="dense"),
    )


def rejected(k: int) -> OperatorInstance:
    """Marked invalid by the validity gate."""
    return relu(np.full((1, 2), float(k)), test="rejected").with_verdict(False, "library rejected it")


def opaque() -> OperatorInstance:
    return OperatorInstance(
        library="onnx",
        api="onnx::Relu",
        kind=InstanceKind.ONNX_NODE,
        inputs=(Opaque("torch.Generator", "cannot be rebuilt"),),
        extra=dict(ONNX_EXTRA),
        source=Source(suite="opera-tests", test="opaque"),
    )


def write(path: Path, instances: list[OperatorInstance]) -> Path:
    with CorpusWriter(path) as writer:
        for inst in instances:
            writer.write(inst)
    return path


def results_so_far(store: Path) -> int:
    """Results a (possibly running, possibly killed) run has committed, read without locking it."""
    import sqlite3

    try:
        db = sqlite3.connect(f"file:{store}?mode=ro", uri=True, timeout=5)
        try:
            return int(db.execute("SELECT COUNT(*) FROM results").fetchone()[0])
        finally:
            db.close()
    except sqlite3.OperationalError:
        return 0


def verdict_in_process(state: Any, inst: OperatorInstance, target: str) -> Any:
    """One test through a real target with the worker's own per-test function, in this process
    (``state`` is a module-scoped ``WorkerState``); skipped where the target is not usable here."""
    import pytest

    from opera.run.execution import execute_task
    from opera.run.executors import TestTask

    reason = state.target(target).availability()
    if reason is not None:
        pytest.skip(f"{target} is not available here: {reason}")
    outcome = execute_task(TestTask(0, inst, target), state, lambda stage: None)
    assert outcome.result is not None
    return outcome.result
