"""Root causes (issue 13, item 1): instances built to share a cause or not, and ``opera triage`` end
to end on a real run.

The clustering tests give ``find_root_causes`` real ``OperatorInstance``s and the ``TestResult``s a
run would store for them: what separates the failing instances of a signature from the passing
ones names the cause, and signatures that are one defect are merged.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from _run_fixtures import ONNX_EXTRA, fault, relus, write

from opera.cli import main
from opera.model import InstanceKind, OperatorInstance, Source
from opera.outcomes import Outcome, Stage, TestResult
from opera.triage.root_causes import EVERY_INSTANCE, UNKNOWN, error_line, find_root_causes, raw_error_line


def _resize(k: int, **attrs: object) -> OperatorInstance:
    x = np.arange(16, dtype=np.float32).reshape(1, 1, 4, 4) + k
    return OperatorInstance(
        library="onnx",
        api="onnx::Resize",
        kind=InstanceKind.ONNX_NODE,
        inputs=(x, np.array([], np.float32), np.array([1, 1, 2, 2], np.float32)),
        kwargs=dict(attrs),
        extra=dict(ONNX_EXTRA, opset=19),
        source=Source(suite="opera-tests", test=f"resize{k}"),
    )


def _cast(k: int, dtype: str) -> OperatorInstance:
    return OperatorInstance(
        library="onnx",
        api="onnx::Cast",
        kind=InstanceKind.ONNX_NODE,
        inputs=(np.full((2, k + 1), 1, dtype=dtype),),
        kwargs={"to": 1},
        extra=dict(ONNX_EXTRA),
        source=Source(suite="opera-tests", test=f"cast{k}"),
    )


def _result(inst: OperatorInstance, outcome: Outcome, signature: str | None = None, message: str = "") -> TestResult:
    return TestResult(inst.id, inst.api, "tvm-onnx", outcome, Stage.CONVERT, signature=signature, message=message)


def _crash(exc_line: str, frame: str = "convert") -> str:
    return (
        "Traceback (most recent call last):\n"
        f'  File "/x/site-packages/tvm/relax/frontend/onnx/onnx_frontend.py", line 10, in {frame}\n'
        "    do()\n"
        f"{exc_line}\n"
    )


def test_one_signature_with_two_defects_splits_by_what_the_failures_share() -> None:
    passing = [_resize(k, mode="nearest") for k in range(3)]
    antialias = [_resize(10 + k, mode="linear", antialias=1) for k in range(2)]
    policy = [_resize(20, mode="nearest", keep_aspect_ratio_policy="not_larger")]
    sig = "inconsistent:tvm-onnx:converter=Resize._impl_v18"
    results = [_result(i, Outcome.PASS) for i in passing]
    results += [_result(i, Outcome.INCONSISTENT, sig) for i in antialias + policy]
    instances = {i.id: i for i in passing + antialias + policy}
    causes = find_root_causes(results, instances)
    assert len(causes) == 2
    by_feature = {c.features: c for c in causes}
    assert by_feature[("attribute:antialias",)].instances == [i.id for i in antialias]
    assert by_feature[("attribute:keep_aspect_ratio_policy",)].instances == [policy[0].id]
    # stable ids, and the same instances give the same root causes in another order
    again = find_root_causes(list(reversed(results)), instances)
    assert sorted(c.id for c in again) == sorted(c.id for c in causes)


def test_dtype_explains_failures_and_an_operator_that_always_fails_says_so() -> None:
    good = [_cast(k, "float32") for k in range(3)]
    bad = [_cast(k, "float16") for k in range(2)]
    sig = "inconsistent:tvm-onnx:converter=Cast._impl_v13"
    results = [_result(i, Outcome.PASS) for i in good] + [_result(i, Outcome.INCONSISTENT, sig) for i in bad]
    relu = relus(2)
    relu_sig = "inconsistent:tvm-onnx:converter=Relu._impl_v14"
    results += [_result(i, Outcome.INCONSISTENT, relu_sig) for i in relu]
    causes = find_root_causes(results, {i.id: i for i in good + bad + relu})
    features = {c.apis[0]: c.features for c in causes}
    assert features == {"onnx::Cast": ("dtype:float16",), "onnx::Relu": (EVERY_INSTANCE,)}
    # the example is the smallest failing instance
    cast = next(c for c in causes if c.apis == ["onnx::Cast"])
    assert cast.example == bad[0].id
    # without the corpus nothing can be told apart: one root cause per signature
    blind = find_root_causes(results, {})
    assert sorted(c.features for c in blind) == [(UNKNOWN,), (UNKNOWN,)]


def test_error_lines_split_one_frame_and_merge_across_frames() -> None:
    a, b, c, d = relus(4)
    frame_sig = "crash:tvm-onnx:tvm/relax/frontend/onnx/onnx_frontend.py:_impl_v1:KeyError"
    specific = "TypeError: Binary operators must have the same datatype for both operands (float32 vs int64)"
    results = [
        _result(a, Outcome.CRASH, frame_sig, _crash("KeyError: 'num_heads'")),
        _result(b, Outcome.CRASH, frame_sig, _crash("KeyError: 'axis'")),
        # one specific message reached through two frames (and with other dtypes): one defect
        _result(c, Outcome.CRASH, "crash:tvm-onnx:f.py:_binary:TypeError", _crash(specific)),
        _result(d, Outcome.CRASH, "crash:tvm-onnx:g.py:_pow:TypeError", _crash(specific.replace("int64", "uint8"))),
    ]
    causes = find_root_causes(results, {i.id: i for i in (a, b, c, d)})
    assert len(causes) == 3
    merged = next(cause for cause in causes if len(cause.signatures) == 2)
    assert sorted(merged.instances) == sorted([c.id, d.id])
    assert {cause.error for cause in causes if cause.signatures == [frame_sig]} == {
        "KeyError: 'num_heads'",
        "KeyError: 'axis'",
    }


def test_native_crashes_at_one_faulting_place_are_one_root_cause_across_operators() -> None:
    """Dead workers are signed per operator and signal; the place their signal handler reported
    merges them: four ov-torch operators of the generated corpus died at one instruction of
    OpenVINO's Broadcast constant folding (run 6, re-run with the handler)."""
    a, b, c, d = relus(4)
    place = "libopenvino.so.2641+0xe103f6 < libopenvino.so.2641+0x7274c1 (ov::op::util::BroadcastBase::evaluate_broadcast)"

    def died(inst: OperatorInstance, api: str, where: str) -> TestResult:
        message = f"worker died (SIGFPE) during convert{where}"
        return TestResult(inst.id, api, "ov-torch", Outcome.NATIVE_CRASH, Stage.CONVERT,
                          signature=f"native-crash:ov-torch:{api}:SIGFPE", message=message)

    results = [
        died(a, "torch.matmul", f" at {place}"),
        died(b, "torch.heaviside", f" at {place}, alone in a fresh worker (a first worker: worker died (SIGFPE) during convert at {place} after 3 other test(s))"),
        died(c, "torch.take", " at libopenvino_intel_cpu_plugin.so+0xb0636b < libtbb.so.12+0x2f4d3"),
        died(d, "torch.eye", ""),  # no handler report: keyed by its signature, as before
    ]
    causes = find_root_causes(results, {i.id: i for i in (a, b, c, d)})
    assert len(causes) == 3, [c.to_json() for c in causes]
    merged = next(cause for cause in causes if len(cause.apis) == 2)
    assert merged.apis == ["torch.heaviside", "torch.matmul"]
    assert merged.error == "SIGFPE at libopenvino.so.2641+0xe103f6"
    assert {cause.error for cause in causes} == {merged.error, "SIGFPE at libopenvino_intel_cpu_plugin.so+0xb0636b", ""}


