"""PyTorch harvesting: recorder, sources and template, end to end on real torch (no mocks)."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from torch import nn  # noqa: E402
from torch.nn import functional as F  # noqa: E402

from opera.corpus import read_corpus  # noqa: E402
from opera.instrumentation import HarvestOptions  # noqa: E402
from opera.instrumentation.torch_recorder import TorchRecorder, torch_module_classes  # noqa: E402
from opera.instrumentation.torch_sources import moduleinfo_source, opinfo_source  # noqa: E402
from opera.model import InstanceKind, OperatorInstance  # noqa: E402
from opera.templates.torch_template import TorchTemplate, torch_inputs  # noqa: E402
from opera.values import ObjectSpec, TensorSpec  # noqa: E402

ENV = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}

# 48 float values: under the exact-value threshold, so the recorded input is exact.
SMALL_INPUT = (np.arange(48, dtype=np.float32).reshape(1, 3, 4, 4) - 20.0) / 10.0

SUITE = textwrap.dedent(
    """
    import numpy as np
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    def test_conv_and_gelu():
        x = torch.from_numpy((np.arange(48, dtype=np.float32).reshape(1, 3, 4, 4) - 20.0) / 10.0)
        y = nn.Conv2d(3, 8, 3, padding=1)(x)
        z = F.gelu(x, approximate="tanh")
        assert y.shape == (1, 8, 4, 4) and z.shape == x.shape
    """
)


def record(body: object) -> list[OperatorInstance]:
    recorded: list[OperatorInstance] = []
    with TorchRecorder(recorded.append):
        body()  # type: ignore[operator]
    return recorded


@pytest.mark.slow
def test_pytest_suite_harvest_records_exactly_the_top_level_calls(tmp_path: Path) -> None:
    (tmp_path / "test_tiny.py").write_text(SUITE)
    out = tmp_path / "torch.jsonl.gz"
    proc = subprocess.run(
        [sys.executable, "-m", "opera.cli", "harvest", "torch", "-o", str(out), "--", str(tmp_path / "test_tiny.py")],
        capture_output=True, text=True, env=ENV, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    instances = list(read_corpus(out))
    # F.conv2d inside Conv2d.forward, whatever gelu calls, torch.from_numpy: all absent.
    assert [i.api for i in instances] == ["torch.nn.Conv2d", "torch.nn.functional.gelu"]
    conv, gelu = instances
    assert conv.kind == InstanceKind.MODULE and conv.args == (3, 8, 3) and conv.kwargs == {"padding": 1}
    assert len(conv.inputs) == 1 and conv.inputs[0].dtype == np.float32
    np.testing.assert_array_equal(conv.inputs[0], SMALL_INPUT)
    assert gelu.kind == InstanceKind.FUNCTION and gelu.kwargs == {"approximate": "tanh"}
    np.testing.assert_array_equal(gelu.args[0], SMALL_INPUT)
    assert all(i.valid for i in instances)
    assert conv.outputs == ("float32[1,8,4,4]",) and gelu.outputs == ("float32[1,3,4,4]",)
    assert all(i.source.test.endswith("test_conv_and_gelu") for i in instances)


def _hook_state() -> dict[str, object]:
    module = nn.modules.module
    return {
        "inits": {cls: cls.__dict__.get("__init__") for cls in torch_module_classes()},
        "pre": dict(module._global_forward_pre_hooks),
        "post": dict(module._global_forward_hooks),
        "always": dict(module._global_forward_hooks_always_called),
        "kwargs": dict(module._global_forward_hooks_with_kwargs),
        "modes": list(torch.overrides._get_current_function_mode_stack()),
    }


def test_uninstall_removes_every_patch() -> None:
    before = _hook_state()
    recorded: list[OperatorInstance] = []
    ones = torch.ones(1, 2)
    recorder = TorchRecorder(recorded.append)
    recorder.install()
    try:
        during = _hook_state()
        assert during["inits"][nn.Linear] is not before["inits"][nn.Linear]  # type: ignore[index]
        assert len(during["pre"]) == len(before["pre"]) + 1  # type: ignore[arg-type]
        assert len(during["modes"]) == len(before["modes"]) + 1  # type: ignore[arg-type]
        nn.Linear(2, 2)(ones)
        assert [i.api for i in recorded] == ["torch.nn.Linear"]
    finally:
        recorder.uninstall()
    after = _hook_state()
    assert after == before
    recorded.clear()
    torch.add(ones, 1)
    nn.Linear(2, 2)(ones)
    assert recorded == []


def test_in_place_operator_records_the_value_before_the_call() -> None:
    x = torch.tensor([1.0, 2.0])
    recorded = record(lambda: x.add_(1.0))
    assert [i.api for i in recorded] == ["torch.Tensor.add_"]
    np.testing.assert_array_equal(recorded[0].args[0], [1.0, 2.0])


def test_value_thresholds_and_deterministic_specs() -> None:
    big = torch.linspace(-3.0, 5.0, 2000)
    ints = torch.arange(1000)
    nan_mid = torch.full((2000,), float("nan"))
    recorded = record(lambda: (torch.sin(big), torch.neg(ints), torch.cos(nan_mid)))
    spec = recorded[0].args[0]
    assert isinstance(spec, TensorSpec) and spec.shape == (2000,) and (spec.low, spec.high) == (-3.0, 5.0)
    again = record(lambda: torch.sin(big))[0].args[0]
    assert again == spec  # the seed comes from the tensor's bytes
    np.testing.assert_array_equal(recorded[1].args[0], np.arange(1000))
    assert np.isnan(recorded[2].args[0]).all() and recorded[2].args[0].shape == (2000,)


def test_template_round_trip_reproduces_the_recorded_outputs() -> None:
    x = torch.from_numpy(SMALL_INPUT.copy())
    outputs: list[torch.Tensor] = []

    def body() -> None:
        torch.manual_seed(0)  # the template seeds module construction with the same seed
        outputs.append(nn.Conv2d(3, 8, 3, padding=1)(x))
        outputs.append(F.gelu(x, approximate="tanh"))
        outputs.append(torch.add(x, x[0, 0], alpha=2))
        outputs.append(torch.cat([x, x], dim=1))
        outputs.append(x.sum(dim=1, keepdim=True))

    recorded = record(body)
    apis = [i.api for i in recorded]
    assert apis == [
        "torch.nn.Conv2d",
        "torch.nn.functional.gelu",
        "torch.Tensor.__getitem__",
        "torch.add",
        "torch.cat",
        "torch.Tensor.sum",
    ]
    template = TorchTemplate()
    by_api = {i.api: i for i in recorded}
    for api, expected in zip(["torch.nn.Conv2d", "torch.nn.functional.gelu", "torch.add", "torch.cat", "torch.Tensor.sum"], outputs, strict=True):
        decoded = OperatorInstance.from_json(json.loads(by_api[api].to_line()))
        assert decoded.id == by_api[api].id
        built = template.build(decoded, seed=0)
        (got,) = template.reference(built)
        np.testing.assert_allclose(got, expected.detach().numpy(), rtol=0, atol=0, err_msg=api)
    # tensors inside the list: the first is the graph input and the second a constant (a real
    # model's shape), or both inputs in the all-inputs form
    assert len(template.build(by_api["torch.cat"]).inputs) == 1
    assert len(template.build(by_api["torch.cat"], tensor_args="inputs").inputs) == 2


@pytest.mark.parametrize("api", ["torch.nn.Conv2d", "torch.nn.functional.gelu", "torch.add"])
def test_built_models_export(api: str) -> None:
    x = torch.from_numpy(SMALL_INPUT.copy())
    recorded = record(lambda: (nn.Conv2d(3, 8, 3, padding=1)(x), F.gelu(x), torch.add(x, x, alpha=3)))
    inst = next(i for i in recorded if i.api == api)
    built = TorchTemplate().build(inst)
    program = torch.export.export(built.model, torch_inputs(built))
    (exported,) = flatten(program.module()(*torch_inputs(built)))
    np.testing.assert_allclose(exported, TorchTemplate().reference(built)[0], rtol=1e-6, atol=1e-6)


def flatten(result: object) -> list[np.ndarray]:
    from opera.templates.torch_template import flatten_outputs

    return flatten_outputs(result)


@pytest.mark.slow
def test_opinfo_source_respects_limit_and_records_both_variants() -> None:
    recorder = TorchRecorder()
    instances = list(opinfo_source(recorder, HarvestOptions(limit=12)))
    assert len(instances) == 12 and not recorder.installed
    assert {i.source.suite for i in instances} == {"opinfo"}
    first_op = instances[0].source.test
    apis = {i.api for i in instances if i.source.test == first_op}
    assert apis == {"torch.abs", "torch.Tensor.abs"}, apis  # op_db starts with abs
    template = TorchTemplate()
    assert all(template.validate(i).valid for i in instances)


def test_moduleinfo_source_records_module_instances() -> None:
    recorder = TorchRecorder()
    instances = list(moduleinfo_source(recorder, HarvestOptions(limit=5)))
    assert len(instances) == 5 and not recorder.installed
    assert all(i.kind == InstanceKind.MODULE and i.source.suite == "moduleinfo" for i in instances)
    assert instances[0].api == f"torch.nn.{instances[0].source.test}"
    template = TorchTemplate()
    verdicts = [template.validate(i) for i in instances]
    assert all(v.valid for v in verdicts), [v.invalid_reason for v in verdicts]


def test_module_arguments_become_object_specs() -> None:
    src = torch.zeros(3, 1, 8)
    recorded = record(lambda: nn.TransformerEncoder(nn.TransformerEncoderLayer(8, 2, 16), 2)(src))
    assert [i.api for i in recorded] == ["torch.nn.TransformerEncoder"]
    layer = recorded[0].args[0]
    assert layer.api == "torch.nn.TransformerEncoderLayer" and layer.args == (8, 2, 16)
    assert TorchTemplate().validate(recorded[0]).valid


def test_module_built_while_paused_is_still_an_object_spec() -> None:
    anchor, positive, negative = torch.ones(2, 3), torch.zeros(2, 3), torch.full((2, 3), 2.0)
    recorded: list[OperatorInstance] = []
    with TorchRecorder(recorded.append) as recorder:
        with recorder.paused():  # as when a harvest source generates a sample
            distance = nn.PairwiseDistance(p=1.0)
        F.triplet_margin_with_distance_loss(anchor, positive, negative, distance_function=distance)
    (inst,) = recorded
    assert inst.kwargs["distance_function"] == ObjectSpec("torch.nn.PairwiseDistance", (), {"p": 1.0})
    assert TorchTemplate().validate(inst).valid


EXPECTING_SUITE = textwrap.dedent(
    """
    import unittest

    import pytest
    import torch
    import torch.nn.functional as F

    def test_plain_and_expected_errors():
        x = torch.ones(2, 3)
        F.relu(x)
        with pytest.raises(RuntimeError):
            y = torch.tanh(x)  # runs, but inside the block: part of what the test expects to fail
            torch.matmul(y, y)  # (2, 3) @ (2, 3): the shape error (a call that raises is never recorded)
        F.gelu(x)

    class TestCase(unittest.TestCase):
        def test_assert_raises(self):
            x = torch.ones(2, 3)
            with self.assertRaisesRegex(RuntimeError, "shapes"):
                z = torch.exp(x)
                torch.mm(z, z)
            self.assertRaises(RuntimeError, torch.bmm, x, x)
            torch.sigmoid(x)
    """
)


@pytest.mark.slow
def test_calls_inside_expected_error_blocks_are_marked_and_left_out(tmp_path: Path) -> None:
    """Issue 17, faithful harvest 1: a call the test expects to fail is recorded as invalid with
    the reason (runs leave invalid instances out), the rest of the test as usual."""
    (tmp_path / "test_expecting.py").write_text(EXPECTING_SUITE)
    out = tmp_path / "torch.jsonl.gz"
    proc = subprocess.run(
        [sys.executable, "-m", "opera.cli", "harvest", "torch", "-o", str(out), "--", str(tmp_path / "test_expecting.py")],
        capture_output=True, text=True, env=ENV, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    by_api = {i.api: i for i in read_corpus(out)}
    for api in ("torch.tanh", "torch.exp"):
        assert by_api[api].valid is False and by_api[api].invalid_reason.startswith("expected error:"), api
    for api in ("torch.nn.functional.relu", "torch.nn.functional.gelu", "torch.sigmoid"):
        assert by_api[api].valid is True, api
    assert not {"torch.matmul", "torch.mm", "torch.bmm"} & set(by_api)  # they raised: never recorded


MACHINERY_SUITE = textwrap.dedent(
    """
    import pytest
    import torch
    from torch.autograd import gradcheck
    from torch.testing import assert_close, make_tensor

    def helper(x):
        return torch.exp(x)

    def test_machinery():
        x = make_tensor((2, 3), dtype=torch.float64, device="cpu", low=-1, high=1)
        y = torch.tanh(x)
        assert_close(y, torch.tanh(x))
        assert_close(helper(x), torch.exp(x) + 0)
        assert gradcheck(torch.sigmoid, (x.detach().requires_grad_(),))

    def test_fails():
        torch.abs(torch.ones(2))
        assert False

    @pytest.mark.skip(reason="never runs")
    def test_skipped():
        torch.neg(torch.ones(2))

    @pytest.mark.xfail(reason="expected")
    def test_xfails():
        torch.cos(torch.ones(3))
        assert False
    """
)


@pytest.mark.slow
def test_test_machinery_is_not_recorded_and_pytest_outcomes_are_kept(tmp_path: Path) -> None:
    """Issue 17, faithful harvest 4 and the harvest summary: calls made by assert_close, make_tensor
    and gradcheck are not the test's (126 instances of clone/copy_/sub/sigmoid before, on this file),
    a suite helper's are; pytest's own outcome counts are printed and kept in the corpus header."""
    (tmp_path / "test_machinery.py").write_text(MACHINERY_SUITE)
    out = tmp_path / "torch.jsonl.gz"
    proc = subprocess.run(
        [sys.executable, "-m", "opera.cli", "harvest", "torch", "-o", str(out), "--quiet", "--", str(tmp_path / "test_machinery.py")],
        capture_output=True, text=True, env=ENV, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    apis = sorted(i.api for i in read_corpus(out))
    # torch.ones/torch.exp(x) + 0 in the test body are the test's own calls too
    assert set(apis) <= {"torch.tanh", "torch.exp", "torch.Tensor.__add__", "torch.Tensor.add", "torch.abs", "torch.ones", "torch.cos"}, apis
    assert {"torch.tanh", "torch.exp", "torch.abs", "torch.cos"} <= set(apis), apis
    assert "torch.sigmoid" not in apis and "torch.neg" not in apis  # gradcheck's calls; a skipped test
    with gzip.open(out, "rt") as fh:
        header = json.loads(fh.readline())
    assert header["pytest"] == {"pytest": {"passed": 1, "failed": 1, "skipped": 1, "xfailed": 1}}
    assert "pytest (pytest): 1 passed, 1 failed, 1 skipped, 1 xfailed" in proc.stdout


@pytest.mark.slow
def test_the_pytest_source_reports_each_test_as_it_finishes(tmp_path: Path) -> None:
    from opera.instrumentation.pytest_source import run_pytest_harvest

    (tmp_path / "test_machinery.py").write_text(MACHINERY_SUITE)
    events: list[dict[str, object]] = []
    instances = list(run_pytest_harvest(TorchRecorder(), [str(tmp_path / "test_machinery.py")], on_event=events.append))
    assert {"collected": 4} in events
    finished = [e for e in events if "tests" in e]
    assert sum(e["tests"] for e in finished) == 4  # type: ignore[misc]
    assert sum(e["instances"] for e in finished) == len(instances) > 0  # type: ignore[misc]
    assert events[-1] == {"validating": len(instances)}  # the last word: what is left to validate
    assert {"summary": {"passed": 1, "failed": 1, "skipped": 1, "xfailed": 1}} in events
