"""Prioritization that learns across runs (issue 15): ``OperatorHistory`` from a real results store
scores each operator by its bug rate on the target, and the ``opera`` strategy puts the operators
that failed before ahead of those that passed or were gaps; an operator never seen scores 1/2."""

from __future__ import annotations

import numpy as np
import pytest
from _run_fixtures import add, fault, write

from opera.cli import main
from opera.corpus import CorpusReader
from opera.errors import OperaError
from opera.model import InstanceKind, OperatorInstance, Source
from opera.prioritize import prioritize_files, read_order
from opera.prioritize.history import OperatorHistory


def _sigmoid(k: int) -> OperatorInstance:
    return OperatorInstance(
        library="onnx",
        api="onnx::Sigmoid",
        kind=InstanceKind.ONNX_NODE,
        inputs=(np.full((2, 2), float(k), np.float32),),
        extra={"opset": 17, "domain": "", "n_outputs": 1},
        source=Source(suite="opera-tests", test="sigmoid"),
    )


@pytest.fixture(scope="module")
def history_store(tmp_path_factory):
    """Night 1 on test-faults: every Relu of the corpus crashes (injected faults), every Add passes."""
    tmp = tmp_path_factory.mktemp("history")
    corpus = write(tmp / "night1.jsonl", [fault("raise", k) for k in range(4)] + [add((2, 3), (2, 3), k) for k in range(4)])
    store = tmp / "s.db"
    assert main(["run", str(corpus), "-t", "test-faults", "--store", str(store), "-q", "--no-verify"]) == 0
    return store


def test_operator_scores_are_laplace_estimates_of_the_bug_rate(history_store) -> None:
    history = OperatorHistory.from_store(history_store, "test-faults")
    assert history.tests["onnx::Relu"] == 4 and history.bugs["onnx::Relu"] == 4
    assert history.tests["onnx::Add"] == 4 and history.bugs["onnx::Add"] == 0
    assert history.score("onnx::Relu") == pytest.approx(5 / 6)
    assert history.score("onnx::Add") == pytest.approx(1 / 6)
    assert history.score("onnx::Sigmoid") == pytest.approx(1 / 2)  # never ran: explored first
    assert history.score("onnx::Relu@com.example") == history.score("onnx::Relu")


def test_the_order_follows_what_earlier_runs_found(history_store, tmp_path) -> None:
    # night 2: new instances of the same operators and one the store never saw
    tonight = write(
        tmp_path / "night2.jsonl",
        [add((3, 2), (3, 2), 10 + k) for k in range(3)] + [fault("raise", 10 + k) for k in range(3)] + [_sigmoid(1)],
    )
    ordering, header = prioritize_files([tonight], target="test-faults", strategy="opera", history=history_store)
    apis = {i.id: i.api for i in CorpusReader([tonight])}
    first_of = {api: min(k for k, iid in enumerate(ordering.ids) if apis[iid] == api) for api in set(apis.values())}
    # Relu failed 4 of 4 (5/6), Sigmoid never ran (1/2), Add passed 4 of 4 (1/6)
    assert first_of["onnx::Relu"] < first_of["onnx::Sigmoid"] < first_of["onnx::Add"]
    assert header["history"] == str(history_store) and ordering.notes["operators_in_history"] == 2
    # without a history every operator has the same score: the Add (first in the corpus) leads
    plain, _ = prioritize_files([tonight], target="test-faults", strategy="opera")
    assert apis[plain.ids[0]] == "onnx::Add"


