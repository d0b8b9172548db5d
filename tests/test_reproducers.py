"""Standalone reproducers show the same failure as the test that wrote them (issue 3, item 1).

The inductor reproducer compiles the same eager call the target compiles: compiling the exported
program's ``module()`` instead failed differently ("Attempt to trace generator" for torch.unique).
"""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("torch")

from opera.model import InstanceKind, OperatorInstance, Source  # noqa: E402
from opera.outcomes import Outcome, Stage, TestResult  # noqa: E402
from opera.reproduce.write import write_reproducer  # noqa: E402
from opera.run.targets import get_target  # noqa: E402


def _result(inst: OperatorInstance, outcome: Outcome, stage: Stage | None) -> TestResult:
    return TestResult(
        instance_id=inst.id, api=inst.api, target="inductor-torch", outcome=outcome, stage=stage
    )


def _run(path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=600)


@pytest.mark.slow
def test_inductor_reproducer_shows_the_same_compile_crash(tmp_path) -> None:
    """torch.unique(x, dim=2, sorted=False): Inductor's fake kernel for aten.unique_dim gives the
    wrong strides (a real torch 2.13 bug found by the measured run)."""
    x = np.array(
        [[[1, 1, 0, 1, 0]], [[0, 0, 0, 1, 1]], [[1, 1, 1, 1, 0]], [[0, 0, 0, 0, 0]], [[0, 0, 0, 0, 1]]],
        np.float32,
    )
    inst = OperatorInstance(
        library="torch",
        api="torch.unique",
        kind=InstanceKind.FUNCTION,
        args=(x,),
        kwargs={"dim": 2, "return_counts": False, "return_inverse": False, "sorted": False},
        source=Source(suite="opera-tests", test="unique"),
    )
    path = write_reproducer(
        inst, get_target("inductor-torch"), _result(inst, Outcome.CRASH, Stage.COMPILE), tmp_path
    )
    assert path is not None
    text = path.read_text()
    assert "import opera" not in text and "from opera" not in text
    assert "torch.export.load" not in text  # the eager call, not the exported program
    proc = _run(path)
    assert proc.returncode == 1
    assert "unique_dim" in proc.stderr and "Attempt to trace generator" not in proc.stderr


@pytest.mark.slow
def test_inductor_reproducer_of_a_module_runs_and_matches(tmp_path) -> None:
    """An nn.Module operator (pickled with its weights) compiles and matches the reference: the
    script exits 0 ("not reproduced") when nothing is wrong."""
    inst = OperatorInstance(
        library="torch",
        api="torch.nn.Linear",
        kind=InstanceKind.MODULE,
        args=(4, 3),
        inputs=(np.linspace(-1, 1, 8, dtype=np.float32).reshape(2, 4),),
        source=Source(suite="opera-tests", test="linear"),
    )
    path = write_reproducer(
        inst, get_target("inductor-torch"), _result(inst, Outcome.INCONSISTENT, Stage.RUN), tmp_path
    )
    assert path is not None
    assert "torch.export.load" not in path.read_text()  # the pickled module, not the exported program
    proc = _run(path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "not reproduced" in proc.stdout and "chebyshev distance" in proc.stdout


@pytest.mark.slow
def test_tvm_reproducer_flattens_outputs_like_the_target(tmp_path) -> None:
    """ONNX Shape returns a tvm_ffi.Shape (a tuple subclass): the reproducer uses the target's own
    flattening, so a Shape that passes in Opera is one int64[1] output on its own, not 1 scalar."""
    pytest.importorskip("tvm")
    from pathlib import Path

    from opera.corpus import CorpusReader

    corpus = Path(__file__).resolve().parents[1] / "harvested" / "onnx.jsonl.gz"
    inst = next(i for i in CorpusReader([corpus]) if i.source.test == "test_shape_start_negative_1")
    result = TestResult(
        instance_id=inst.id, api=inst.api, target="tvm-onnx", outcome=Outcome.INCONSISTENT, stage=Stage.RUN
    )
    path = write_reproducer(inst, get_target("tvm-onnx"), result, tmp_path)
    assert path is not None and "import opera" not in path.read_text()
    proc = _run(path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "output 0: int64[1] chebyshev distance 0" in proc.stdout
