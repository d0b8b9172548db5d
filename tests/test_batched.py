"""Batched compilation (opera.run.batch, issue 16 section 2): a batch decides only passes, every other
test runs alone, so each verdict, stage and signature is the one its unbatched run gives. Checked on
the fault-injecting test targets (a crashing, a segfaulting and a hanging instance among passing
ones; an all-inconsistent target) and on the real tvm-torch and ov-torch."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import numpy as np
import pytest
from _run_fixtures import fault, relus, write

from opera.cli import main
from opera.model import InstanceKind, OperatorInstance, Source
from opera.templates import get_template


def _verdicts(store: Path) -> dict[tuple[str, str], tuple]:
    rows = sqlite3.connect(store).execute("SELECT instance_id, target, outcome, stage, signature FROM results")
    return {(r[0], r[1]): r[2:] for r in rows}


def _decided(summary: str) -> int:
    """The count of the run summary's "N test(s) decided in batches" line (0 without one)."""
    if "decided in batches" not in summary:
        return 0
    return int(summary.split(" test(s) decided in batches")[0].rsplit("\n", 1)[-1])


def _run(corpus: Path, store: Path, targets: list[str], batch: int, capsys) -> str:
    args = ["run", str(corpus), "--store", str(store), "--workers", "1", "--timeout", "8", "--no-verify", "-q"]
    for target in targets:
        args += ["-t", target]
    assert main([*args, "--batch", str(batch)]) == 0
    return capsys.readouterr().out


@pytest.mark.slow
def test_faults_in_a_batch_get_the_verdicts_of_their_single_runs(tmp_path, capsys) -> None:
    tests = relus(3) + [fault("raise", 1)] + relus(3, start=10) + [fault("segv", 2)] + relus(3, start=20)
    tests += [fault("hang", 3)] + relus(3, start=30)
    corpus = write(tmp_path / "c.jsonl", tests)
    alone = _run(corpus, tmp_path / "alone.db", ["test-faults", "test-wrong"], 1, capsys)
    batched = _run(corpus, tmp_path / "batched.db", ["test-faults", "test-wrong"], 4, capsys)
    assert "decided in batches" not in alone
    assert "test(s) decided in batches of up to 4 (test-faults, test-wrong)" in batched
    one, many = _verdicts(tmp_path / "alone.db"), _verdicts(tmp_path / "batched.db")
    assert one == many and len(one) == 2 * len(tests)
    outcomes = {v[0] for k, v in many.items() if k[1] == "test-faults"}
    assert outcomes == {"pass", "crash", "native-crash", "timeout"}
    assert {v[0] for k, v in many.items() if k[1] == "test-wrong"} == {"inconsistent"}
    # some tests were decided in a batch: the count is in the summary line
    decided = _decided(batched)
    assert 0 < decided <= 12


def test_onnx_parts_combine_into_one_graph_without_sharing_names() -> None:
    template = get_template("onnx")
    parts = [template.build(inst, 0) for inst in relus(3)]
    combined = template.combine(parts)
    assert combined is not None and combined.input_names == [f"p{k}_{n}" for k in range(3) for n in parts[k].input_names]
    assert len(combined.model.graph.node) == 3 and len(combined.model.graph.output) == 3
    outputs = template.reference(combined)
    for part, out in zip(parts, outputs, strict=True):
        assert np.array_equal(template.reference(part)[0], out)


def _torch_op(api: str, *args: np.ndarray) -> OperatorInstance:
    return OperatorInstance(library="torch", api=api, kind=InstanceKind.FUNCTION, args=args, source=Source(suite="t", test=api))


@pytest.mark.slow
def test_real_torch_targets_give_the_same_verdicts_batched(tmp_path, capsys) -> None:
    x = np.linspace(-2, 2, 12, dtype=np.float32).reshape(3, 4)
    tests = [
        _torch_op("torch.nn.functional.relu", x),
        _torch_op("torch.sigmoid", x),
        _torch_op("torch.add", x, x + 1),
        _torch_op("torch.Tensor.mul", np.zeros((0, 1, 3), np.float32), np.zeros((0, 10, 3), np.float32)),
        _torch_op("torch.tanh", x),
        _torch_op("torch.nn.functional.softmax", x),
        _torch_op("torch.exp", x),
        _torch_op("torch.abs", x),
        _torch_op("torch.neg", x),
    ]
    corpus = write(tmp_path / "c.jsonl", tests)
    targets = ["tvm-torch", "ov-torch", "inductor-torch"]
    _run(corpus, tmp_path / "alone.db", targets, 1, capsys)
    batched = _run(corpus, tmp_path / "batched.db", targets, 8, capsys)
    assert _verdicts(tmp_path / "alone.db") == _verdicts(tmp_path / "batched.db")
    assert "test(s) decided in batches of up to 8 (tvm-torch, ov-torch, inductor-torch)" in batched
    decided = _decided(batched)
    assert decided >= 12  # of 27 tests: each target's first runs alone (warm-up); the empty mul's output is
    # empty too, so it is batched (computes_from_empty)