def test_bad_history_is_one_clear_line(history_store, tmp_path, capsys) -> None:
    with pytest.raises(OperaError, match="history store not found"):
        OperatorHistory.from_store(tmp_path / "missing.db", "test-faults")
    with pytest.raises(OperaError, match="has no test on target test-wrong: nothing to learn from"):
        OperatorHistory.from_store(history_store, "test-wrong")
    corpus = write(tmp_path / "c.jsonl", [add((2, 2), (2, 2), 1)])
    code = main(["prioritize", str(corpus), "--target", "test-wrong", "--history", str(history_store), "-o", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1 and "nothing to learn from" in err


def test_the_cli_writes_the_history_into_the_order_header(history_store, tmp_path) -> None:
    corpus = write(tmp_path / "c.jsonl", [add((2, 2), (2, 2), 1), fault("raise", 20)])
    order = tmp_path / "o.order"
    assert main(["prioritize", str(corpus), "--target", "test-faults", "--history", str(history_store), "-o", str(order)]) == 0
    ids, header = read_order(order)
    assert header["history"] == str(history_store) and len(ids) == 2


def test_within_an_operator_the_partitions_that_failed_come_first(tmp_path) -> None:
    """Night 1: Relu on a [1, 3] input crashed (injected faults), Relu on [2, 3] passed. Night 2's
    Relus are ordered by the partitions' bug rates: a [1, 3] one first, where the order without a
    history starts with a [2, 3] one."""
    from _run_fixtures import relus

    night1 = write(tmp_path / "n1.jsonl", [fault("raise", k) for k in range(3)] + relus(6))
    store = tmp_path / "s.db"
    assert main(["run", str(night1), "-t", "test-faults", "--store", str(store), "-q", "--no-verify"]) == 0
    history = OperatorHistory.from_store(store, "test-faults")
    wide, narrow = relus(1, start=50)[0], fault("raise", 50)
    assert history.weight(narrow) > 1.0 > history.weight(wide)
    # the [2, 3] Relus are the rarer setting tonight: without a history they lead (rarity ties)
    tonight = write(tmp_path / "n2.jsonl", relus(2, start=40) + [fault("raise", 40 + k) for k in range(4)])
    ordering, _ = prioritize_files([tonight], target="test-faults", strategy="opera", history=store)
    shapes = {i.id: i.inputs[0].shape for i in CorpusReader([tonight])}
    assert shapes[ordering.ids[0]] == (1, 3)
    plain, _ = prioritize_files([tonight], target="test-faults", strategy="opera")
    assert shapes[plain.ids[0]] == (2, 3)


def test_histories_of_several_stores_merge(history_store, tmp_path) -> None:
    """Two nights kept in two stores count as one history: night 2 (another store) saw Add fail."""
    corpus = write(tmp_path / "other.jsonl", [fault("raise", 30 + k) for k in range(2)] + [add((2, 2), (2, 2), 40)])
    other = tmp_path / "other.db"
    assert main(["run", str(corpus), "-t", "test-faults", "--store", str(other), "-q", "--no-verify"]) == 0
    merged = OperatorHistory.from_stores([history_store, other], "test-faults")
    assert merged.tests["onnx::Relu"] == 6 and merged.bugs["onnx::Relu"] == 6
    assert merged.tests["onnx::Add"] == 5 and merged.bugs["onnx::Add"] == 0
    assert merged.score("onnx::Relu") == pytest.approx(7 / 8)
    assert str(history_store) in merged.source and str(other) in merged.source
    # the evaluated run of a store never counts, the other store still does
    alone = OperatorHistory.from_stores([history_store, other], "test-faults", evaluated=(other, 1))
    assert alone.tests["onnx::Relu"] == 4
    # the CLI takes --history twice and names both stores in the order header
    order = tmp_path / "o.order"
    args = ["prioritize", str(corpus), "--target", "test-faults", "--history", str(history_store), "--history", str(other)]
    assert main([*args, "-o", str(order)]) == 0
    assert read_order(order)[1]["history"] == f"{history_store}, {other}"
    with pytest.raises(OperaError, match="cannot merge the history of test-other"):
        merged.merged(OperatorHistory("test-other"))


def test_weights_from_interned_partitions_equal_the_histories_own(tmp_path) -> None:
    """The strategy weighs a corpus from its interned partitions; the result is
    ``OperatorHistory.weight`` instance by instance."""
    from opera.prioritize._greedy import compile_corpus, history_weights

    history = OperatorHistory("t")
    instances = [_sigmoid(k) for k in range(3)] + [add((2, 3), (2, 3), 1), add((1,), (4,), 2), fault("raise", 3)]
    from opera.prioritize.partitions import instance_singles, operator_key

    for inst in instances[:2] + instances[3:4]:  # earlier runs: two Sigmoids failed, the Add passed
        op = operator_key(inst)
        history.tests[inst.api] += 1
        history.bugs[inst.api] += inst.api == "onnx::Sigmoid"
        for single in set(instance_singles(inst)):
            history.element_tests[(op, single)] += 1
            history.element_bugs[(op, single)] += inst.api == "onnx::Sigmoid"
    corpus = compile_corpus(instances)
    fast = history_weights(corpus, history)
    assert fast == pytest.approx([history.weight(i) for i in instances])
    assert max(fast) > 1.0  # a partition that failed weighs more than its operator's average
