"""The GPU target ``inductor-torch-cuda`` on instances of the shipped corpus that the first run on a
GPU machine (an H100, torch 2.11 + CUDA 13; docs/results.md, "inductor-torch-cuda") misjudged.

Where there is no CUDA device the verdict tests skip (``verdict_in_process``); ``placed_on`` is
checked everywhere on torch's ``meta`` device, which moves the same way a GPU does.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from _run_fixtures import verdict_in_process
from test_verdicts_gaps_library import _by_id

from opera.outcomes import Outcome
from opera.run.execution import WorkerState
from opera.run.targets.inductor import placed_on
from opera.templates import get_template

LOGSPACE_ON_CPU = "a0f0b27b23436cfe90da"  # torch.logspace(0, x, 2, 1.1, device="cpu", dtype=torch.float32)


def test_a_call_that_names_the_cpu_creates_its_tensors_on_the_targets_device() -> None:
    """The CPU suite's torch.logspace(..., device="cpu"): moved to a GPU as written, the compiled
    graph mixed devices and Dynamo refused it (16 crashes, one signature, all the harness's)."""
    built = get_template("torch").build(_by_id("torch", LOGSPACE_ON_CPU), 0)
    assert str(built.model._kwargs_template["device"]) == "cpu"
    moved = placed_on(built.model, "meta")
    assert moved._kwargs_template["device"] == "meta"
    inputs = [torch.from_numpy(x).to("meta") for x in built.inputs]
    assert moved(*inputs).device.type == "meta"
    assert str(built.model._kwargs_template["device"]) == "cpu"  # the reference's model is untouched
    assert built.model(*[torch.from_numpy(x) for x in built.inputs]).device.type == "cpu"
    # the transforms rule wraps the call in a module of its own (a helper, a branch): the GPU run's
    # `--oracle all` timed out there until the wrapped call's keyword moved too
    from opera.run.rules.transforms import _wrap

    wrapped = placed_on(_wrap(built.model, "helper"), "meta")
    assert wrapped.inner._kwargs_template["device"] == "meta"


def test_the_reproducer_moves_the_call_to_the_device_as_the_target_does(tmp_path, monkeypatch) -> None:
    """The GPU target's reproducer script runs the same call: the model and the call's device
    keyword on the device. Checked on ``meta`` with torch.compile made the identity (Inductor has no
    meta backend): the script's result is a meta tensor, and a CPU one without the keyword's move."""

    from opera.outcomes import Outcome as O
    from opera.outcomes import Stage, TestResult
    from opera.reproduce.write import write_reproducer
    from opera.run.targets.inductor import InductorCudaTarget

    class OnMeta(InductorCudaTarget):
        device = "meta"

    inst = _by_id("torch", LOGSPACE_ON_CPU)
    built = get_template("torch").build(inst, 0)
    result = TestResult(instance_id=inst.id, api=inst.api, target="inductor-torch-cuda", outcome=O.CRASH, stage=Stage.COMPILE, signature="crash:x", message="x")
    script = write_reproducer(inst, OnMeta(), result, tmp_path, built=built, reference=[np.zeros(2, np.float32)])
    assert script is not None
    monkeypatch.setattr(torch, "compile", lambda model, **kw: model)
    namespace: dict = {"__name__": "reproducer"}
    with pytest.raises(NotImplementedError, match="meta"):  # a meta tensor's values cannot be read back
        exec(compile(script.read_text(), str(script), "exec"), namespace)
    assert namespace["result"].device.type == "meta"
    assert namespace["spec"]["kwargs"]["device"] == "meta"


@pytest.mark.slow
@pytest.mark.parametrize(
    ("instance_id", "outcome", "words"),
    [
        # cuDNN has no int64 convolution and "addmm_cuda" no Long: torch itself cannot run them there
        ("31fdd8b48fbbb1a22d4b", Outcome.UNSUPPORTED, "eager torch on cuda fails too"),
        ("766fa24a00b20795a60b", Outcome.UNSUPPORTED, "eager torch on cuda fails too"),
        # the device keyword follows the target's device
        (LOGSPACE_ON_CPU, Outcome.PASS, ""),
        # torch.svd on CUDA flips singular pairs: the same decomposition
        ("73a7705b19528c456f65", Outcome.UNDEFINED, "not unique"),
        # eval-mode native_batch_norm's save_mean: CUDA's kernel and the CPU's disagree (generated)
        ("generated-torch:55cf43a9d859f8e05b78", Outcome.UNSTABLE_REFERENCE, "across devices"),
    ],
)
def test_gpu_verdicts(state: WorkerState, instance_id: str, outcome: Outcome, words: str) -> None:
    corpus, _, instance_id = instance_id.rpartition(":")
    result = verdict_in_process(state, _by_id(corpus or "torch", instance_id), "inductor-torch-cuda")
    assert result.outcome is outcome, (result.outcome, result.message[-600:])
    assert words in result.message


TENSOR_FMAX = "a5ace2bf620ce10de627"  # torch.Tensor.fmax(x, other)


def test_a_tensor_method_is_called_from_a_container_not_a_module_attribute() -> None:
    """On the GPU machine's torch 2.11, Dynamo refused a method descriptor (``torch.Tensor.fmax``)
    read from a module attribute ("does not know how to trace method `_function`"): every
    ``torch.Tensor.X`` instance was `unsupported` there (42 of 261 human and 192 of 300 generated
    tests), on the CPU and the CUDA target alike. The wrapper now keeps it in a tuple, which 2.11
    traces (checked with torch 2.11 installed beside the pinned one)."""
    import types

    built = get_template("torch").build(_by_id("torch", TENSOR_FMAX), 0)
    descriptors = (types.MethodDescriptorType, types.WrapperDescriptorType, types.BuiltinFunctionType, types.FunctionType)
    assert not [name for name, value in vars(built.model).items() if isinstance(value, descriptors)]
    inputs = [torch.from_numpy(np.asarray(a)) for a in built.inputs]
    compiled = torch.compile(built.model, fullgraph=True, backend="eager")
    torch.testing.assert_close(compiled(*inputs), built.model(*inputs), equal_nan=True)


BATCH_NORM_EVAL = "55cf43a9d859f8e05b78"  # generated: torch.native_batch_norm(x, w, b, mean, var, False, -1e-30, 1e-05)


def _cuda_kernels_answer(built) -> list[np.ndarray]:
    """What eager torch and Inductor on an H100 (torch 2.11) returned for the instance: the
    normalized input as on the CPU, and as ``save_mean``/``save_invstd`` the running mean and
    1/sqrt(running var + eps), where the CPU kernel returns two empty tensors."""
    constants = built.model.constants()
    x = torch.from_numpy(np.asarray(built.inputs[0]))
    out = built.model(x)[0].numpy()
    mean, var = constants["arg3"], constants["arg4"]
    return [out, mean.numpy().copy(), (1 / torch.sqrt(var + 1e-5)).numpy()]


class _FollowsTheDevice:
    """Test-only target (fault injection on the CPU, as the GPU cannot be had here): Inductor,
    whose run returns ``outputs`` and whose library on its 'device' answers ``on_device``."""

    def __new__(cls, outputs, on_device):
        from opera.run.targets.inductor import InductorTarget

        class Target(InductorTarget):
            name = "test-follows-the-device"

            def run(self, compiled, inputs):
                return [a.copy() for a in outputs]

            def device_reference(self, built, inputs):
                return None if on_device is None else ("eager torch on cuda (as the H100 answered)", on_device)

        return Target()


@pytest.mark.slow
def test_kernels_that_disagree_across_devices_are_the_librarys_not_the_compilers(state: WorkerState) -> None:
    """The second GPU run's one Inductor-CUDA inconsistency: eval-mode native_batch_norm's
    save_mean has shape (2,) on CUDA and (0,) in the CPU reference; eager CUDA answers the same, so
    the library's two kernels disagree (LIBRARY) and the test is ``unstable-reference``. A
    compiler that follows neither, or a target without a device of its own, is still judged."""
    inst = _by_id("generated-torch", BATCH_NORM_EVAL)
    answer = _cuda_kernels_answer(get_template("torch").build(inst, 0))

    state.targets["test-follows-the-device"] = _FollowsTheDevice(answer, answer)
    result = verdict_in_process(state, inst, "test-follows-the-device")
    assert result.outcome is Outcome.UNSTABLE_REFERENCE, result.message
    assert "across devices" in result.message and "eager torch on cuda" in result.message

    wrong = [answer[0], answer[1] + 1, answer[2]]
    state.targets["test-follows-the-device"] = _FollowsTheDevice(wrong, answer)
    assert verdict_in_process(state, inst, "test-follows-the-device").outcome is Outcome.INCONSISTENT

    state.targets["test-follows-the-device"] = _FollowsTheDevice(answer, None)
    assert verdict_in_process(state, inst, "test-follows-the-device").outcome is Outcome.INCONSISTENT