def _messages(store: Path, target: str) -> dict[str, str]:
    rows = sqlite3.connect(store).execute("SELECT instance_id, message FROM results WHERE target = ?", (target,))
    return dict(rows.fetchall())


def _alone_then_batched(tmp_path: Path, tests: list[OperatorInstance], target: str, capsys) -> tuple[list[str], int]:
    """Run ``tests`` on ``target`` alone, then in batches of 8: the two stores must hold the same
    verdicts and the same messages. Returns the outcomes (sorted) and how many the batches decided."""
    corpus = write(tmp_path / "c.jsonl", tests)
    _run(corpus, tmp_path / "alone.db", [target], 1, capsys)
    batched = _run(corpus, tmp_path / "batched.db", [target], 8, capsys)
    alone_verdicts = _verdicts(tmp_path / "alone.db")
    assert alone_verdicts == _verdicts(tmp_path / "batched.db")
    assert _messages(tmp_path / "alone.db", target) == _messages(tmp_path / "batched.db", target)
    return sorted(v[0] for v in alone_verdicts.values()), _decided(batched)


@pytest.mark.slow
def test_tvm_torch_decides_its_gaps_in_a_batch(tmp_path, capsys) -> None:
    """TVM's torch frontend checks every op for a converter before converting any: a batch that
    fails there records the parts lacking one ``unsupported`` with their own run's message, and
    compiles the rest again; nothing runs alone but the warm-up's first test."""
    x = np.linspace(-2, 2, 12, dtype=np.float32).reshape(3, 4)
    tests = [
        _torch_op("torch.nn.functional.relu", x),
        _torch_op("torch.unique", np.array([3, 1, 3, 2], np.int64)),
        _torch_op("torch.sigmoid", x),
        _torch_op("torch.searchsorted", np.array([1.0, 2.0, 3.0], np.float32), x),
        _torch_op("torch.tanh", x),
        _torch_op("torch.amin", x),
        _torch_op("torch.exp", x),
        _torch_op("torch.abs", x),
        _torch_op("torch.neg", x),
    ]
    outcomes, decided = _alone_then_batched(tmp_path, tests, "tvm-torch", capsys)
    assert outcomes == ["pass"] * 6 + ["unsupported"] * 3
    assert decided == 8  # the three gaps and five passes; the first test went alone (warm-up)


def test_batch_gaps_attribute_each_missing_op_to_its_own_part() -> None:
    from opera.run.targets import get_target

    target = get_target("tvm-torch")
    template = get_template("torch")
    x = np.linspace(-2, 2, 12, dtype=np.float32).reshape(3, 4)
    insts = [_torch_op("torch.nn.functional.relu", x), _torch_op("torch.amin", x), _torch_op("torch.unique", x)]
    combined = template.combine([template.build(inst, 0) for inst in insts])
    failure = "AssertionError: Unsupported function types ['_unique2.default', 'amin.default']"
    gaps = target.batch_gaps(combined, failure)
    assert gaps is not None and sorted(gaps) == [1, 2]
    assert str(gaps[1]) == "Unsupported function types ['amin.default']"
    assert str(gaps[2]) == "Unsupported function types ['_unique2.default']"
    # a message that names other ops than the program lacks: nothing is decided
    assert target.batch_gaps(combined, "AssertionError: Unsupported function types ['amin.default']") is None
    assert target.batch_gaps(combined, "TVMError: something else") is None


