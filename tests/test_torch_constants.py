"""Torch function instances hold their weights as constants, as a real model does (issue 11, class 1).

``templates/torch_template.py`` used to turn every tensor argument of a function instance into a
graph input: ``torch.nn.functional.conv3d``'s integer weight became a runtime parameter, and
OpenVINO's CPU plugin crashed on it in ``reference.cpp`` the same way for every dtype, hiding what
the constant-weight model (the one the library test ran) does. The default form now keeps the data
tensor (the first tensor argument) as the one graph input and every other tensor argument as a
buffer of the wrapper module, which ``torch.export`` lifts as a ``BUFFER`` and the frontends bind
as a constant; ``tensor_args="inputs"`` keeps the old form as a variant.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from _run_fixtures import verdict_in_process

torch = pytest.importorskip("torch")

from opera.commands.run import add_arguments, run_settings_from_args  # noqa: E402
from opera.corpus import CorpusReader  # noqa: E402
from opera.model import InstanceKind, OperatorInstance, Source  # noqa: E402
from opera.outcomes import Outcome, Stage, TestResult  # noqa: E402
from opera.reproduce.write import write_reproducer  # noqa: E402
from opera.run.execution import WorkerState  # noqa: E402
from opera.run.executors import WorkerSettings  # noqa: E402
from opera.run.targets import get_target  # noqa: E402
from opera.run.targets._artifacts import export_torch  # noqa: E402
from opera.templates import get_template  # noqa: E402
from opera.templates.torch_template import CallWithConstants  # noqa: E402

HARVESTED = Path(__file__).resolve().parents[1] / "harvested" / "torch.jsonl.gz"

# Real instances of the shipped corpus (ids are content hashes: they change only with the instance)
CONV2D = "b3908a0fd15419d1455f"  # opinfo nn.functional.conv2d: x[1,3,4,4], weight[3,3,3,3], bias[3], f32
# opinfo nn.functional.conv3d on int32 tensors: with the weight as a graph input OpenVINO's CPU
# plugin crashed ("reference.cpp", the same crash for every dtype); with a constant weight it passes
CONV3D_INT = "bbd34b8ee4b56fd91a8a"
# opinfo nn.functional.batch_norm with training=True: writes its running statistics (constants)
BATCH_NORM_TRAINING = "62ada8fffb740a838bcc"
# opinfo sub: x[0,1,3] - other[0,10,3]; torch.from_numpy gives the empty constant strides (0, 0, 0),
# which TVM's runtime rejected ("Mismatched B.strides ... expected to be compact array")
SUB_EMPTY = "72f51159fbc3b9b9c7e6"


@pytest.fixture(scope="module")
def corpus() -> dict[str, OperatorInstance]:
    wanted = {CONV2D, CONV3D_INT, BATCH_NORM_TRAINING, SUB_EMPTY}
    found: dict[str, OperatorInstance] = {}
    for inst in CorpusReader([HARVESTED]):
        if inst.id in wanted:
            found[inst.id] = inst
            if len(found) == len(wanted):
                break
    assert set(found) == wanted, f"missing from {HARVESTED.name}: {sorted(wanted - set(found))}"
    return found


def _instance(api: str, *args: object, **kwargs: object) -> OperatorInstance:
    return OperatorInstance(
        library="torch",
        api=api,
        kind=InstanceKind.FUNCTION,
        args=tuple(args),
        kwargs=dict(kwargs),
        source=Source(suite="opera-tests", test=api),
    )


def _array(*shape: int, dtype: str = "float32", start: float = 0.0) -> np.ndarray:
    return (np.arange(int(np.prod(shape)), dtype=np.float64).reshape(shape) / 7 + start).astype(dtype)


# -- the two forms of a real conv2d instance ---------------------------------------------------


def test_default_form_holds_weight_and_bias_as_constants(corpus) -> None:
    inst = corpus[CONV2D]
    template = get_template("torch")
    built = template.build(inst)
    x, weight, bias = (np.asarray(a) for a in inst.args)
    assert len(built.inputs) == 1 and built.input_names == ["input_0"]
    np.testing.assert_array_equal(built.inputs[0], x)
    assert isinstance(built.model, CallWithConstants)
    assert built.model.constant_names == ("arg1", "arg2")
    np.testing.assert_array_equal(built.model.arg1.numpy(), weight)
    np.testing.assert_array_equal(built.model.arg2.numpy(), bias)
    assert built.details["tensor_args"] == "constants"

    # torch.export lifts them as buffers (bound as constants by the frontends), not user inputs
    program = export_torch(built)
    signature = program.graph_signature
    assert len(signature.user_inputs) == 1
    assert sorted(signature.inputs_to_buffers.values()) == ["arg1", "arg2"]
    np.testing.assert_array_equal(program.state_dict["arg1"].numpy(), weight)


def test_inputs_form_has_every_tensor_as_a_graph_input(corpus) -> None:
    inst = corpus[CONV2D]
    built = get_template("torch").build(inst, tensor_args="inputs")
    assert len(built.inputs) == 3 and built.input_names == ["input_0", "input_1", "input_2"]
    for got, arg in zip(built.inputs, inst.args, strict=True):
        np.testing.assert_array_equal(got, np.asarray(arg))
    assert built.model.constant_names == ()
    assert len(export_torch(built).graph_signature.user_inputs) == 3


@pytest.mark.parametrize("instance_id", [CONV2D, CONV3D_INT, BATCH_NORM_TRAINING])
def test_reference_is_the_same_in_both_forms(corpus, instance_id: str) -> None:
    template = get_template("torch")
    inst = corpus[instance_id]
    constants = template.reference(template.build(inst))
    inputs = template.reference(template.build(inst, tensor_args="inputs"))
    assert len(constants) == len(inputs) >= 1
    for a, b in zip(constants, inputs, strict=True):
        assert a.dtype == b.dtype
        np.testing.assert_array_equal(a, b)


def test_a_constant_the_operator_writes_is_restored_after_the_reference(corpus) -> None:
    """batch_norm(training=True) updates running_mean/var (constants here) in place: both
    reference runs and the compilers must start from the values the instance recorded."""
    template = get_template("torch")
    inst = corpus[BATCH_NORM_TRAINING]
    built = template.build(inst)
    before = {k: v.clone() for k, v in built.model.constants().items()}
    assert {"arg1", "arg2"} <= set(before)  # running_mean, running_var
    first = template.reference(built)
    second = template.reference(built)
    for k, v in built.model.constants().items():
        torch.testing.assert_close(v, before[k], rtol=0, atol=0)
    for a, b in zip(first, second, strict=True):
        np.testing.assert_array_equal(a, b)


def test_constants_have_the_strides_torch_gives_them(corpus) -> None:
    built = get_template("torch").build(corpus[SUB_EMPTY])
    (constant,) = built.model.constants().values()
    assert constant.numel() == 0
    assert constant.stride() == torch.empty(constant.shape).stride()


def test_bad_form_is_refused(corpus) -> None:
    with pytest.raises(ValueError, match="tensor_args"):
        get_template("torch").build(corpus[CONV2D], tensor_args="params")


# -- the rule: the first tensor argument is the data, the others constants ----------------------


def test_rule_on_calls_with_several_data_tensors() -> None:
    template = get_template("torch")
    a, b, c = _array(2, 3), _array(2, 3, start=1.0), _array(2, 3, start=-1.0)

    # x + constant: the second operand is a constant (a valid, real model)
    built = template.build(_instance("torch.add", a, b))
    assert len(built.inputs) == 1 and built.model.constant_names == ("arg1",)

    # the data tensor is the first item of a top-level list (torch.cat([x, const]))
    built = template.build(_instance("torch.cat", [a, b, c], dim=0))
    np.testing.assert_array_equal(built.inputs[0], a)
    assert built.model.constant_names == ("arg0_1", "arg0_2")

    # the first tensor after a non-tensor argument (torch.einsum's equation)
    built = template.build(_instance("torch.einsum", "ij,kj->ik", [a, b]))
    np.testing.assert_array_equal(built.inputs[0], a)
    assert built.model.constant_names == ("arg1_1",)

    # passed by keyword only: the one under input/self, whatever the keyword order
    built = template.build(_instance("torch.add", other=b, input=a))
    np.testing.assert_array_equal(built.inputs[0], a)
    assert built.model.constant_names == ("kw_other",)

    # a scalar first argument is not a tensor: the data is the first tensor
    built = template.build(_instance("torch.where", a > 0.5, a, 0.0))
    assert len(built.inputs) == 1 and built.inputs[0].dtype == np.bool_

    for inst in (_instance("torch.add", a, b), _instance("torch.cat", [a, b, c], dim=0)):
        one = template.build(inst)
        every = template.build(inst, tensor_args="inputs")
        assert len(every.inputs) == len(one.inputs) + len(one.model.constant_names)
        for x, y in zip(template.reference(one), template.reference(every), strict=True):
            np.testing.assert_array_equal(x, y)


def test_every_function_instance_with_a_tensor_keeps_exactly_one_graph_input() -> None:
    """On a slice of the real corpus: one graph input whenever the call has a tensor (never zero,
    so no model turns into a constant the frontend folds away), none when it has none."""
    template = get_template("torch")
    checked = 0
    for k, inst in enumerate(CorpusReader([HARVESTED])):
        if k >= 3000:
            break
        if inst.kind != InstanceKind.FUNCTION or inst.valid is False or not inst.migratable:
            continue
        try:
            built = template.build(inst)
            every = template.build(inst, tensor_args="inputs")
        except Exception:
            continue
        expected = 1 if every.inputs else 0
        assert len(built.inputs) == expected, (inst.api, inst.id)
        assert len(built.inputs) + len(built.model.constant_names) == len(every.inputs), (inst.api, inst.id)
        checked += 1
    assert checked > 1000


# -- the settings and the CLI ------------------------------------------------------------------


def test_worker_settings_and_cli_flag() -> None:
    assert WorkerSettings().torch_tensor_args == "constants"
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    default = parser.parse_args(["corpus.jsonl", "-t", "ov-torch"])
    assert default.torch_tensor_args == "constants"
    assert run_settings_from_args(default).torch_tensor_args == "constants"
    variant = parser.parse_args(["corpus.jsonl", "-t", "ov-torch", "--torch-tensor-args", "inputs"])
    assert run_settings_from_args(variant).torch_tensor_args == "inputs"
    # the run's config carries it to every worker
    from opera.run.runner import RunConfig, _settings

    config = RunConfig(corpus=["corpus.jsonl"], targets=["ov-torch"], torch_tensor_args="inputs")
    assert _settings(config, 1).torch_tensor_args == "inputs"
    assert RunConfig.from_json(config.to_json()).torch_tensor_args == "inputs"  # --resume keeps it
    with pytest.raises(SystemExit):
        parser.parse_args(["corpus.jsonl", "--torch-tensor-args", "params"])


# -- the frontends on the constants form ---------------------------------------------------------


def _verdict(state: WorkerState, inst: OperatorInstance, target: str) -> TestResult:
    return verdict_in_process(state, inst, target)


@pytest.mark.slow
@pytest.mark.parametrize("target", ["ov-torch", "tvm-torch", "inductor-torch"])
def test_conv2d_with_constant_weights_passes(corpus, state: WorkerState, target: str) -> None:
    result = _verdict(state, corpus[CONV2D], target)
    assert result.outcome is Outcome.PASS, (result.outcome, result.stage, (result.message or "")[-600:])
    assert result.distance is not None and result.distance < 1e-3


@pytest.mark.slow
def test_integer_conv3d_with_constant_weights_passes_on_openvino(corpus, state: WorkerState) -> None:
    """The instance whose weights-as-inputs model crashed OpenVINO's CPU plugin (reference.cpp):
    as the model the library test ran, it converts, compiles and matches."""
    result = _verdict(state, corpus[CONV3D_INT], "ov-torch")
    assert result.outcome is Outcome.PASS, (result.outcome, result.stage, (result.message or "")[-600:])


@pytest.mark.slow
def test_empty_constant_passes_on_tvm(corpus, state: WorkerState) -> None:
    result = _verdict(state, corpus[SUB_EMPTY], "tvm-torch")
    assert result.outcome is Outcome.PASS, (result.outcome, result.stage, (result.message or "")[-600:])


@pytest.mark.slow
@pytest.mark.parametrize("target", ["ov-torch", "inductor-torch"])
def test_reproducer_of_the_constants_form_runs_on_its_own(corpus, tmp_path, target: str) -> None:
    """The script feeds the one graph input; the weights travel inside the artifact (the exported
    program's buffers, or the eager call's constants registered as the script's buffers)."""
    inst = corpus[CONV2D]
    result = TestResult(
        instance_id=inst.id, api=inst.api, target=target, outcome=Outcome.INCONSISTENT, stage=Stage.COMPARE
    )
    path = write_reproducer(inst, get_target(target), result, tmp_path)
    assert path is not None
    env = {**os.environ, "CI": "true"}
    proc = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=600, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    assert "not reproduced" in proc.stdout
