"""Prioritization: partitions, the greedy diversity order, baselines, order files, the CLI verb."""

from __future__ import annotations

import json
import random
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from opera.cli import main
from opera.corpus import write_corpus
from opera.errors import OperaError
from opera.model import InstanceKind, OperatorInstance, Source
from opera.prioritize import PrioritizeContext, prioritize, read_order, strategy_names, write_order
from opera.prioritize._greedy import compile_corpus, operator_scores
from opera.prioritize.coverage_data import CoverageDataMissing
from opera.prioritize.partitions import (
    float_partition,
    instance_elements,
    int_partition,
    named_parameters,
    operator_key,
    partition,
)
from opera.prioritize.strategies.add_cov import additional_order
from opera.values import DType, TensorSpec


def onnx(op: str, *, inputs: tuple = (), domain: str = "", **attrs: Any) -> OperatorInstance:
    return OperatorInstance(
        library="onnx",
        api=f"onnx::{op}",
        kind=InstanceKind.ONNX_NODE,
        kwargs=dict(attrs),
        inputs=inputs,
        extra={"domain": domain},
        source=Source("test"),
    )


def fn(api: str, *args: object, **kwargs: object) -> OperatorInstance:
    return OperatorInstance(
        library="torch",
        api=api,
        kind=InstanceKind.FUNCTION,
        args=args,
        kwargs=dict(kwargs),
        source=Source("test"),
    )


# ---- partitions -------------------------------------------------------------------------------


def test_integer_partitions() -> None:
    classes = [int_partition(x) for x in (-5, -1, 0, 1, 2)]
    assert len(set(classes)) == 5
    assert int_partition(-5) == int_partition(-2) == int_partition(-(10**12))
    assert int_partition(2) == int_partition(3) == int_partition(10**12)
    assert len({partition(x) for x in (-5, -1, 0, 1, 2)}) == 5
    assert partition(7) == partition(2) and partition(-7) == partition(-2)


def test_float_and_finite_partitions() -> None:
    assert {float_partition(x) for x in (-0.5, 0.0, 3.0)} == {"<0", "0", ">0"}
    assert partition(-1e-9) == partition(-100.0) != partition(0.0)
    assert partition(float("nan")) != partition(1.0)
    assert partition(True) != partition(False) != partition(0)  # bool is a finite set, not an int
    assert partition("same") != partition("valid")
    assert partition(DType("float16")) != partition(DType("float32"))
    assert partition(None) != partition(0)


def test_tensor_partitions_rank_dims_and_dtype() -> None:
    rank6 = TensorSpec("float32", (2, 2, 2, 2, 2, 2))
    rank7 = TensorSpec("float32", (2, 2, 2, 2, 2, 2, 2))
    rank5 = TensorSpec("float32", (2, 2, 2, 2, 2))
    p5, p6, p7 = (partition(t) for t in (rank5, rank6, rank7))
    assert isinstance(p5, tuple) and isinstance(p6, tuple) and isinstance(p7, tuple)
    assert p6[2] == p7[2] == 6  # the ">=6" rank class
    assert p5[2] == 5
    assert partition(rank5) != partition(rank6)
    # dtype matters
    assert partition(TensorSpec("float32", (3, 4))) != partition(TensorSpec("float16", (3, 4)))
    # each dimension by the integer partition: 3 and 4 alike, 1 and 0 not
    assert partition(TensorSpec("float32", (3, 4))) == partition(TensorSpec("float32", (7, 9)))
    assert partition(TensorSpec("float32", (1, 4))) != partition(TensorSpec("float32", (3, 4)))
    assert partition(TensorSpec("float32", (0, 4))) != partition(TensorSpec("float32", (1, 4)))
    # exact numpy arrays and TensorSpec fall in the same classes
    assert partition(np.zeros((3, 4), np.float32)) == partition(TensorSpec("float32", (5, 6)))
    assert partition(np.zeros((), np.int64)) == partition(TensorSpec("int64", ()))
    assert partition(np.zeros((), np.int64)) != partition(np.zeros((1,), np.int64))
    assert partition(TensorSpec("float32", (None, 4))) != partition(TensorSpec("float32", (2, 4)))