def _no_rule_tests() -> list[OperatorInstance]:
    """Passing ops among ops OpenVINO has no conversion rule for (cholesky, copysign, cumprod,
    bitwise_right_shift: ``No conversion rule found for operations``)."""
    x = np.linspace(-2, 2, 12, dtype=np.float32).reshape(3, 4)
    return [
        _torch_op("torch.nn.functional.relu", x),
        _torch_op("torch.cholesky", np.eye(3, dtype=np.float32) * 2),
        _torch_op("torch.sigmoid", x),
        _torch_op("torch.copysign", x, -x),
        _torch_op("torch.tanh", x),
        _torch_op("torch.cumprod", x, 1),
        _torch_op("torch.exp", x),
        _torch_op("torch.bitwise_right_shift", np.arange(6, dtype=np.int64), np.ones(6, np.int64)),
        _torch_op("torch.neg", x),
    ]


def test_ov_batch_gaps_give_each_part_the_report_of_its_own_conversion() -> None:
    """OpenVINO converts every node before it reports the ops it has no rule for: each part owning
    one gets the very exception (type and text) its own conversion raises; a report with a
    translator's failure in it, or naming an op no part owns, decides nothing."""
    from opera.run.targets import get_target

    target = get_target("ov-torch")
    template = get_template("torch")
    insts = _no_rule_tests()
    combined = template.combine([template.build(inst, 0) for inst in insts])
    with pytest.raises(Exception, match="No conversion rule found for operations: aten.bitwise_right_shift.Tensor, aten.cholesky") as raised:
        target.convert(combined)
    failure = f"{type(raised.value).__name__}: {raised.value}"
    gaps = target.batch_gaps(combined, failure)
    assert gaps is not None and sorted(gaps) == [1, 3, 5, 7]
    for k, exc in gaps.items():
        with pytest.raises(Exception) as alone:
            target.convert(template.build(insts[k], 0))
        assert type(alone.value) is type(exc) and str(alone.value) == str(exc)
        assert f"openvino._pyopenvino.{type(exc).__name__}: {exc}".startswith(target.batch_gap_message)
    other = failure.replace("aten.cholesky.default", "aten.cholesky.default, aten.lgamma.default")
    assert target.batch_gaps(combined, other) is None  # an op no part owns
    detailed = failure.replace("Model wasn't fully converted.\n", "Model wasn't fully converted. Failed operations detailed log:\n")
    assert target.batch_gaps(combined, detailed) is None
    assert target.batch_gaps(combined, failure + "-- Conversion is failed for: <built-in function getitem>\n") is None


@pytest.mark.slow
def test_ov_torch_decides_its_missing_rules_in_a_batch(tmp_path, capsys) -> None:
    """The ops without a conversion rule are decided in the batch (their own run's message); only
    the warm-up's first test runs alone."""
    outcomes, decided = _alone_then_batched(tmp_path, _no_rule_tests(), "ov-torch", capsys)
    assert outcomes == ["pass"] * 5 + ["unsupported"] * 4
    assert decided == 8


def test_a_conversion_failure_names_the_part_tvm_was_converting() -> None:
    """TVM's importer converts node by node; the node of its loop's frame, when a batch's conversion
    raises, belongs to one part (its module): that part runs alone, the rest is tried again."""
    from opera.run.targets import get_target

    target = get_target("tvm-torch")
    template = get_template("torch")
    x = np.linspace(-2, 2, 12, dtype=np.float32).reshape(3, 4)
    insts = [
        _torch_op("torch.nn.functional.relu", x),
        _torch_op("torch.sigmoid", x),
        OperatorInstance(library="torch", api="torch.as_strided", kind=InstanceKind.FUNCTION, args=(x, (2, 2), (1, 2)), source=Source(suite="t", test="s")),
        _torch_op("torch.tanh", x),
    ]
    combined = template.combine([template.build(inst, 0) for inst in insts])
    with pytest.raises(AssertionError, match="as_strided with non-contiguous stride") as raised:
        target.convert(combined)
    assert target.batch_culprits(raised.value) == {2}
    assert target.batch_gaps(combined, f"AssertionError: {raised.value}") is None  # not the op check
    assert target.batch_culprits(ValueError("raised elsewhere")) == set()