def test_the_counters_in_generated_names_do_not_split_a_defect() -> None:
    """One OpenVINO defect on the generated Keras corpus (a model whose output is its input loses
    the output's name) was 138 root causes, one per Keras tensor name; quoted names that are not
    counters still split."""
    a, b, c = relus(3)
    sig = "crash:ov-keras:InterfaceError:OpenVINO model has no result for declared output N"

    def lost(inst: OperatorInstance, name: str) -> TestResult:
        line = f"opera.run.targets._ov_io.InterfaceError: declared outputs ['{name}'], result names [['input_0']]"
        return TestResult(inst.id, "keras.ops.ones_like", "ov-keras", Outcome.CRASH, Stage.RUN, signature=sig, message=_crash(line))

    causes = find_root_causes([lost(a, "keras_tensor_80"), lost(b, "keras_tensor_151"), lost(c, "mask")], {i.id: i for i in (a, b, c)})
    assert sorted(len(cause.instances) for cause in causes) == [1, 2]
    assert "declared outputs ['keras_tensor_N'], result names [['input_N']]" in max(causes, key=lambda c: len(c.instances)).error
    assert error_line(_crash("RuntimeError: ReduceSum node with name 'functional_166_1/Sum_2' gets 3")) == (
        "RuntimeError: ReduceSum node with name 'functional_N_N/Sum_N' gets N"
    )
    assert error_line(_crash("KeyError: '_impl_v13'")) == "KeyError: '_impl_v13'"


