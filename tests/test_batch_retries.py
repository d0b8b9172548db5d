"""A batch tried again without some parts (issue 16): cut programs, the parts a failure names, and
the pass-only judge. Real instances, real frontends (TVM, OpenVINO, Inductor)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from opera.model import InstanceKind, OperatorInstance, Source
from opera.templates import get_template

X = np.linspace(-2, 2, 12, dtype=np.float32).reshape(3, 4)
CORPUS = Path(__file__).resolve().parents[1] / "harvested" / "torch.jsonl.gz"


def _op(api: str, *args: np.ndarray) -> OperatorInstance:
    return OperatorInstance(
        library="torch", api=api, kind=InstanceKind.FUNCTION, args=args, source=Source(suite="t", test=api)
    )


def _max() -> OperatorInstance:
    return OperatorInstance(
        library="torch",
        api="torch.max",
        kind=InstanceKind.FUNCTION,
        args=(X,),
        kwargs={"dim": 0},
        source=Source(suite="t", test="max"),
    )


def _corpus(*ids: str) -> list[OperatorInstance]:
    from opera.corpus import CorpusReader

    found = {i.id: i for i in CorpusReader([CORPUS]) if i.id in ids}
    return [found[i] for i in ids]


def _built(insts: list[OperatorInstance]) -> list:
    template = get_template("torch")
    return [template.build(inst, 0) for inst in insts]


def _parts() -> list[OperatorInstance]:
    return [
        _op("torch.nn.functional.relu", X),
        _op("torch.sigmoid", X),
        _max(),  # two outputs (values, indices)
        _op("torch.add", X, X + 1),
        _op("torch.tanh", X),
    ]


def test_a_cut_program_converts_as_the_smaller_batch_exported_afresh() -> None:
    """tvm-torch: the decomposed program of five parts, cut to three, converts to the Relax module
    that exporting and decomposing those three afresh gives, and computes the same outputs."""
    import tvm

    from opera.run.targets import get_target
    from opera.run.targets._torch_parts import owning_part

    target = get_target("tvm-torch")
    template = get_template("torch")
    built = _built(_parts())
    whole = template.combine(built)
    target.convert(whole)  # keeps its decomposed program
    keep = [0, 2, 4]
    cut = template.combine([built[k] for k in keep])
    assert target.batch_cut(whole, keep, cut)
    fresh = template.combine([built[k] for k in keep])
    from_cut, afresh = target.convert(cut), target.convert(fresh)
    assert "cut" not in fresh.details
    tvm.ir.assert_structural_equal(from_cut.mod, afresh.mod)
    outputs = target.run(target.compile(from_cut), [x.copy() for x in cut.inputs])
    expected = target.run(target.compile(afresh), [x.copy() for x in fresh.inputs])
    assert len(outputs) == len(expected) == 4  # relu, max's two, tanh
    assert all(np.array_equal(a, b) for a, b in zip(outputs, expected, strict=True))
    # the cut's nodes are renumbered as the three parts' own combination numbers them
    owners = {owning_part(n) for n in cut.details["decomposed"].graph.nodes if n.op == "call_function"}
    assert owners == {0, 1, 2}
    # a cut of a cut is not made (its parameters still carry the first numbering)
    assert not target.batch_cut(cut, [0, 1], template.combine([built[0], built[2]]))


def test_a_cut_refuses_what_it_cannot_show_clean() -> None:
    from opera.run.targets._torch_parts import cut_program
    from opera.templates.torch_template import Independent

    class Counting(torch.nn.Module):  # writes its buffer back: a mutation output
        def __init__(self) -> None:
            super().__init__()
            self.register_buffer("seen", torch.zeros(1))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            self.seen.add_(1)
            return x + self.seen

    class Sin(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.sin(x)

    mutating = torch.export.export(
        Independent([Sin(), Counting()], [1, 1]), (torch.ones(3), torch.ones(3))
    ).run_decompositions()
    assert cut_program(mutating, [0], [1, 1]) is None
    x = torch.ones(3)  # one tensor for every input: torch.export reads them as one input
    aliased = torch.export.export(
        Independent([Sin(), Sin(), Sin()], [1, 1, 1]), (x, x, x)
    ).run_decompositions()
    assert cut_program(aliased, [0, 2], [1, 1, 1]) is None
    program = torch.export.export(
        Independent([Sin(), Sin(), Sin()], [1, 1, 1]), (torch.ones(3), torch.ones(3), torch.ones(3))
    ).run_decompositions()
    assert cut_program(program, [2, 0], [1, 1, 1]) is None  # not in the order the parts are numbered
    assert cut_program(program, [0, 3], [1, 1, 1]) is None
    kept = cut_program(program, [0, 2], [1, 1, 1])
    assert kept is not None and len(kept.graph_signature.user_inputs) == 2
    a, b = torch.rand(3), torch.rand(3)
    assert all(
        torch.equal(u, v) for u, v in zip(kept.module()(a, b), (torch.sin(a), torch.sin(b)), strict=True)
    )


@pytest.mark.slow
def test_openvino_names_the_parts_its_failure_names() -> None:
    """ov-torch: OpenVINO's failure names the ops it has no rule for (after its own decomposition:
    logaddexp2 becomes exp2) and the nodes whose conversion failed (native_layer_norm's unused
    mean and rstd): exactly the parts that fail alone; the rest, cut, converts and passes."""
    from opera.run.targets import get_target

    target = get_target("ov-torch")
    template = get_template("torch")
    insts = [
        _op("torch.nn.functional.relu", X),
        *_corpus(
            "e2455a852db75aa505af", "7ba34ee92ed4ace29de9", "1a0f2ae6aced40d9380d"
        ),  # logaddexp2, masked_select, native_layer_norm
        _op("torch.tanh", X),
    ]
    built = _built(insts)
    alone_fails = set()
    for k, part in enumerate(built):
        try:
            target.convert(part)
        except Exception:
            alone_fails.add(k)
    assert alone_fails == {1, 2, 3}
    whole = template.combine(built)
    with pytest.raises(Exception, match="wasn't fully converted") as raised:
        target.convert(whole)
    assert target.batch_culprits(raised.value, whole) == alone_fails
    rest = template.combine([built[0], built[4]])
    assert target.batch_cut(whole, [0, 4], rest)
    outputs = target.run(target.compile(target.convert(rest)), [x.copy() for x in rest.inputs])
    assert np.array_equal(outputs[0], np.maximum(X, 0)) and np.allclose(outputs[1], np.tanh(X), atol=1e-6)


@pytest.mark.slow
def test_inductor_names_the_part_dynamo_gave_up_in() -> None:
    """inductor-torch: Dynamo stops at linear_cross_entropy's warnings.warn; its user-code stack
    names the function, and only the two parts of that operator are blamed."""
    from opera.run.targets import get_target
    from opera.run.targets.inductor import dynamo_user_frames

    target = get_target("inductor-torch")
    template = get_template("torch")
    insts = [
        _op("torch.nn.functional.relu", X),
        *_corpus("814222f33a057c1e5f76", "d6851e279534c121f973"),
        _op("torch.tanh", X),
    ]
    whole = template.combine(_built(insts))
    with pytest.raises(Exception, match="marked as skipped") as raised:
        target.compile(target.convert(whole))
    assert "linear_cross_entropy" in dynamo_user_frames(str(raised.value))
    assert target.batch_culprits(raised.value, whole) == {1, 2}
    assert target.batch_culprits(ValueError("no stack"), whole) == set()


def test_a_batch_judges_passes_without_the_probes_a_difference_runs(monkeypatch) -> None:
    """judge_outputs(pass_only=True): a part whose outputs pass is decided; one whose outputs differ
    is not (NotAPass: it runs alone, where the probes run), and the target's gap probes, which
    convert the part again, are not called for it in the batch."""
    from opera.outcomes import Outcome, Stage, TestResult
    from opera.run.execution import WorkerState
    from opera.run.executors import WorkerSettings
    from opera.verdict.judge import NotAPass, judge_outputs

    state = WorkerState(WorkerSettings(seed=0))
    state.load_configs()
    target = state.target("tvm-torch")
    (built,) = _built([_max()])
    template = get_template("torch")
    reference = template.reference(built)
    probes: list[str] = []
    real = type(target).unimplemented_outputs
    monkeypatch.setattr(
        type(target), "unimplemented_outputs", lambda self, b: probes.append("outputs") or real(self, b)
    )

    def finish(outcome: Outcome, stage: Stage, **kw: object) -> TestResult:
        return TestResult(
            instance_id="i", api="torch.max", target="tvm-torch", outcome=outcome, stage=stage, **kw
        )  # type: ignore[arg-type]

    args = (state.oracle, target, built, list(built.inputs), reference)
    passed = judge_outputs(*args, [r.copy() for r in reference], None, finish, pass_only=True)
    assert passed.outcome is Outcome.PASS
    wrong = [reference[0] + 1, reference[1]]
    with pytest.raises(NotAPass):
        judge_outputs(*args, wrong, None, finish, pass_only=True)
    assert probes == []
    alone = judge_outputs(*args, wrong, None, finish)
    assert alone.outcome is Outcome.INCONSISTENT and probes == ["outputs"]  # alone, the probes run


def test_a_part_holding_an_empty_tensor_runs_alone(monkeypatch) -> None:
    """OpenVINO's matmul of a 2x0 by a 0x2 matrix returns uninitialized memory (judged REAL): the
    single run is ``inconsistent``, but the garbage compared equal once in a batch (the session-9
    benchmark). Parts holding an empty tensor, as an input or a constant, whose reference has
    values run alone; one whose outputs are empty too (a division of empty tensors: only shapes and
    dtypes are compared) is decided in the batch, as its single run decides it."""
    from opera.run.batch import computes_from_empty, execute_batch, holds_empty_tensor
    from opera.run.execution import WorkerState, execute_task
    from opera.run.executors import TestTask, WorkerSettings

    (multi_dot,) = _corpus("a574740f52eb7105c62a")
    assert holds_empty_tensor(multi_dot) and not holds_empty_tensor(_op("torch.sigmoid", X))
    empty_div = _op("torch.Tensor.div", np.zeros((0, 1, 3), np.float32), np.ones((0, 10, 3), np.float32))
    assert holds_empty_tensor(empty_div)
    assert not computes_from_empty(empty_div, [np.zeros((0, 10, 3), np.float32)])
    assert computes_from_empty(multi_dot, [np.zeros((2, 2), np.float32)])
    template = get_template("torch")
    combined: list[list[str]] = []  # the parts of every model the batch built (a spy, not a stand-in)
    real_combine = type(template).combine
    monkeypatch.setattr(
        type(template),
        "combine",
        lambda self, parts: combined.append([p.instance.id for p in parts]) or real_combine(self, parts),
    )
    insts = [_op("torch.sigmoid", X), multi_dot, empty_div, _op("torch.tanh", X)]
    state = WorkerState(WorkerSettings(seed=0))
    tasks = [TestTask(k, inst, "ov-torch") for k, inst in enumerate(insts)]
    outcome = execute_batch(tasks, state, lambda stage: None)
    assert [t.instance.id for t in outcome.alone] == [multi_dot.id]
    assert sorted(o.task.seq for o in outcome.decided) == [0, 2, 3]
    assert combined and not any(multi_dot.id in parts for parts in combined)  # never built into a batch
    assert any(empty_div.id in parts for parts in combined)
    (batched,) = [o.result for o in outcome.decided if o.task.seq == 2]
    single = execute_task(tasks[2], WorkerState(WorkerSettings(seed=0)), lambda stage: None, lambda *a: None).result
    assert batched is not None and single is not None
    assert (batched.outcome, batched.stage, batched.signature) == (single.outcome, single.stage, single.signature)
    assert batched.outcome.value == "pass"


def test_batches_are_on_by_default_where_they_pay() -> None:
    """``--batch auto`` (the default): batches of 16 on the torch targets, whose batches pay on a
    random slice of the corpus; tvm-keras (batchable, but slower batched) and the test targets
    run every test alone unless ``--batch K`` asks; ``--batch 1`` turns batches off."""
    import argparse

    from opera.commands import run as run_command
    from opera.commands.run import run_settings_from_args
    from opera.errors import OperaError
    from opera.run.runner import AUTO_BATCH, RunConfig, _batch_targets, _settings

    parser = argparse.ArgumentParser()
    run_command.add_arguments(parser)
    targets = ["tvm-torch", "ov-torch", "inductor-torch", "tvm-keras", "tvm-onnx", "test-faults"]

    def config(*flags: str) -> RunConfig:
        settings = run_settings_from_args(parser.parse_args(["c.jsonl", *flags]))
        return RunConfig(corpus=[], targets=targets, **settings.run_settings())

    assert _batch_targets(config()) == ("tvm-torch", "ov-torch", "inductor-torch")
    assert _settings(config(), 1).batch == AUTO_BATCH == 16
    assert _batch_targets(config("--batch", "8")) == (
        "tvm-torch",
        "ov-torch",
        "inductor-torch",
        "tvm-keras",
        "test-faults",
    )
    assert _batch_targets(config("--batch", "1")) == ()
    with pytest.raises(OperaError, match="'auto' or a number"):
        config("--batch", "many")


def test_a_gap_of_two_ops_is_worded_in_tvm_s_own_order() -> None:
    """TVM lists the missing ops of a program as ``list({...})`` of their names: a set's order, not
    a sorted one. histogramdd lacks two converters; the batch's exception for it is worded as its
    own conversion words it (a sorted list differed in the eleventh session's check)."""
    from opera.run.targets import get_target

    (histogram,) = _corpus("6c31364dd2f87d8d9491")
    target = get_target("tvm-torch")
    template = get_template("torch")
    combined = template.combine([template.build(_op("torch.sigmoid", X), 0), template.build(histogram, 0)])
    with pytest.raises(AssertionError) as batched:
        target.convert(combined)
    gaps = target.batch_gaps(combined, f"AssertionError: {batched.value}")
    assert gaps is not None and sorted(gaps) == [1]
    with pytest.raises(AssertionError) as alone:
        target.convert(template.build(histogram, 0))
    assert str(gaps[1]) == str(alone.value)
    assert "_histogramdd_bin_edges.default" in str(alone.value) and "_histogramdd_from_bin_cts.default" in str(alone.value)


@pytest.mark.slow
def test_openvino_names_the_part_its_cpu_plugin_failed_on_at_inference() -> None:
    """A batch of eight cdist tests compiles but fails at inference: the CPU plugin names its node
    by the torch node's name first ("[CPU] Add node with name '_cdist_forward_3/aten._cdist_
    forward.default/Subtract_2'"). That names the one part that fails alone too (at run), so it
    runs alone at once instead of the batch being halved four times down to it."""
    from opera.run.targets import get_target

    ids = (
        "b1fc6521d4c8f29b8557", "2298ef3a3cde11b3b543", "e7d8d498f995c0b4fd69", "16493da78b9e4ffeef89",
        "8b5fa50eef5e266ba315", "9da62aa58874dcc1e627", "fcc6bddb8c7a037325ce", "34d71ecc67b49337ac78",
    )  # fmt: skip
    target = get_target("ov-torch")
    template = get_template("torch")
    built = _built(_corpus(*ids))
    whole = template.combine(built)
    with pytest.raises(RuntimeError, match="node with name '_cdist_forward_3/") as raised:
        target.run(target.compile(target.convert(whole)), [x.copy() for x in whole.inputs])
    assert target.batch_culprits(raised.value, whole) == {3}
    with pytest.raises(RuntimeError, match="Eltwise shape infer"):
        target.run(target.compile(target.convert(built[3])), [x.copy() for x in built[3].inputs])
