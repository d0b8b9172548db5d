"""Oracles beside the reference (opera.run.rules, issue 14): optlevel, reload, batch, paths.

The runner and the store are checked on the test-only ``test-variants`` target (its optimizing
variant is off by one, its reload raises); each rule on the real compilers, on small real
instances: the rule applies where it should and passes on correct builds, says why where it does
not apply, and reports a broken variant with the rule in its signature.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from _run_fixtures import add, relus, write

from opera.cli import main
from opera.model import InstanceKind, OperatorInstance, Source
from opera.outcomes import Outcome
from opera.run.execution import WorkerState, _execute_test
from opera.run.executors import TestTask, WorkerSettings
from opera.run.rules import parse_oracles, rule_names
from opera.store import ResultStore

ONNX_EXTRA = {"domain": "", "n_outputs": 1, "opset": 17}
REPO = Path(__file__).resolve().parents[1]


def _onnx(op: str, *inputs: np.ndarray, **attrs: object) -> OperatorInstance:
    return OperatorInstance(
        library="onnx",
        api=f"onnx::{op}",
        kind=InstanceKind.ONNX_NODE,
        inputs=tuple(inputs),
        kwargs=dict(attrs),
        extra=dict(ONNX_EXTRA),
        source=Source(suite="opera-tests", test=op),
    )


def _torch_relu(x: np.ndarray) -> OperatorInstance:
    return OperatorInstance(
        library="torch",
        api="torch.nn.functional.relu",
        kind=InstanceKind.FUNCTION,
        args=(x,),
        source=Source(suite="opera-tests", test="relu"),
    )


def _rules_of(inst: OperatorInstance, target: str, rules: tuple[str, ...]) -> tuple[Outcome, dict[str, dict]]:
    state = WorkerState(WorkerSettings(rules=rules))
    result, _ = _execute_test(TestTask(0, inst, target), state, lambda stage: None)
    return result.outcome, result.extra.get("rules", {})


# ---- choosing oracles ------------------------------------------------------------------------


def test_oracle_names_parse_and_unknown_ones_are_refused() -> None:
    assert {"optlevel", "reload", "batch", "paths"} <= set(rule_names())
    assert parse_oracles("reference") == ()
    assert parse_oracles("reference,reload, optlevel,reload") == ("reload", "optlevel")
    assert set(parse_oracles("all")) == set(rule_names())
    with pytest.raises(ValueError, match="unknown oracle 'nope'.*known: reference"):
        parse_oracles("optlevel,nope")


def test_run_refuses_an_unknown_oracle(tmp_path, capsys) -> None:
    corpus = write(tmp_path / "c.jsonl", relus(1))
    code = main(["run", str(corpus), "-t", "test-wrong", "--store", str(tmp_path / "s.db"), "--oracle", "speed", "-q"])
    assert code == 2 and "--oracle: unknown oracle 'speed'" in capsys.readouterr().err


# ---- the runner and the store, on a fault-injecting target ----------------------------------


def test_rule_outcomes_are_stored_and_failing_rules_are_bugs_of_their_own(tmp_path, capsys) -> None:
    corpus = write(tmp_path / "c.jsonl", relus(3) + [add((3, 4), (3, 4))])
    store = tmp_path / "s.db"
    args = ["run", str(corpus), "-t", "test-variants", "-t", "test-wrong", "--store", str(store), "--workers", "1"]
    assert main([*args, "--oracle", "reference,optlevel,reload,batch", "-q", "--no-verify"]) == 0
    out = capsys.readouterr().out
    assert "oracles beside the reference (per test):" in out and "test-variants optlevel" in out
    with ResultStore(store) as s:
        # the tests themselves: test-variants is correct, test-wrong is off by one
        assert s.outcome_counts(1) == {"test-variants": {"pass": 4}, "test-wrong": {"inconsistent": 4}}
        counts = s.rule_counts(1)
        assert counts["test-variants"]["optlevel"] == {"inconsistent": 4}
        assert counts["test-variants"]["reload"] == {"crash": 4}
        assert counts["test-wrong"]["optlevel"] == {"not-applicable": 4}  # it has no such variant
        # onnxruntime is per element on the Relus (2 rows) and on Add (both operands sliced)
        assert counts["test-variants"]["batch"] == {"pass": 4}
        records = [r for r in s.rule_results(1) if r.target == "test-variants" and r.rule == "optlevel"]
        assert all(r.distance == pytest.approx(1.0) for r in records) and "the default pipeline" in records[0].message
        signatures = {b.signature: b for b in s.bugs(1)}
        optlevel = [sig for sig in signatures if sig.startswith("inconsistent:test-variants:rule=optlevel:")]
        reload = [sig for sig in signatures if sig.startswith("crash:test-variants:rule=reload:")]
        assert len(optlevel) == 2 and len(reload) == 1  # per operator (Relu, Add); one crash site
        assert signatures[reload[0]].count == 4 and signatures[reload[0]].outcome is Outcome.CRASH
        assert not [sig for sig in signatures if sig.startswith("inconsistent:test-variants:onnx")]


def test_without_oracles_no_rule_runs(tmp_path) -> None:
    corpus = write(tmp_path / "c.jsonl", relus(2))
    store = tmp_path / "s.db"
    assert main(["run", str(corpus), "-t", "test-variants", "--store", str(store), "-q", "--no-verify"]) == 0
    with ResultStore(store) as s:
        assert s.rule_counts(1) == {} and s.bugs(1) == []


# ---- each rule on the real compilers ----------------------------------------------------------


@pytest.mark.parametrize("target", ["tvm-onnx", "ov-onnx"])
def test_optlevel_and_reload_agree_with_the_default_build_on_real_compilers(target: str) -> None:
    x = np.linspace(-3, 3, 24, dtype=np.float32).reshape(4, 6)
    outcome, rules = _rules_of(_onnx("Softmax", x, axis=1), target, ("optlevel", "reload"))
    assert outcome is Outcome.PASS
    assert rules["optlevel"]["outcome"] == "pass" and rules["reload"]["outcome"] == "pass"
    assert rules["optlevel"]["distance"] <= 1e-6


def test_batch_applies_where_the_library_is_per_element_and_says_why_not_elsewhere() -> None:
    x = np.linspace(-3, 3, 24, dtype=np.float32).reshape(4, 6)
    _, per_row = _rules_of(_onnx("Softmax", x, axis=1), "tvm-onnx", ("batch",))
    assert per_row["batch"]["outcome"] == "pass" and per_row["batch"]["message"] == "slices 0 and 3 of 4"
    # a softmax across the batch axis is not per element: the library itself says so
    _, across = _rules_of(_onnx("Softmax", x, axis=0), "tvm-onnx", ("batch",))
    assert across["batch"]["outcome"] == "not-applicable"
    assert "the library's output on slice 0 is not row 0" in across["batch"]["message"]
    _, single = _rules_of(_onnx("Relu", x[:1]), "tvm-onnx", ("batch",))
    assert single["batch"]["outcome"] == "not-applicable" and "no batch axis" in single["batch"]["message"]


@pytest.mark.parametrize("target", ["tvm-torch", "ov-torch"])
def test_paths_runs_the_torch_onnx_export_through_the_compilers_onnx_frontend(target: str) -> None:
    x = np.linspace(-2, 2, 12, dtype=np.float32).reshape(3, 4)
    outcome, rules = _rules_of(_torch_relu(x), target, ("paths",))
    assert outcome is Outcome.PASS
    assert rules["paths"]["outcome"] == "pass" and "-onnx agree" in rules["paths"]["message"]


def test_paths_takes_a_keras_model_through_tf2onnx_to_the_compilers_onnx_frontend() -> None:
    from opera.run.execution import warm_up_instance

    keras_relu = warm_up_instance("keras")
    assert keras_relu is not None
    outcome, rules = _rules_of(keras_relu, "tvm-keras", ("paths",))
    assert outcome is Outcome.PASS and rules["paths"] == {**rules["paths"], "outcome": "pass", "message": "tvm-keras and tvm-onnx agree"}


def test_paths_keeps_integer_model_inputs_as_inputs() -> None:
    """An int64 operand of the exported model stays a graph input (frozen into an initializer,
    OpenVINO folded an empty one into a scalar: a disagreement of the harness's making)."""
    empty = np.zeros((1, 0, 3), np.int64)
    inst = OperatorInstance(
        library="torch", api="torch.acos", kind=InstanceKind.FUNCTION, args=(empty,), source=Source(suite="opera-tests", test="acos")
    )
    _, rules = _rules_of(inst, "ov-torch", ("paths",))
    assert rules["paths"]["outcome"] == "pass", rules["paths"]


def test_rules_that_do_not_apply_say_why() -> None:
    x = np.linspace(-2, 2, 12, dtype=np.float32).reshape(3, 4)
    _, rules = _rules_of(_torch_relu(x), "inductor-torch", ("paths", "reload"))
    assert rules["paths"] == {**rules["paths"], "outcome": "not-applicable", "message": "inductor has no ONNX frontend target"}
    assert rules["reload"]["outcome"] == "not-applicable" and "no serialized form" in rules["reload"]["message"]
    _, onnx_rules = _rules_of(_onnx("Relu", x), "tvm-onnx", ("paths",))
    assert onnx_rules["paths"]["outcome"] == "not-applicable" and "only torch and Keras" in onnx_rules["paths"]["message"]


def test_nightly_and_bugs_show_what_each_oracle_found(tmp_path, capsys) -> None:
    corpus = write(tmp_path / "c.jsonl", relus(2))
    store = tmp_path / "s.db"
    code = main(
        ["nightly", str(corpus), "-t", "test-variants", "--store", str(store), "--budget", "5m", "--oracle", "optlevel,reload"]
    )
    text = capsys.readouterr().out
    assert code == 0, text  # the tests pass; rule findings are listed, not counted as new failures
    assert "oracles: optlevel 2 failing of 2, reload 2 failing of 2; 2 signature(s) from them" in text
    page = next((store.parent / "s.db.d" / "nightly").glob("*/report.html")).read_text()
    assert '<table id="oracles">' in page and "rule=optlevel" in page and "rule=reload" in page
    assert main(["bugs", "--store", str(store)]) == 0
    listing = capsys.readouterr().out
    assert "by oracle: optlevel 1, reload 1" in listing and "test-variants optlevel" in listing


def test_compilers_outvote_a_wrong_one_where_the_library_is_no_judge() -> None:
    """A test whose references disagree (unstable-reference): the real ONNX compilers and the two
    references of the library vote; the deliberately wrong test-wrong target is the outlier."""
    from opera.run.rules import RuleContext, run_rules
    from opera.run.targets import get_target
    from opera.templates import get_template
    from opera.verdict.oracles import load_oracle_config
    from opera.verdict.unsupported import load_unsupported

    x = np.linspace(-3, 3, 12, dtype=np.float32).reshape(3, 4)
    inst = _onnx("Relu", x)
    template = get_template("onnx")
    built = template.build(inst, 0)
    reference = template.reference(built)
    wrong = get_target("test-wrong")
    compiled = wrong.compile(wrong.convert(built))
    outputs = wrong.run(compiled, [x.copy()])

    def context(verdict: Outcome, target=wrong, outs=outputs) -> RuleContext:
        return RuleContext(
            target=target, built=built, converted=None, compiled=compiled, inputs=[x], reference=reference,
            outputs=outs, verdict=verdict, oracle=load_oracle_config(None), unsupported=load_unsupported(None),
            build=lambda i: template.build(i, 0), values_comparable=False,
        )  # fmt: skip

    vote = run_rules(["compilers"], context(Outcome.UNSTABLE_REFERENCE))["compilers"]
    assert vote["outcome"] == "inconsistent" and vote["signature"] == "inconsistent:test-wrong:rule=compilers:onnx::Relu"
    assert "outlier against the majority {reference, onnx.reference, ov-onnx, tvm-onnx}" in vote["message"]
    tvm = get_target("tvm-onnx")
    good = run_rules(["compilers"], context(Outcome.UNSTABLE_REFERENCE, tvm, reference))["compilers"]
    assert good["outcome"] == "pass" and good["message"].startswith("with the majority")
    judged = run_rules(["compilers"], context(Outcome.PASS))["compilers"]
    assert judged["outcome"] == "not-applicable" and "no vote needed" in judged["message"]


@pytest.mark.parametrize("target", ["tvm-torch", "inductor-torch"])
def test_transforms_rewrite_the_torch_model_and_the_compilers_see_through_them(target: str) -> None:
    x = np.linspace(-2, 2, 12, dtype=np.float32).reshape(3, 4)
    inst = OperatorInstance(
        library="torch", api="torch.add", kind=InstanceKind.FUNCTION, args=(x, x + 1), source=Source(suite="t", test="add")
    )
    outcome, rules = _rules_of(inst, target, ("transforms",))
    assert outcome is Outcome.PASS
    # helper, branch, view-trip, negate-twice, and torch.add called as Tensor.add
    assert rules["transforms"] == {**rules["transforms"], "outcome": "pass", "message": "5 rewrite(s)", "distance": 0.0}


def test_transforms_wrap_the_model_without_changing_what_it_computes() -> None:
    import torch

    from opera.run.rules.transforms import _resolution_variant, _wrap

    model = torch.nn.Sigmoid()
    x = torch.linspace(-3, 3, 8).reshape(2, 4)
    for kind in ("helper", "branch", "view-trip", "negate-twice"):
        assert torch.equal(_wrap(model, kind)(x), model(x)), kind
    assert _resolution_variant("torch.add") == "torch.Tensor.add"
    assert _resolution_variant("torch.Tensor.add") == "torch.add"
    assert _resolution_variant("torch.Tensor.add_") is None and _resolution_variant("torch.nn.functional.relu") is None


# ---- what the rules found that the reference oracle did not (bugs/oracles/) ---------------------


def test_optlevel_finds_openvino_rounding_integer_division_without_snippets() -> None:
    """ONNX Div on integers truncates (onnx/reference/ops/op_div.py; onnxruntime and OpenVINO's
    default build agree: 12 / 23 = 0); OpenVINO's CPU plugin with snippets disabled rounds (1)."""
    a = np.array([12, 18, 14, 15, -12, 7], np.int8)
    b = np.array([23, 23, 21, 24, 23, 2], np.int8)
    outcome, rules = _rules_of(_onnx("Div", a, b), "ov-onnx", ("optlevel",))
    assert outcome is Outcome.PASS  # the default build is right
    found = rules["optlevel"]
    assert found["outcome"] == "inconsistent" and found["signature"] == "inconsistent:ov-onnx:rule=optlevel:onnx::Div"
    assert found["agrees_with_reference"] == "default" and found["distance"] == 1.0


def test_transforms_find_tvm_failing_on_an_empty_tensor_through_unsqueeze_squeeze() -> None:
    """x.unsqueeze(0).squeeze(0) is x; on an empty x TVM's default build fails in
    RewriteDataflowReshape (a reshape to [1, 1, 1, 3] of a [0, 1, 3] tensor); the plain model runs."""
    empty = np.zeros((0, 1, 3), np.float32)
    inst = OperatorInstance(
        library="torch", api="torch.Tensor.mul", kind=InstanceKind.FUNCTION, args=(empty, np.zeros((0, 10, 3), np.float32)),
        source=Source(suite="opera-tests", test="mul"),
    )  # fmt: skip
    outcome, rules = _rules_of(inst, "tvm-torch", ("transforms",))
    assert outcome is Outcome.PASS
    found = rules["transforms"]
    assert found["outcome"] == "crash" and found["signature"].startswith("crash:tvm-torch:rule=transforms:")
    assert "rewrite view-trip" in found["message"] and "Reshape expects the new shape" in found["message"]
    assert _rules_of(inst, "ov-torch", ("transforms",))[1]["transforms"]["outcome"] == "pass"


def test_paths_does_not_apply_where_the_exporter_changed_an_input_type() -> None:
    """tf2onnx writes a bfloat16 Keras input as float16: another model, not a second path."""
    from opera.corpus import CorpusReader

    inst = next(i for i in CorpusReader([REPO / "harvested" / "keras.jsonl.gz"]) if i.id == "d0c029bab87c92da6191")
    assert inst.api == "keras.ops.all"
    _, rules = _rules_of(inst, "ov-keras", ("paths",))
    assert rules["paths"]["outcome"] == "not-applicable"
    assert "tf2onnx changed the model's input types: input_0: bfloat16 -> float16" in rules["paths"]["message"]


def test_inductor_optlevel_recompiles_without_its_optimizations() -> None:
    x = np.linspace(-2, 2, 12, dtype=np.float32).reshape(3, 4)
    outcome, rules = _rules_of(_torch_relu(x), "inductor-torch", ("optlevel",))
    assert outcome is Outcome.PASS and rules["optlevel"]["outcome"] == "pass"
    assert rules["optlevel"]["distance"] == 0.0


def _corpus_instance(corpus: str, instance_id: str) -> OperatorInstance:
    from opera.corpus import CorpusReader

    return next(i for i in CorpusReader([REPO / "harvested" / corpus]) if i.id == instance_id)


def test_rules_compare_two_builds_only_where_the_specification_defines_the_values() -> None:
    """ONNX Cast of float to uint4 is "undefined if OOR" (the Cast doc): on -9..-1 OpenVINO's default
    build wraps (as onnx.reference does) and the build without snippets clamps to 0. Both are
    allowed, so `optlevel` compares the in-range positions only (a shipped corpus instance, found
    by the whole-corpus run as a false `inconsistent`)."""
    inst = _corpus_instance("onnx.jsonl.gz", "26a1550a5f58f63ba3f0")
    assert inst.api == "onnx::Cast"
    outcome, rules = _rules_of(inst, "ov-onnx", ("optlevel",))
    assert outcome is Outcome.PASS
    assert rules["optlevel"]["outcome"] == "pass", rules["optlevel"]
    # an in-range difference is still found: the int8 Div of the test above
    a, b = np.array([12, 7], np.int8), np.array([23, 2], np.int8)
    assert _rules_of(_onnx("Div", a, b), "ov-onnx", ("optlevel",))[1]["optlevel"]["outcome"] == "inconsistent"


def test_a_rule_difference_that_is_the_tests_own_gap_is_unsupported_not_a_finding() -> None:
    """tvm-torch ignores torch.add's ``alpha`` (the test's own verdict: unsupported, the attribute
    not implemented); through torch.onnx.export, tvm-onnx computes it. ``paths`` then sees the gap
    again, with the library on the ONNX side: not a finding of its own (the whole-corpus torch run
    counted three such as beyond the reference)."""
    x = np.linspace(-2, 2, 12, dtype=np.float32).reshape(3, 4)
    inst = OperatorInstance(
        library="torch", api="torch.add", kind=InstanceKind.FUNCTION, args=(x, x + 1), kwargs={"alpha": 2.5},
        source=Source(suite="t", test="add"),
    )  # fmt: skip
    outcome, rules = _rules_of(inst, "tvm-torch", ("paths",))
    assert outcome is Outcome.UNSUPPORTED
    found = rules["paths"]
    assert found["outcome"] == "unsupported" and found["agrees_with_reference"] == "tvm-onnx"
    assert "the test's own coverage gap" in found["message"] and "signature" not in found


def test_paths_compares_only_the_outputs_both_frontends_compute() -> None:
    """torch.native_layer_norm through tvm-torch returns output 0 again for the mean and rstd, and
    through torch.onnx.export tvm-onnx's LayerNormalization fills them with placeholders (both by
    the frontends' own words, ``unimplemented_outputs``): the two paths differ only there, which is
    no finding of ``paths`` (the whole-corpus torch run reported it as one)."""
    x = np.linspace(-2, 2, 6, dtype=np.float32).reshape(1, 2, 3)
    inst = OperatorInstance(
        library="torch", api="torch.native_layer_norm", kind=InstanceKind.FUNCTION,
        args=(x, (1, 2, 3), np.ones((1, 2, 3), np.float32), np.zeros((1, 2, 3), np.float32), 0.5),
        source=Source(suite="t", test="native_layer_norm"),
    )  # fmt: skip
    outcome, rules = _rules_of(inst, "tvm-torch", ("paths",))
    assert outcome is Outcome.UNSUPPORTED  # outputs 1 and 2 are the test's own gap
    found = rules["paths"]
    assert found["outcome"] == "pass", found
    assert "agree on the outputs both compute" in found["message"] and "tvm-onnx:" in found["message"]


@pytest.mark.slow
def test_a_rule_that_kills_the_worker_is_the_rules_crash_not_the_tests(tmp_path, capsys) -> None:
    """OpenVINO's compile_model of a saved-and-read IR whose empty Constant has a 0-byte weights file
    segfaults (bugs/ov-torch/rc-35124947ec): the default pipeline passes, only ``reload`` dies. The
    test's own verdict stays ``pass``; ``reload`` gets a native crash signed with its name."""
    inst = OperatorInstance(
        library="torch", api="torch.floor_divide", kind=InstanceKind.FUNCTION,
        args=(np.zeros((0, 1, 3), np.float32), np.zeros((0, 10, 3), np.float32)),
        source=Source(suite="t", test="floor_divide"),
    )  # fmt: skip
    corpus = write(tmp_path / "c.jsonl", [inst])
    store = tmp_path / "s.db"
    args = ["run", str(corpus), "-t", "ov-torch", "--oracle", "reload", "--store", str(store), "--workers", "1", "--no-verify", "-q"]
    assert main(args) in (0, 1)
    capsys.readouterr()
    with ResultStore(store) as db:
        (result,) = list(db.iter_results(1))
        (rule,) = db.rule_results(1)
    assert result.outcome is Outcome.PASS and result.signature is None
    assert rule.rule == "reload" and rule.outcome == "crash"
    assert rule.signature == "native-crash:ov-torch:rule=reload:torch.floor_divide:SIGSEGV"
    assert "in rule reload; the test's own verdict stands" in rule.message


def test_compilers_do_not_vote_on_a_model_that_draws_random_numbers() -> None:
    """multi_head_attention_forward in training mode applies dropout (aten.dropout, tagged
    nondeterministic_seeded): its references disagree (nondeterministic) because of the random
    mask, so the compilers need not agree either (the torch rules run had inductor-torch 'outvoted')."""
    from opera.corpus import CorpusReader
    from opera.run.rules import RuleContext, run_rules
    from opera.run.targets import get_target
    from opera.templates import get_template
    from opera.verdict.oracles import load_oracle_config
    from opera.verdict.unsupported import load_unsupported

    (inst,) = [i for i in CorpusReader([REPO / "harvested" / "torch.jsonl.gz"]) if i.id == "12edeb8455b930cb3e38"]
    assert inst.api == "torch.nn.functional.multi_head_attention_forward"
    template = get_template("torch")
    built = template.build(inst, 0)
    reference = template.reference(built)
    ctx = RuleContext(
        target=get_target("inductor-torch"), built=built, converted=None, compiled=None, inputs=list(built.inputs), reference=reference,
        outputs=reference, verdict=Outcome.NONDETERMINISTIC, oracle=load_oracle_config(None), unsupported=load_unsupported(None),
        build=lambda i: template.build(i, 0), values_comparable=False,
    )  # fmt: skip
    found = run_rules(["compilers"], ctx)["compilers"]
    assert found["outcome"] == "not-applicable" and "draws random numbers" in found["message"], found


def test_paths_does_not_apply_to_an_export_onnx_checker_rejects() -> None:
    """torch.onnx exports max_pool3d with ceil_mode as MaxPool at opset 20 declaring torch's output
    size, which MaxPool-12's formula (and strict shape inference) does not give; onnxruntime follows
    torch's rule anyway. Such an export is not a valid ONNX model: paths does not apply (the torch
    rules run called OpenVINO wrong there, computing the opset's size)."""
    from opera.corpus import CorpusReader

    (inst,) = [i for i in CorpusReader([REPO / "harvested" / "torch.jsonl.gz"]) if i.id == "2c0db7d6622e8bf01d29"]
    assert inst.api == "torch.nn.functional.max_pool3d"
    outcome, rules = _rules_of(inst, "ov-torch", ("paths",))
    assert outcome is Outcome.PASS
    found = rules["paths"]
    assert found["outcome"] == "not-applicable" and "is not a valid ONNX model" in found["message"], found


def test_paths_judges_each_node_of_the_export_for_the_onnx_frontends_gaps() -> None:
    """torch.onnx exports ``linalg.norm`` as ReduceSum, Pow(x, int64 -1 ...) at opset 20: Pow-15
    types base and exponent apart, TVM's only Pow converter is ``_impl_v7`` (one type T), the judged
    gap rc-af8c595f10. The export's Pow is not its first node; the schema checks now read every
    node, so ``paths`` says ``unsupported`` (the torch rules run filed it as a crash)."""
    from opera.corpus import CorpusReader

    (inst,) = [i for i in CorpusReader([REPO / "harvested" / "torch.jsonl.gz"]) if i.id == "833192c56a7f737f5511"]
    assert inst.api == "torch.linalg.norm"
    outcome, rules = _rules_of(inst, "tvm-torch", ("paths",))
    assert outcome is Outcome.PASS
    found = rules["paths"]
    assert found["outcome"] == "unsupported", found
    assert "Pow node:" in found["message"] and "Pow._impl_v7" in found["message"], found


def test_onnx_targets_read_every_node_of_a_multi_node_model_for_gaps() -> None:
    """The ONNX targets' ``unimplemented_feature`` names the node of a multi-node model that uses
    what their converters do not implement, and says nothing of a model whose nodes they all do."""
    import onnx
    from onnx import TensorProto, helper

    from opera.run.targets import get_target
    from opera.templates import SingleOpModel

    def model(exponent: int) -> onnx.ModelProto:
        nodes = [helper.make_node("Abs", ["x"], ["a"]), helper.make_node("Pow", ["a", "e"], ["y"])]
        graph = helper.make_graph(
            nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])],
            [helper.make_tensor("e", exponent, [], [2])],
        )  # fmt: skip
        return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)])

    inst = _onnx("Abs", np.ones(3, np.float32))
    tvm = get_target("tvm-onnx")
    mixed = SingleOpModel(inst, model(TensorProto.INT64), [np.ones(3, np.float32)], ["x"])
    gap = tvm.unimplemented_feature(mixed)
    assert gap is not None and gap.startswith("Pow node:") and "_impl_v7" in gap, gap
    same = SingleOpModel(inst, model(TensorProto.FLOAT), [np.ones(3, np.float32)], ["x"])
    assert tvm.unimplemented_feature(same) is None