def test_parameter_names_and_pairs() -> None:
    f = fn("torch.nn.functional.pad", TensorSpec("float32", (2, 3)), [1, 1], mode="reflect")
    assert [n for n, _ in named_parameters(f)] == ["arg0", "arg1", "kw:mode"]
    node = onnx("Pad", inputs=(TensorSpec("float32", (2, 3)), None), mode="reflect")
    assert [n for n, _ in named_parameters(node)] == ["kw:mode", "in0", "in1"]
    singles, pairs = instance_elements(f)
    assert len(singles) == 3 and len(pairs) == 3
    # same partitions under different parameter names are different elements
    assert instance_elements(fn("f", 1))[0] != instance_elements(fn("f", x=1))[0]
    # a parameterless instance still has one element
    assert len(instance_elements(fn("torch.nn.functional.relu"))[0]) == 1


def test_operator_key_separates_onnx_domains() -> None:
    assert operator_key(onnx("Attention")) == "onnx::Attention"
    assert operator_key(onnx("Attention", domain="com.microsoft")) == "onnx::Attention@com.microsoft"


# ---- greedy diversity order -------------------------------------------------------------------


def ids(*instances: OperatorInstance) -> list[str]:
    return [i.id for i in instances]


def test_new_partition_before_repeated_one() -> None:
    a, b, c = onnx("LeakyRelu", alpha=5), onnx("LeakyRelu", alpha=7), onnx("LeakyRelu", alpha=-1)
    # b repeats a's partition [2, inf); c is new, so it goes before b although it comes later.
    # a and c tie on diversity (1.0): the rarer setting goes first (c's partition is unique, a's is
    # shared with b), so c leads.
    assert prioritize([a, b, c], "opera").ids == ids(c, a, b)
    assert prioritize([a, b, c], "param-only").ids == ids(c, a, b)
    # equal rarity: corpus order
    d = onnx("LeakyRelu", alpha=0)
    assert prioritize([a, c, d], "opera").ids == ids(a, c, d)
    # without diversity only the rarity tie-break orders the operator's tests
    assert prioritize([a, b, c], "op-only").ids == ids(c, a, b)


def test_pairs_count_toward_diversity() -> None:
    # d's single partitions are each already covered by a or b, but its pair (k=1, m=str 'x') is new
    a = onnx("Op", k=1, m="y")
    b = onnx("Op", k=5, m="x")
    dup = onnx("Op", k=7, m="x")
    d = onnx("Op", k=1, m="x")
    order = prioritize([a, b, dup, d], "opera").ids
    assert order.index(d.id) < order.index(dup.id)


def test_operator_score_zero_case_and_ratio() -> None:
    dll, dlc = Counter({"A": 4, "B": 4, "C": 1, "D": 6}), Counter({"B": 2, "D": 3})
    # untested operators (Num_DLC = 0) share one score above every finite ratio
    scores = operator_scores(dll, dlc)
    assert scores["B"] == scores["D"] == 2.0
    assert scores["A"] == scores["C"] > 1e6 * 2.0
    untested_only = operator_scores(dll, Counter())
    assert len(set(untested_only.values())) == 1
    # smoothed: Num_DLL / (Num_DLC + 1), finite for all
    assert operator_scores(dll, dlc, "smoothed") == {"A": 4.0, "B": 4 / 3, "C": 1.0, "D": 1.5}
    with pytest.raises(ValueError, match="zero case"):
        operator_scores(dll, dlc, "nope")
    a1, a2 = onnx("A", k=1), onnx("A", k=-1)
    b1, b2, b3 = onnx("B", k=1), onnx("B", k=-1), onnx("B", k=0)
    equipped = [onnx("B", k=0), onnx("B", k=0), onnx("B", k=0), onnx("B", k=0)]
    for zero_case in ("untested-first", "smoothed"):
        ctx = PrioritizeContext(equipped=equipped, precover_equipped=False, zero_case=zero_case)
        order = prioritize([b1, b2, b3, a1, a2], "opera", ctx).ids
        # untested A (1 + 3/4, or smoothed 2/1) beats B (3/4, or smoothed 3/5)
        assert order[:2] == ids(a1, a2)