def test_error_line_reads_the_specific_line_of_a_native_message() -> None:
    message = _crash(
        "openvino._pyopenvino.OpConversionFailure: Check 'false' failed at "
        "src/frontends/common_translators/src/unconverted_ops_report.cpp:151:\n"
        "FrontEnd API failed with OpConversionFailure:\n-- Mod-28 with a message:\n"
        "Check 'x.get_element_type().is_integral()' failed at src/frontends/onnx/frontend/src/op/mod.cpp:27:\n"
        "the input must be integral, got f32"
    )
    assert raw_error_line(message) == "openvino._pyopenvino.OpConversionFailure: the input must be integral, got f32"
    assert error_line(message) == "openvino._pyopenvino.OpConversionFailure: the input must be integral, got DT"


def test_opera_triage_writes_a_report_per_root_cause(tmp_path: Path, capsys) -> None:
    corpus = write(tmp_path / "c.jsonl", [fault("raise", k) for k in range(3)] + relus(2, start=5))
    store = tmp_path / "opera.db"
    assert main(["run", str(corpus), "-t", "test-faults", "-t", "test-wrong", "--store", str(store), "-q", "--no-verify"]) == 0
    capsys.readouterr()
    out = tmp_path / "triage"
    assert main(["triage", "--store", str(store), "-o", str(out), "-q"]) == 0
    printed = capsys.readouterr().out
    ledger = json.loads((out / "root-causes.json").read_text())
    # test-faults: the three "raise" instances are one crash; test-wrong: every instance is wrong
    by_target = {entry["target"]: entry for entry in ledger}
    assert set(by_target) == {"test-faults", "test-wrong"}
    assert by_target["test-faults"]["instances"] == 3 and by_target["test-faults"]["kind"] == "crash"
    assert len(by_target["test-faults"]["instance_ids"]) == 3
    assert by_target["test-faults"]["example_instance"] in by_target["test-faults"]["instance_ids"]
    # the injected fault rides on the (1, 3) inputs of fault(); the passing Relus are (2, 3)
    assert by_target["test-faults"]["features"] == ["value:in0=('tensor','float32',2,(1,2))"]
    assert by_target["test-wrong"]["features"] == [EVERY_INSTANCE]
    report = (out / f"{by_target['test-faults']['id']}.md").read_text()
    assert "RuntimeError: injected fault in the test-faults target" in report
    assert "```python" in report and "Opera reproducer" in report  # the standalone script inline
    assert "2 signatures -> 2 root causes" in printed
    # opera bugs shows the same clustering: root cause -> its signatures -> example instances
    assert main(["bugs", "--store", str(store), "--root-causes"]) == 0
    listing = capsys.readouterr().out
    crash = by_target["test-faults"]
    block = listing[listing.index(crash["id"]) :].splitlines()
    assert "3 test(s)" in block[0] and block[1].strip() == "error: " + crash["error"]
    assert block[2].strip() == crash["signatures"][0] and crash["example_instance"] in block[3]


