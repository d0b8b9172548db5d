"""Selecting part of a corpus (--api, --test, --id, --sample) the same way in `opera run`,
`opera prioritize` and `opera nightly`, on real ONNX instances through the real runner."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import numpy as np
import pytest
from _run_fixtures import ONNX_EXTRA, relus, write

from opera.cli import main
from opera.errors import OperaError
from opera.model import InstanceKind, OperatorInstance, Source
from opera.prioritize import read_order
from opera.selection import Selection


def _op(api: str, test: str, k: int) -> OperatorInstance:
    return OperatorInstance(
        library="onnx",
        api=api,
        kind=InstanceKind.ONNX_NODE,
        inputs=(np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3) + k,),
        extra=dict(ONNX_EXTRA),
        source=Source(suite="opera-tests", test=f"test_file.py::{test}"),
    )


CORPUS = [
    _op("onnx::Relu", "test_relu", 0),
    _op("onnx::Relu", "test_relu", 1),
    _op("onnx::Abs", "test_abs", 2),
    _op("onnx::Neg", "test_relu", 3),
    _op("onnx::Sigmoid", "test_sigmoid", 4),
    _op("onnx::Tanh", "test_tanh", 5),
]


def _apis(kept: list[OperatorInstance]) -> list[str]:
    return [inst.api for inst in kept]


def test_filters_combine_with_and_across_kinds_and_or_within_one() -> None:
    assert _apis(Selection(apis=("Relu", "onnx::Abs")).apply(CORPUS)) == ["onnx::Relu", "onnx::Relu", "onnx::Abs"]
    assert _apis(Selection(apis=("*e*",)).apply(CORPUS)) == ["onnx::Relu", "onnx::Relu", "onnx::Neg"]
    assert _apis(Selection(tests=("*::test_relu",)).apply(CORPUS)) == ["onnx::Relu", "onnx::Relu", "onnx::Neg"]
    assert _apis(Selection(apis=("Neg", "Abs"), tests=("*relu*",)).apply(CORPUS)) == ["onnx::Neg"]
    ids = (CORPUS[4].id, CORPUS[0].id)
    assert [i.id for i in Selection(ids=ids).apply(CORPUS)] == [CORPUS[0].id, CORPUS[4].id]  # corpus order


def test_a_sample_is_seeded_keeps_corpus_order_and_is_drawn_after_the_filters() -> None:
    order = [i.id for i in CORPUS]
    one = [i.id for i in Selection(sample=3, sample_seed=7).apply(CORPUS)]
    assert len(one) == 3 and one == [i.id for i in Selection(sample=3, sample_seed=7).apply(CORPUS)]
    assert [order.index(i) for i in one] == sorted(order.index(i) for i in one)
    draws = {tuple(i.id for i in Selection(sample=3, sample_seed=s).apply(CORPUS)) for s in range(8)}
    assert len(draws) > 1  # the seed matters
    assert _apis(Selection(apis=("Relu",), sample=5).apply(CORPUS)) == ["onnx::Relu", "onnx::Relu"]
    assert Selection.from_json(json.loads(json.dumps(Selection(apis=("A",), sample=2).to_json()))) == Selection(
        apis=("A",), sample=2
    )


def test_an_unknown_id_or_a_selection_that_keeps_nothing_is_an_error() -> None:
    with pytest.raises(OperaError, match="1 id.s. not in the corpus.*nope"):
        Selection(ids=(CORPUS[0].id, "nope")).apply(CORPUS)
    with pytest.raises(OperaError, match="keeps none of the 6"):
        Selection(apis=("Conv*",)).apply(CORPUS)
    assert not Selection() and Selection(sample=1)


def test_run_plans_only_the_selection_stores_it_and_resume_refuses_new_filters(tmp_path: Path, capsys) -> None:
    corpus, store = tmp_path / "c.jsonl", tmp_path / "s.db"
    write(corpus, CORPUS)
    ids_file = tmp_path / "ids.txt"
    ids_file.write_text(f"# two of them\n{CORPUS[2].id}\n{CORPUS[5].id}  # tanh\n")
    args = ["run", str(corpus), "-t", "test-faults", "--store", str(store), "--workers", "1", "-q", "--no-verify"]
    assert main([*args, "--id", f"@{ids_file}", "--id", CORPUS[0].id]) == 0
    with sqlite3.connect(store) as db:
        planned = {row[0] for row in db.execute("SELECT instance_id FROM planned")}
        config = json.loads(db.execute("SELECT config FROM runs").fetchone()[0])
    assert planned == {CORPUS[0].id, CORPUS[2].id, CORPUS[5].id}
    assert sorted(config["selection"]["ids"]) == sorted(planned)
    assert "3 of 6 corpus instance(s) selected" in capsys.readouterr().err
    assert main(["run", "--store", str(store), "--resume", "1", "--api", "Relu"]) == 2
    assert "--api/--test/--id/--sample" in capsys.readouterr().err


def test_prioritize_orders_only_the_selection_and_run_accepts_its_order(tmp_path: Path) -> None:
    corpus, order = tmp_path / "c.jsonl", tmp_path / "o.order"
    write(corpus, CORPUS)
    assert main(["prioritize", str(corpus), "--target", "test-faults", "--strategy", "random", "--test", "*relu*", "-o", str(order)]) == 0
    ids, header = read_order(order)
    assert sorted(ids) == sorted(i.id for i in CORPUS if i.source.test.endswith("test_relu"))
    assert header["selection"] == "--test *relu*"


def test_nightly_runs_exactly_the_sample(tmp_path: Path, capsys) -> None:
    corpus, store = tmp_path / "c.jsonl", tmp_path / "s.db"
    write(corpus, relus(10))
    code = main(
        ["nightly", str(corpus), "-t", "test-faults", "--store", str(store), "--budget", "10m", "--workers", "1",
         "-q", "-o", str(tmp_path / "n"), "--sample", "4", "--no-verify"]
    )
    assert code == 0, capsys.readouterr().err
    with sqlite3.connect(store) as db:
        assert db.execute("SELECT COUNT(*) FROM planned").fetchone()[0] == 4
        assert db.execute("SELECT COUNT(*) FROM results").fetchone()[0] == 4
    assert len(read_order(tmp_path / "n" / "orders" / "test-faults.order")[0]) == 4