def test_untested_operators_round_robin_by_diversity() -> None:
    # C is frequent, D rare, neither tested by the compiler: untested-first lets D's fresh instance
    # in before C's second one; smoothed puts C's frequency first
    c1, c2, c3 = onnx("C", k=1), onnx("C", k=-1), onnx("C", k=0)
    d1 = onnx("D", k=1)
    corpus = [c1, c2, c3, d1]
    assert prioritize(corpus, "opera").ids[:2] == ids(c1, d1)
    smoothed = prioritize(corpus, "opera", PrioritizeContext(zero_case="smoothed")).ids
    assert smoothed[:2] == ids(c1, c2)


def test_equipped_partitions_precovered_or_not() -> None:
    a, c = onnx("LeakyRelu", alpha=5), onnx("LeakyRelu", alpha=-1)
    equipped = [onnx("LeakyRelu", alpha=3)]
    pre = prioritize([a, c], "opera", PrioritizeContext(equipped=equipped, precover_equipped=True))
    assert pre.ids == ids(c, a)
    assert pre.notes["precovered_elements"] == 1
    not_pre = prioritize([a, c], "opera", PrioritizeContext(equipped=equipped, precover_equipped=False))
    assert not_pre.ids == ids(a, c)


def _random_corpus(seed: int, n: int = 160) -> list[OperatorInstance]:
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        op = rng.choice("ABCDE")
        attrs: dict[str, Any] = {"k": rng.choice([-3, -1, 0, 1, 2, 9]), "m": rng.choice(["x", "y"])}
        if rng.random() < 0.5:
            attrs["f"] = rng.choice([-0.5, 0.0, 2.5])
        shape = tuple(rng.choice([1, 2, 3]) for _ in range(rng.randint(0, 4)))
        out.append(onnx(op, inputs=(TensorSpec(rng.choice(["float32", "int64"]), shape),), **attrs))
    return out


def _naive_opera(instances: list[OperatorInstance], equipped: list[OperatorInstance]) -> list[str]:
    """The greedy rule re-scored from scratch at every step (the spec the heap must match)."""
    corpus = compile_corpus(instances)
    ops = list(corpus.interner.ops)
    counts = Counter(corpus.op_of)
    scores = operator_scores(
        Counter({api: counts[i] for i, api in enumerate(ops)}), Counter(operator_key(i) for i in equipped)
    )
    covered: set[int] = set()
    for inst in equipped:
        op = corpus.interner.ops.get(operator_key(inst))
        if op is not None:
            covered |= set(corpus.interner.elements(op, inst))
    freq: Counter[tuple[int, int]] = Counter()  # (operator, element) -> instances holding it
    for i, el in enumerate(corpus.elements):
        for e in el:
            freq[(corpus.op_of[i], e)] += 1

    def rarity(i: int) -> float:
        el = corpus.elements[i]
        return sum(1.0 / freq[(corpus.op_of[i], e)] for e in el) / len(el)

    picks = Counter[int]()
    remaining = list(range(len(corpus.ids)))
    order = []
    while remaining:

        def key(i: int, covered: set[int] = covered) -> tuple:
            el = corpus.elements[i]
            div = sum(1 for e in el if e not in covered) / len(el)
            op = corpus.op_of[i]
            return (-(scores[ops[op]] * div), picks[op], -scores[ops[op]], op, -div, -rarity(i), i)

        best = min(remaining, key=key)
        remaining.remove(best)
        order.append(corpus.ids[best])
        covered |= set(corpus.elements[best])
        picks[corpus.op_of[best]] += 1
    return order


def test_equal_settings_share_one_elements_tuple() -> None:
    """The greedy order groups an operator's instances by the identity of their elements tuple:
    equal settings must get the same object, different ones different objects."""
    a = onnx("Gather", inputs=(TensorSpec("float32", (3, 4)),), axis=2)
    b = onnx("Gather", inputs=(TensorSpec("float32", (5, 9)),), axis=7)  # same partitions as a
    c = onnx("Gather", inputs=(TensorSpec("float32", (5, 9)),), axis=0)
    d = onnx("Relu", inputs=(TensorSpec("float32", (5, 9)),))
    corpus = compile_corpus([a, b, c, d])
    ea, eb, ec, ed = corpus.elements
    assert ea is eb
    assert ea != ec and ea is not ec
    assert corpus.op_of[3] != corpus.op_of[0] and not set(ed) & set(ea)  # elements are per operator


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_lazy_heap_matches_naive_greedy(seed: int) -> None:
    corpus = _random_corpus(seed)
    equipped = _random_corpus(seed + 100, 20)
    got = prioritize(corpus, "opera", PrioritizeContext(equipped=equipped)).ids
    assert got == _naive_opera(corpus, equipped)