def test_batch_on_a_test_with_a_gap_where_the_library_agrees_with_neither_build_is_that_gap() -> None:
    """take_along_axis is GATHER with batch_dims=1 in TFLite, an option TVM's TFLite frontend never
    reads (the test's own verdict: unsupported). The batch and its slice then both carry the gap and
    differ from each other, the library agreeing with neither: the run of the human Keras corpus
    filed that as a batch finding."""
    inst = _corpus_instance("keras.jsonl.gz", "3e02bc31083638021204")
    assert inst.api == "keras.ops.take_along_axis"
    outcome, rules = _rules_of(inst, "tvm-keras", ("batch",))
    assert outcome is Outcome.UNSUPPORTED
    found = rules["batch"]
    assert found["outcome"] == "unsupported" and found["agrees_with_reference"] == "neither", found
    assert "the test's own coverage gap" in found["message"] and "signature" not in found


def test_paths_takes_tvms_own_words_for_a_topk_it_does_not_take_as_a_gap() -> None:
    """keras.ops.top_k(sorted=False) exports as TopK sorted=0, which TVM's ONNX frontend refuses
    in its own words ("TopK sorted must be 1 for Relax frontend"; ONNX leaves the order undefined
    there): unsupported, not a crash of the rule."""
    inst = _corpus_instance("keras.jsonl.gz", "13f59b23c98917a8e9bc")
    assert inst.api == "keras.ops.top_k"
    _, rules = _rules_of(inst, "tvm-keras", ("paths",))
    found = rules["paths"]
    assert found["outcome"] == "unsupported", found
    assert "TopK sorted must be 1 for Relax frontend" in found["message"]