def test_opera_triage_reduce_reports_the_reduced_instance(tmp_path: Path, capsys) -> None:
    """--reduce: each root cause's example shrinks on its target (isolated, like any test), still
    fails with its signature, and the report's reproducer is the reduced instance's."""
    wide = OperatorInstance(
        library="onnx",
        api="onnx::Relu",
        kind=InstanceKind.ONNX_NODE,
        inputs=(np.linspace(-1, 1, 60, dtype=np.float32).reshape(3, 4, 5),),
        extra=dict(ONNX_EXTRA),
        source=Source(suite="opera-tests", test="wide"),
    )
    corpus = write(tmp_path / "c.jsonl", [wide])
    store = tmp_path / "opera.db"
    assert main(["run", str(corpus), "-t", "test-wrong", "--store", str(store), "-q", "--no-verify"]) == 0
    out = tmp_path / "triage"
    assert main(["triage", "--store", str(store), "-o", str(out), "-q", "--reduce", "--reduce-budget", "60"]) == 0
    capsys.readouterr()
    (entry,) = json.loads((out / "root-causes.json").read_text())
    reduction = entry["reduction"]
    assert reduction["still_fails"] and reduction["original"] == entry["example_instance"]
    assert reduction["size_after"] < reduction["size_before"] and reduction["steps"]
    report = (out / f"{entry['id']}.md").read_text()
    assert f"- reduced: {reduction['original']} -> {reduction['reduced']}" in report
    assert f"instance:  {reduction['reduced']} (onnx::Relu)" in report  # the inline script is the reduced one's


def test_a_reduced_instance_must_keep_what_separates_its_root_cause() -> None:
    """Reduction must not drift to another defect: the features that explain the root cause (and
    that the example has) are required of every candidate."""
    from opera.triage.root_causes import keeps_features, required_features

    passing = [_resize(k, mode="nearest") for k in range(2)]
    failing = [_resize(10, mode="linear", antialias=1)]
    sig = "inconsistent:tvm-onnx:converter=Resize._impl_v18"
    results = [_result(i, Outcome.PASS) for i in passing] + [_result(failing[0], Outcome.INCONSISTENT, sig)]
    (cause,) = find_root_causes(results, {i.id: i for i in passing + failing})
    required = required_features(cause, failing[0])
    assert required == {"attribute:antialias"}
    assert keeps_features(failing[0], required)
    dropped = _resize(10, mode="linear")  # the same instance without antialias
    assert not keeps_features(dropped, required)
    # "every instance" requires nothing
    relu = relus(1)
    (always,) = find_root_causes([_result(relu[0], Outcome.INCONSISTENT, "inconsistent:tvm-onnx:Relu")], {relu[0].id: relu[0]})
    assert required_features(always, relu[0]) == set()


def test_opera_triage_reduces_only_the_root_causes_the_ledger_does_not_know(tmp_path: Path, capsys) -> None:
    """A whole-corpus triage spent most of its time re-reducing root causes already in the ledger:
    with a ledger, --reduce shrinks the new ones only (the known one keeps its original example),
    --reduce-known all of them."""
    wide = OperatorInstance(
        library="onnx", api="onnx::Relu", kind=InstanceKind.ONNX_NODE,
        inputs=(np.linspace(-1, 1, 60, dtype=np.float32).reshape(3, 4, 5),), extra=dict(ONNX_EXTRA),
        source=Source(suite="opera-tests", test="wide"),
    )  # fmt: skip
    corpus = write(tmp_path / "c.jsonl", [wide])
    store = tmp_path / "opera.db"
    assert main(["run", str(corpus), "-t", "test-wrong", "--store", str(store), "-q", "--no-verify"]) == 0
    out = tmp_path / "first"
    assert main(["triage", "--store", str(store), "-o", str(out), "-q", "--no-reproducers"]) == 0
    capsys.readouterr()
    (entry,) = json.loads((out / "root-causes.json").read_text())
    ledger = tmp_path / "ledger.toml"
    ledger.write_text(
        f'[[bug]]\nid = "{entry["id"]}"\ntarget = "test-wrong"\nsignature = "{entry["signatures"][0]}"\n'
        'status = "new"\nverdict = "REAL"\ntitle = "the test target returns wrong values"\n',
        encoding="utf-8",
    )
    for extra, reduced in (([], False), (["--reduce-known"], True)):
        out = tmp_path / f"reduce{len(extra)}"
        args = ["triage", "--store", str(store), "-o", str(out), "-q", "--reduce", "--ledger", str(ledger), *extra]
        assert main(args) == 0
        err = capsys.readouterr().err
        (entry,) = json.loads((out / "root-causes.json").read_text())
        assert entry["ledger"]["known"] is True
        assert (entry["reduction"] is not None) is reduced, entry
        assert ("the ledger does not know" in err) is not reduced