def test_a_part_that_draws_random_numbers_runs_alone() -> None:
    """multi_head_attention_forward in training mode applies dropout (``native_dropout`` in the
    decomposed program, tagged nondeterministic_seeded) although the random list does not name it:
    its two reference runs may agree by chance, so a batch would decide ``pass`` where a single run
    says ``nondeterministic``. The batch sends it alone; the other parts are decided."""
    from opera.corpus import CorpusReader
    from opera.run.batch import execute_batch
    from opera.run.execution import WorkerState
    from opera.run.executors import TestTask, WorkerSettings

    corpus = Path(__file__).resolve().parents[1] / "harvested" / "torch.jsonl.gz"
    (attention,) = [i for i in CorpusReader([corpus]) if i.id == "aaa5705e2022136a98b0"]
    x = np.linspace(-2, 2, 12, dtype=np.float32).reshape(3, 4)
    insts = [_torch_op("torch.nn.functional.relu", x), attention, _torch_op("torch.sigmoid", x), _torch_op("torch.tanh", x)]
    state = WorkerState(WorkerSettings(seed=0))
    tasks = [TestTask(k, inst, "tvm-torch") for k, inst in enumerate(insts)]
    template = get_template("torch")
    combined = template.combine([template.build(inst, 0) for inst in insts])
    target = state.target("tvm-torch")
    target.convert(combined)  # the batch's conversion keeps the decomposed program
    assert target.batch_random_parts(combined) == {1}  # the attention's native_dropout, nothing else
    outcome = execute_batch(tasks, state, lambda stage: None)
    assert [t.instance.id for t in outcome.alone] == [attention.id]
    assert sorted(o.task.seq for o in outcome.decided) == [0, 2, 3]
    assert all(o.result is not None and o.result.outcome.value == "pass" for o in outcome.decided)


def test_a_part_whose_reference_draws_random_numbers_runs_alone_on_any_target(monkeypatch) -> None:
    """The torch template notes whether the reference run drew from torch's generator, whatever the
    API: fractional_max_pool2d draws its pooling offsets (the random list does not name it). On a
    constant input its two reference runs agree, as the training-mode attention's did by chance in
    the batch benchmark. A batch on ov-torch, which keeps no decomposed program to look into (no
    ``batch_random_parts``), sends it alone without building it into any batch."""
    from opera.run.batch import execute_batch
    from opera.run.execution import WorkerState
    from opera.run.executors import TestTask, WorkerSettings

    x = np.linspace(-2, 2, 12, dtype=np.float32).reshape(3, 4)
    pool = OperatorInstance(
        library="torch", api="torch.nn.functional.fractional_max_pool2d", kind=InstanceKind.FUNCTION,
        args=(np.ones((1, 1, 6, 6), np.float32),), kwargs={"kernel_size": 2, "output_size": (3, 3)},
        source=Source(suite="t", test="fractional_max_pool2d"),
    )  # fmt: skip
    template = get_template("torch")
    for inst, draws in ((pool, True), (_torch_op("torch.nn.functional.relu", x), False)):
        built = template.build(inst, 0)
        template.reference(built)
        assert built.details["draws_random"] is draws
    combined: list[list[str]] = []  # the parts of every model the batch built (a spy, not a stand-in)
    real_combine = type(template).combine
    monkeypatch.setattr(type(template), "combine", lambda self, parts: combined.append([p.instance.id for p in parts]) or real_combine(self, parts))
    insts = [_torch_op("torch.nn.functional.relu", x), pool, _torch_op("torch.sigmoid", x)]
    state = WorkerState(WorkerSettings(seed=0))
    outcome = execute_batch([TestTask(k, inst, "ov-torch") for k, inst in enumerate(insts)], state, lambda stage: None)
    assert [t.instance.id for t in outcome.alone] == [pool.id]
    assert sorted(o.task.seq for o in outcome.decided) == [0, 2]
    assert combined and not any(pool.id in parts for parts in combined)


def test_batch_must_be_positive(tmp_path, capsys) -> None:
    corpus = write(tmp_path / "c.jsonl", relus(1))
    code = main(["run", str(corpus), "-t", "test-faults", "--store", str(tmp_path / "s.db"), "--batch", "0", "-q"])
    assert code == 2 and "--batch must be at least 1" in capsys.readouterr().err
    assert not (tmp_path / "s.db").exists()  # refused before the store is touched