def test_a_worker_lost_while_the_library_works_for_a_rule_is_no_finding_of_the_rule() -> None:
    """``paths`` reports its steps: "library" while tf2onnx (or torch.onnx) exports the model and
    onnxruntime runs the export, "" once the compiler's ONNX frontend takes it. A worker killed in
    the library's step (a mixed_float16 MultiHeadAttention's export ran for minutes under load and
    was filed as a ``timeout`` finding of the rule) leaves the rule not applicable; killed in the
    compiler's step, it is the rule's finding, as before."""
    from opera.outcomes import Stage, TestResult
    from opera.run.execution import execute_task, rule_death_result

    steps: list[tuple[str, str]] = []
    state = WorkerState(WorkerSettings(rules=("paths",)))
    x = np.linspace(-2, 2, 12, dtype=np.float32).reshape(3, 4)
    outcome = execute_task(TestTask(0, _torch_relu(x), "tvm-torch"), state, lambda stage: None, lambda name, partial, step: steps.append((name, step)))
    assert outcome.result is not None and outcome.result.extra["rules"]["paths"]["outcome"] == "pass"
    assert steps == [("paths", ""), ("paths", "library"), ("paths", "")]

    partial = TestResult("i", "keras.layers.MultiHeadAttention", "ov-keras", Outcome.PASS, Stage.COMPARE, duration=2.0)
    exporting = rule_death_result(partial, "paths", "timeout", 62.0, "no verdict after 60 s", "library")
    assert exporting.outcome is Outcome.PASS
    found = exporting.extra["rules"]["paths"]
    assert found["outcome"] == "not-applicable" and "signature" not in found and "did not finish" in found["message"]
    compiling = rule_death_result(partial, "paths", "timeout", 62.0, "no verdict after 60 s", "")
    assert compiling.extra["rules"]["paths"]["signature"] == "timeout:ov-keras:rule=paths:keras.layers.MultiHeadAttention"