def test_chunked_group_sums_match_naive_greedy(monkeypatch: pytest.MonkeyPatch) -> None:
    """Rarity and starting diversities are summed a chunk of groups at a time (memory at 1M
    instances); chunks of 5 groups give the naive rule's order too."""
    from opera.prioritize import _greedy

    monkeypatch.setattr(_greedy, "_CHUNK_GROUPS", 5)
    corpus = _random_corpus(4)
    equipped = _random_corpus(104, 20)
    assert prioritize(corpus, "opera", PrioritizeContext(equipped=equipped)).ids == _naive_opera(corpus, equipped)


def test_determinism_and_seeds() -> None:
    corpus = _random_corpus(7)
    unique = list(dict.fromkeys(i.id for i in corpus))
    for name in ("opera", "op-only", "param-only"):
        first = prioritize(corpus, name).ids
        assert first == prioritize(corpus, name).ids
        assert sorted(first) == sorted(unique)
    r1 = prioritize(corpus, "random", PrioritizeContext(seed=1)).ids
    assert r1 == prioritize(corpus, "random", PrioritizeContext(seed=1)).ids
    assert r1 != prioritize(corpus, "random", PrioritizeContext(seed=2)).ids
    assert sorted(r1) == sorted(unique)


def test_duplicates_are_ordered_once() -> None:
    a = onnx("Relu")
    assert prioritize([a, a, onnx("Relu", alpha=1)], "opera").ids == ids(a, onnx("Relu", alpha=1))


def test_fast_returns_a_seeded_permutation() -> None:
    corpus = _random_corpus(11)
    unique = list(dict.fromkeys(i.id for i in corpus))
    ctx = PrioritizeContext(seed=3)
    order = prioritize(corpus, "fast", ctx).ids
    assert sorted(order) == sorted(unique) and len(order) == len(unique)
    assert order == prioritize(corpus, "fast", PrioritizeContext(seed=3)).ids
    assert ctx.notes["fast_passes"] >= 2  # the corpus has near-duplicates, so some wait for a later pass


def test_fast_puts_dissimilar_tests_first() -> None:
    # 30 copies differing in one digit of a 30-parameter text vs. 3 unrelated operators
    similar = [
        fn("torch.nn.functional.conv2d", TensorSpec("float32", (1, 3, 8, 8)), *range(30), seed=s)
        for s in range(30)
    ]
    other = [
        fn("torch.nn.functional.relu", TensorSpec("int64", (9,))),
        fn("torch.erf", "a string"),
        fn("torch.nn.functional.gelu", approximate="tanh"),
    ]
    order = prioritize(similar + other, "fast", PrioritizeContext(seed=0)).ids
    first_pass = order[: len(order) - 25]
    assert {o.id for o in other} <= set(first_pass)


# ---- coverage baselines -----------------------------------------------------------------------


def _coverage_file(tmp_path: Path, tests: dict[str, list[str]]) -> Path:
    path = tmp_path / "cov.json"
    path.write_text(json.dumps({"format": "opera-coverage", "version": 1, "tests": tests}))
    return path


def test_total_and_additional_coverage(tmp_path: Path) -> None:
    t = [onnx("Op", k=k) for k in range(5)]
    cov = {
        t[0].id: ["a.py:1", "a.py:2", "a.py:3"],
        t[1].id: ["a.py:1", "a.py:2", "a.py:3", "a.py:4"],
        t[2].id: ["b.py:5"],
        t[3].id: [],
        t[4].id: ["a.py:1"],
    }
    ctx = PrioritizeContext(coverage=_coverage_file(tmp_path, cov))
    assert prioritize(t, "total-cov", ctx).ids == ids(t[1], t[0], t[2], t[4], t[3])
    # additional: t1 (4 new), t2 (1 new), nothing new left -> reset; t0 (3), reset; t4; empty t3 last
    res = prioritize(t, "add-cov", ctx)
    assert res.ids == ids(t[1], t[2], t[0], t[4], t[3])
    assert res.notes["resets"] == 2