def test_a_failing_batch_blames_the_part_the_frontend_names() -> None:
    """TVM says which operators it lacks; the parts holding one run alone, the others stay batched."""
    from opera.run.batch import _blames, _Part
    from opera.run.executors import TestTask
    from opera.run.targets import get_target

    target = get_target("tvm-torch")
    x = np.linspace(-2, 2, 12, dtype=np.float32).reshape(3, 4)
    template = get_template("torch")

    def part(inst: OperatorInstance) -> _Part:
        built = template.build(inst, 0)
        return _Part(TestTask(0, inst, "tvm-torch"), built, list(built.inputs), [], 0.0)

    addmv = part(_torch_op("torch.addmv", np.zeros(3, np.float32), x, np.ones(4, np.float32)))
    relu = part(_torch_op("torch.nn.functional.relu", x))
    failure = "AssertionError: Unsupported function types ['addmv.default']"
    assert _blames(target, addmv, failure) and not _blames(target, relu, failure)
    complex_input = part(_torch_op("torch.neg", (x + 1j * x).astype(np.complex64)))
    assert _blames(target, complex_input, "NotImplementedError: input_type torch.complex64 is not handled yet")
    assert not _blames(target, relu, "NotImplementedError: input_type torch.complex64 is not handled yet")


def test_a_worker_remembers_failing_operators_across_spellings() -> None:
    from types import SimpleNamespace

    from opera.outcomes import Outcome, Stage, TestResult
    from opera.run.batch import failing_operators, operator_name, remember_failure
    from opera.run.executors import TaskOutcome, TestTask

    state = SimpleNamespace()
    x = np.zeros(2, np.float32)
    for api, outcome in (("torch.add", Outcome.CRASH), ("torch.abs", Outcome.PASS)):
        inst = _torch_op(api, x)
        result = TestResult(inst.id, api, "tvm-torch", outcome, Stage.CONVERT)
        remember_failure(state, TestTask(0, inst, "tvm-torch"), TaskOutcome(TestTask(0, inst, "tvm-torch"), result=result))
    assert failing_operators(state) == {"add"}
    assert operator_name("torch.Tensor.add_") == operator_name("torch.add") == "add"


@pytest.mark.slow
def test_the_stores_earlier_runs_send_their_failing_operators_alone(tmp_path, capsys) -> None:
    """A nightly store's earlier runs name the operators that did not pass on each target; the next
    batched run tries them alone from the start, and every verdict stays the same."""
    from opera.run.batch import operator_name
    from opera.run.runner import known_failing_operators
    from opera.store import ResultStore

    tests = relus(3) + [fault("raise", 1)] + relus(3, start=10) + [fault("segv", 2)]
    corpus = write(tmp_path / "c.jsonl", tests)
    store = tmp_path / "nightly.db"
    first = _run(corpus, store, ["test-faults"], 4, capsys)
    second = _run(corpus, store, ["test-faults"], 4, capsys)

    # the faults are Relu instances too: after the first run, Relu is known to fail on test-faults,
    # so the second run tries none of its tests in a batch
    assert _decided(first) > 0 and _decided(second) == 0
    rows = sqlite3.connect(store).execute("SELECT run, instance_id, outcome, stage, signature FROM results")
    by_run: dict[int, dict] = {}
    for run, *rest in rows:
        by_run.setdefault(run, {})[rest[0]] = tuple(rest[1:])
    assert by_run[1] == by_run[2] and len(by_run[1]) == len(tests)
    with ResultStore(store) as opened:
        assert known_failing_operators(opened, 2, ["test-faults"]) == (("test-faults", operator_name(tests[0].api)),)
        assert known_failing_operators(opened, 1, ["test-faults"]) == ()  # nothing before the first run
        assert known_failing_operators(opened, 2, ["test-wrong"]) == ()  # per target