def test_a_stored_failure_that_today_is_undefined_is_reclassified_not_flaky(tmp_path: Path, capsys) -> None:
    """The whole-corpus store held failures older than the rules that now call them undefined
    (LpPool with p = 0: the Lp norm has no value there). Reducing one re-checks the original first;
    it is then no chance that it passes, and the triage says what it is today."""
    from opera.store import ResultStore

    pool = OperatorInstance(
        library="onnx", api="onnx::LpPool", kind=InstanceKind.ONNX_NODE,
        inputs=(np.linspace(-1, 1, 16, dtype=np.float32).reshape(1, 1, 4, 4),),
        kwargs={"kernel_shape": [2, 2], "p": 0}, extra=dict(ONNX_EXTRA, opset=18),
        source=Source(suite="opera-tests", test="lppool-p0"),
    )  # fmt: skip
    corpus = write(tmp_path / "c.jsonl", [pool])
    store = tmp_path / "opera.db"
    signature = "crash:tvm-onnx:tvm/relax/frontend/onnx/onnx_frontend.py:_impl_v1:ZeroDivisionError"
    with ResultStore(store) as s:  # as an Opera without the domain rule stored it
        run = s.create_run({}, tool_version="old", versions={}, corpus=[str(corpus)], planned=[(pool.id, "tvm-onnx")])
        s.add_result(run, _result(pool, Outcome.CRASH, signature, _crash("ZeroDivisionError: division by zero", "_impl_v1")))
        s.set_run_status(run, "complete")
    out = tmp_path / "t"
    assert main(["triage", "--store", str(store), "-o", str(out), "-q", "--reduce", "--no-reproducers"]) == 0
    (entry,) = json.loads((out / "root-causes.json").read_text())
    assert entry["reduction"]["stopped_because"] == "reclassified" and entry["reduction"]["flaky"] is False
    assert entry["reduction"]["recheck"].startswith("undefined"), entry["reduction"]
    assert entry["reduction"]["still_fails"] is False
    assert "reclassified: today's Opera calls its example undefined" in capsys.readouterr().err


def test_an_example_nothing_shrinks_still_fails_as_its_re_check_said(tmp_path: Path, capsys) -> None:
    """A 0-d Relu on the off-by-one test target has nothing left to drop: the reduction keeps
    the original, whose re-check failed the same way, so it still fails (the stored result, read
    back without the run's details, used to be compared instead and called it changed)."""
    tiny = OperatorInstance(
        library="onnx", api="onnx::Relu", kind=InstanceKind.ONNX_NODE, inputs=(np.array(0, np.float32),),
        extra=dict(ONNX_EXTRA), source=Source(suite="opera-tests", test="tiny"),
    )  # fmt: skip
    corpus = write(tmp_path / "c.jsonl", [tiny])
    store = tmp_path / "opera.db"
    assert main(["run", str(corpus), "-t", "test-wrong", "--store", str(store), "-q", "--no-verify"]) == 0
    out = tmp_path / "t"
    assert main(["triage", "--store", str(store), "-o", str(out), "-q", "--reduce", "--no-reproducers"]) == 0
    (entry,) = json.loads((out / "root-causes.json").read_text())
    assert entry["reduction"]["accepted"] == 0 and entry["reduction"]["stopped_because"] == "fixed point"
    assert entry["reduction"]["still_fails"] is True
    assert "no longer fails the same way" not in capsys.readouterr().err