def test_coverage_strategies_are_charged_their_coverage_pass(tmp_path: Path) -> None:
    """No coverage order exists before the coverage pass ran: its time counts as the strategy's."""
    t = [onnx("Op", k=k) for k in range(3)]
    path = tmp_path / "cov.json"
    path.write_text(json.dumps({"format": "opera-coverage", "version": 1, "tests": {t[0].id: ["a.py:1"]}, "seconds": 548.5}))
    for name in ("total-cov", "add-cov"):
        ordering = prioritize(t, name, PrioritizeContext(coverage=path))
        assert 548.5 <= ordering.seconds < 560 and ordering.notes["charged_seconds"] == 548.5
    assert prioritize(t, "opera", PrioritizeContext()).seconds < 10  # the others pay nothing extra


def test_additional_order_plain() -> None:
    order, resets = additional_order(["x", "y", "z"], {"x": ["1"], "y": ["1", "2"], "z": ["3"]})
    assert order == ["y", "z", "x"] and resets == 1


def test_coverage_strategies_need_data(tmp_path: Path) -> None:
    for name in ("total-cov", "add-cov"):
        with pytest.raises(
            CoverageDataMissing,
            match=f"strategy {name} needs coverage data: run `python -m opera.prioritize.coverage_data",
        ):
            prioritize([onnx("Relu")], name, PrioritizeContext(coverage=None))
        with pytest.raises(CoverageDataMissing, match="not found"):
            prioritize([onnx("Relu")], name, PrioritizeContext(coverage=tmp_path / "absent.json"))


# ---- order files and the CLI verb -------------------------------------------------------------


def test_order_file_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "o.order"
    assert (
        write_order(path, ["aa", "bb"], {"strategy": "opera", "corpus": ["x.jsonl", "y.jsonl"], "seed": 3})
        == 2
    )
    got, header = read_order(path)
    assert got == ["aa", "bb"]
    assert header == {"strategy": "opera", "corpus": "x.jsonl y.jsonl", "seed": "3"}
    path.write_text("aa\naa\n")
    with pytest.raises(OperaError, match="duplicate"):
        read_order(path)


def test_registry_lists_every_strategy() -> None:
    assert {"opera", "op-only", "param-only", "random", "fast", "total-cov", "add-cov"} <= set(
        strategy_names()
    )