def test_gaps_a_batch_decides_do_not_keep_their_operator_out_of_batches(tmp_path) -> None:
    """tvm-torch's batches decide "Unsupported function types" gaps themselves: such a test, in a
    worker's history or the store's, does not send its operator's later tests alone; any other
    failure of the operator does."""
    from types import SimpleNamespace

    from opera.outcomes import Outcome, Stage, TestResult
    from opera.run.batch import failing_operators, gap_operators, remember_failure
    from opera.run.executors import TaskOutcome, TestTask
    from opera.run.runner import known_failing_operators
    from opera.run.targets import get_target
    from opera.store import ResultStore

    gap = "builtins.AssertionError: Unsupported function types ['_unique2.default']"
    other_gap = "TVM's converter for aten.mm.default builds its result in float32 only"
    x = np.zeros(2, np.float32)
    rows = [("torch.unique", Outcome.UNSUPPORTED, gap), ("torch.mm", Outcome.UNSUPPORTED, other_gap), ("torch.add", Outcome.CRASH, "boom")]
    state = SimpleNamespace(target=get_target)
    results = []
    for api, outcome, message in rows:
        inst = _torch_op(api, x)
        result = TestResult(inst.id, api, "tvm-torch", outcome, Stage.CONVERT, message=message)
        results.append(result)
        remember_failure(state, TestTask(0, inst, "tvm-torch"), TaskOutcome(TestTask(0, inst, "tvm-torch"), result=result))
    assert failing_operators(state) == {"mm", "add"}
    assert gap_operators(state) == {"unique"}  # its next tests are batched among themselves
    with ResultStore(tmp_path / "s.db") as store:
        first = store.create_run({}, tool_version="test", versions={}, corpus=[], planned=[])
        for result in results:
            store.add_result(first, result)
            store.add_result(first, TestResult(result.instance_id, result.api, "ov-torch", result.outcome, Stage.CONVERT, message=result.message))
        second = store.create_run({}, tool_version="test", versions={}, corpus=[], planned=[])
        assert known_failing_operators(store, second, ["tvm-torch"]) == (("tvm-torch", "add"), ("tvm-torch", "mm"))
        # ov-torch decides no gap in a batch: all three keep their operators out
        assert {op for _, op in known_failing_operators(store, second, ["ov-torch"])} == {"add", "mm", "unique"}


def _keras_slice(n: int) -> list[OperatorInstance]:
    from opera.corpus import CorpusReader

    corpus = Path(__file__).resolve().parents[1] / "harvested" / "keras.jsonl.gz"
    return [inst for inst, _ in zip((i for i in CorpusReader([corpus]) if i.valid), range(n), strict=False)]


def test_keras_parts_combine_into_one_model_computing_each_part() -> None:
    """KerasTemplate.combine: each part's model called on inputs of its own; the combined model's
    outputs are the parts' own, in order (tvm-keras batches, issue 16)."""
    template = get_template("keras")
    parts = [template.build(inst, 0) for inst in _keras_slice(6)]
    combined = template.combine(parts)
    assert combined is not None and len(combined.inputs) == sum(len(p.inputs) for p in parts)
    assert combined.input_names == [f"part{k}_input_{j}" for k, p in enumerate(parts) for j in range(len(p.inputs))]
    outputs = template.reference(combined)
    expected = [out for part in parts for out in template.reference(part)]
    assert len(outputs) == len(expected)
    for got, want in zip(outputs, expected, strict=True):
        assert np.array_equal(got, want, equal_nan=True)


@pytest.mark.slow
def test_tvm_keras_gives_the_same_verdicts_batched(tmp_path, capsys) -> None:
    """One TFLite conversion and one TVM build for up to 8 Keras tests: every verdict, stage and
    signature is the single run's (real instances of the shipped corpus, passing and failing)."""
    corpus = write(tmp_path / "k.jsonl", _keras_slice(14))
    _run(corpus, tmp_path / "alone.db", ["tvm-keras"], 1, capsys)
    batched = _run(corpus, tmp_path / "batched.db", ["tvm-keras"], 8, capsys)
    assert _verdicts(tmp_path / "alone.db") == _verdicts(tmp_path / "batched.db")
    assert "decided in batches of up to 8 (tvm-keras)" in batched
    decided = _decided(batched)
    assert decided >= 4


def test_tvm_keras_blames_the_parts_of_the_type_its_tflite_frontend_cannot_decode() -> None:
    """TVM's TFLite frontend names an unknown tensor type only by its code ("KeyError: 10" is
    FLOAT64, "16" UINT16): the batch's parts of that dtype run alone at once, instead of the batch
    being halved down to them (the first Keras batches halved three or four times)."""
    from opera.run.targets import get_target

    target = get_target("tvm-keras")
    f64, u16, f32 = np.zeros(2, np.float64), np.zeros(2, np.uint16), np.zeros(2, np.float32)
    assert target.batch_blames(None, [f32, f64], "KeyError: 10")
    assert target.batch_blames(None, [u16], "Traceback ... KeyError: 16")
    assert not target.batch_blames(None, [f32], "KeyError: 10")
    assert not target.batch_blames(None, [f64], "TypeError: a bytes-like object is required")