def test_batch_on_an_output_that_differs_from_run_to_run_is_no_finding() -> None:
    """ONNX's ReduceSum over an empty axis on TVM returns uninitialized memory: the batch and its
    slice hold different garbage, and so does each build run again. The whole ONNX corpus's run
    filed it as a batch finding ("agrees with neither") where optlevel and reload, which run again
    first, said nondeterministic; batch now runs both builds again too."""
    pytest.importorskip("tvm")
    inst = _corpus_instance("onnx.jsonl.gz", "5ea3ff3bfdc8c3cd5ca9")
    assert inst.api == "onnx::ReduceSum"
    _, rules = _rules_of(inst, "tvm-onnx", ("batch",))
    found = rules["batch"]
    assert found["outcome"] == "nondeterministic", found
    assert "disagrees with itself on another run" in found["message"] and "signature" not in found


def _torch_call(api: str, *args: np.ndarray) -> OperatorInstance:
    return OperatorInstance(library="torch", api=api, kind=InstanceKind.FUNCTION, args=args, source=Source(suite="opera-tests", test=api))


def test_a_paths_finding_comes_with_a_standalone_reproducer_of_the_onnx_path(tmp_path) -> None:
    """OpenVINO's ONNX frontend broadcasts an empty (0, 1, 3) against (0, 10, 3) to (0, 1, 3) on
    the export of ``torch.gt`` (judged REAL; ov-torch gives torch's (0, 10, 3)). The rule's bug row
    carries a script that runs the export through ov-onnx alone and exits 1 while the defect is there."""
    import subprocess
    import sys

    inst = _torch_call("torch.gt", np.zeros((0, 1, 3), np.float32), np.zeros((0, 10, 3), np.float32))
    corpus = write(tmp_path / "c.jsonl", [inst])
    store = tmp_path / "s.db"
    args = ["run", str(corpus), "-t", "ov-torch", "--store", str(store), "--workers", "1", "--oracle", "paths", "-q"]
    assert main(args) == 0
    with ResultStore(store) as s:
        assert s.outcome_counts(1) == {"ov-torch": {"pass": 1}}
        [bug] = s.bugs(1)
    assert bug.signature == "inconsistent:ov-torch:rule=paths:converter=aten.gt.Tensor"
    assert bug.reproducer is not None and Path(bug.reproducer).name.endswith(".py")
    script = Path(bug.reproducer).read_text()
    assert "target:    ov-onnx" in script and "verdict:   inconsistent at stage compare" in script
    assert "import opera" not in script and "from opera" not in script
    shown = subprocess.run([sys.executable, bug.reproducer], capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert shown.returncode == 1 and "shape (0, 10, 3) vs (0, 1, 3)" in shown.stdout
    # the run's own verification ran it too
    assert bug.repro_status == "reproduces"



def test_a_transforms_crash_comes_with_a_reproducer_the_run_verifies(tmp_path) -> None:
    """TVM's default pipeline fails on ``x.unsqueeze(0).squeeze(0)`` of an empty tensor (judged
    REAL, bugs/oracles/tvm-torch-transforms-empty-unsqueeze-squeeze) where the plain ``torch.mul``
    passes: the rule's script is the rewritten model on tvm-torch, and its exception signs as the
    rule's signature without the rule."""
    empty = np.zeros((0, 1, 3), np.float32)
    corpus = write(tmp_path / "c.jsonl", [_torch_call("torch.mul", empty, empty)])
    store = tmp_path / "s.db"
    args = ["run", str(corpus), "-t", "tvm-torch", "--store", str(store), "--workers", "1", "--oracle", "transforms", "-q"]
    assert main(args) == 0
    with ResultStore(store) as s:
        [bug] = s.bugs(1)
    assert bug.signature == "crash:tvm-torch:rule=transforms:tvm/ir/transform.py:__call__:ValueError"
    assert bug.repro_status == "reproduces", bug.repro_detail
    assert bug.reproducer is not None and "verdict:   crash at stage compile" in Path(bug.reproducer).read_text()


def test_a_transforms_finding_on_a_test_that_failed_itself_gives_no_evidence() -> None:
    """Where the plain model did not pass, a script of the rewrite would show the test's own
    failure again under the rule's name: no evidence. Where it passed, the rewrite must compute the
    library's reference, at the stage the target failed."""
    from opera.outcomes import Stage
    from opera.run.rules import RuleContext
    from opera.run.rules.transforms import _evidence

    x = np.linspace(-2, 2, 12, dtype=np.float32).reshape(3, 4)
    reference = [np.maximum(x, 0)]

    def context(verdict: Outcome) -> RuleContext:
        return RuleContext(
            target="tvm-torch", built=None, converted=None, compiled=None, inputs=[x], reference=reference,
            outputs=reference, verdict=verdict, oracle=None, unsupported=None, build=lambda inst: inst,
        )  # fmt: skip

    from opera.templates import SingleOpModel

    built = SingleOpModel(_torch_relu(x), None, [x])
    assert _evidence(context(Outcome.INCONSISTENT), built) is None
    found = _evidence(context(Outcome.PASS), built, Stage.COMPILE)
    assert found is not None and found.stage is Stage.COMPILE and found.expected[0] is reference[0]
    assert found.built.inputs[0] is not x and (found.built.inputs[0] == x).all()


def test_a_rule_findings_script_is_judged_by_the_signature_its_target_gives() -> None:
    from opera.reproduce.verify import shown_as

    paths = "crash:ov-torch:rule=paths:ov-onnx:src/core/src/shape_util.cpp:OpConversionFailure"
    assert shown_as("ov-torch", paths) == ("ov-onnx", "crash:ov-onnx:src/core/src/shape_util.cpp:OpConversionFailure")
    rewrite = "crash:tvm-torch:rule=transforms:tvm/ir/transform.py:__call__:ValueError"
    assert shown_as("tvm-torch", rewrite) == ("tvm-torch", "crash:tvm-torch:tvm/ir/transform.py:__call__:ValueError")
    own = "crash:tvm-onnx:tvm/relax/frontend/onnx/onnx_frontend.py:_impl_v13:KeyError"
    assert shown_as("tvm-onnx", own) == ("tvm-onnx", own)