def test_cli_prioritize(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    corpus = tmp_path / "c.jsonl.gz"
    insts = _random_corpus(5, 40)
    write_corpus(corpus, insts)
    equipped = tmp_path / "eq_equipped_onnx_tc.txt"
    equipped.write_text(
        "make_graph(op_type='A', kwargs={'k': 1}, input_name=('x',), input_shape=([2],), input_dtype=('FLOAT',))\n"
    )
    out = tmp_path / "o.order"
    rc = main(
        ["prioritize", str(corpus), "--target", "tvm-onnx", "--equipped", str(equipped), "-o", str(out)]
    )
    assert rc == 0
    order, header = read_order(out)
    assert sorted(order) == sorted({i.id for i in insts})
    assert (
        header["strategy"] == "opera" and header["target"] == "tvm-onnx" and header["corpus"] == str(corpus)
    )

    def fails(argv: list[str], message: str) -> None:
        capsys.readouterr()
        assert main(argv) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and message in err, err

    # an Opera corpus harvested from the compiler's own tests works as the equipped corpus too
    own = tmp_path / "tvm_own_tests.jsonl.gz"
    write_corpus(own, [onnx("A", k=1), onnx("B")])
    assert (
        main(["prioritize", str(corpus), "--target", "tvm-onnx", "--equipped", str(own), "-o", str(out)]) == 0
    )
    assert sorted(read_order(out)[0]) == sorted(order)

    fails(
        ["prioritize", str(corpus), "--target", "tvm-onnx", "--strategy", "nope", "-o", str(out)],
        "unknown strategy 'nope'",
    )
    fails(
        ["prioritize", str(tmp_path / "missing.jsonl"), "--target", "tvm-onnx", "-o", str(out)], "not found"
    )
    fails(
        ["prioritize", str(corpus), "--target", "tvm-torch", "-o", str(out)],
        "target tvm-torch consumes torch instances",
    )
    fails(
        ["prioritize", str(corpus), "--target", "tvm-onnx", "--strategy", "add-cov", "-o", str(out)],
        "needs coverage data",
    )
    fails(
        [
            "prioritize",
            str(corpus),
            "--target",
            "tvm-onnx",
            "--equipped",
            str(tmp_path / "no.txt"),
            "-o",
            str(out),
        ],
        "equipped corpus not found",
    )


# ---- coverage measurement on TVM (slow; needs apache-tvm) -------------------------------------


@pytest.mark.slow
def test_measure_tvm_onnx_coverage(tmp_path: Path) -> None:
    pytest.importorskip("tvm.relax.frontend.onnx")
    from opera.prioritize.coverage_data import load_coverage
    from opera.prioritize.coverage_data import main as coverage_main

    relu = onnx("Relu", inputs=(TensorSpec("float32", (2, 3)),))
    conv = onnx("Conv", inputs=(TensorSpec("float32", (1, 1, 4, 4)), TensorSpec("float32", (1, 1, 2, 2))))
    corpus = tmp_path / "c.jsonl"
    write_corpus(corpus, [relu, conv])
    out = tmp_path / "cov.json"
    assert coverage_main([str(corpus), "--target", "tvm-onnx", "-o", str(out)]) == 0
    cov = load_coverage(out)
    assert set(cov) == {relu.id, conv.id}
    assert all(line.rsplit(":", 1)[1].isdigit() for line in cov[relu.id])
    assert cov[relu.id] and cov[conv.id]
    # both go through the common importer code; each also runs its own converter
    assert set(cov[relu.id]) & set(cov[conv.id])
    assert set(cov[conv.id]) - set(cov[relu.id]) and set(cov[relu.id]) - set(cov[conv.id])
    order = prioritize([relu, conv], "total-cov", PrioritizeContext(coverage=out)).ids
    assert order[0] == max((relu, conv), key=lambda i: len(cov[i.id])).id


@pytest.mark.slow
def test_coverage_of_any_target_only_the_runs_instances(tmp_path: Path) -> None:
    """tvm-keras: the target's declared frontend path is measured, and --store/--run keeps exactly
    the instances that run planned for the target."""
    pytest.importorskip("tvm.relax.frontend.tflite")
    pytest.importorskip("keras")
    from _run_fixtures import keras_dense, relus

    from opera.prioritize.coverage_data import load_coverage
    from opera.prioritize.coverage_data import main as coverage_main
    from opera.run.runner import RunConfig, start_run

    dense, planned_elsewhere = keras_dense(), relus(1)[0]
    corpus = tmp_path / "c.jsonl"
    write_corpus(corpus, [dense, planned_elsewhere])
    store = tmp_path / "s.db"
    start_run(
        RunConfig(corpus=[str(corpus)], targets=["test-wrong"], store=str(store), workers=1),
        show_progress=False,
    )
    out = tmp_path / "cov.json"
    # run 1 planned only the onnx Relu (test-wrong is an onnx target): no keras instance is kept
    assert (
        coverage_main(
            [str(corpus), "--target", "tvm-keras", "--store", str(store), "--run", "1", "-o", str(out)]
        )
        == 0
    )
    assert load_coverage(out) == {}
    assert coverage_main([str(corpus), "--target", "tvm-keras", "-o", str(out)]) == 0
    cov = load_coverage(out)
    assert set(cov) == {dense.id} and cov[dense.id]
    (include,) = json.loads(out.read_text())["include"]
    assert include.endswith("tvm/relax/frontend/tflite")  # the target's frontend, nothing else
    assert all((Path(include) / line.rsplit(":", 1)[0]).is_file() for line in cov[dense.id])


def test_instances_the_validity_gate_rejected_go_last() -> None:
    """Known before any test runs: a rejected instance would only spend an early position."""
    good = [onnx("LeakyRelu", alpha=a) for a in (5, -1)]
    rejected = onnx("LeakyRelu", alpha=0).with_verdict(False, "library rejected it")
    other = onnx("Relu")
    corpus = [rejected, *good, other]
    for strategy in ("opera", "op-only", "param-only"):
        order = prioritize(corpus, strategy).ids
        assert order[-1] == rejected.id and sorted(order) == sorted(i.id for i in corpus), strategy
