"""A target is one file (issue 12, section 2): everything Opera knows about a target is declared on
its class, and the run, the verdict and the reproducers read it from there.

The target defined here lives only in this file. Registered, it is run through the real worker
code (``execute_task``, onnxruntime underneath) and its own unsupported pattern, tolerances,
converter name and reproducer steps take effect with no table edited anywhere else.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from types import MappingProxyType

import numpy as np
import pytest
from _run_fixtures import relu

from opera.outcomes import Outcome
from opera.run.execution import WorkerState, execute_task
from opera.run.executors import TestTask, WorkerSettings
from opera.run.targets import TARGETS, Target, get_target, register_target, target_classes
from opera.run.targets.testing import TestWrongTarget
from opera.templates import SingleOpModel
from opera.verdict.oracles import load_oracle_config
from opera.verdict.unsupported import load_unsupported


class OneFileTarget(TestWrongTarget):
    """onnxruntime + 1 on every output (a wrong compiler), declaring its own hooks."""

    __test__ = False
    name = "test-one-file"
    unsupported_patterns = (r"^builtins\.ZeroDivisionError: the one-file target refuses",)
    # the +1 of TestWrongTarget is within this tolerance for float32: the test then passes
    tolerances = MappingProxyType({"dtype": {"float32": {"atol": 1.5}}})

    def converter_name(self, built: SingleOpModel) -> str | None:
        return f"OneFile.{built.instance.api.split('::')[-1]}"

    def convert(self, built: SingleOpModel):  # type: ignore[no-untyped-def]
        if built.instance.source.test == "refuse":
            raise ZeroDivisionError("the one-file target refuses this instance")
        return super().convert(built)


@pytest.fixture
def one_file_target() -> Iterator[type[Target]]:
    register_target(OneFileTarget)
    try:
        yield OneFileTarget
    finally:
        TARGETS.remove(OneFileTarget.name)


def _verdict(inst, target: str, tmp_path: Path, **settings):  # type: ignore[no-untyped-def]
    state = WorkerState(WorkerSettings(reproducer_dir=str(tmp_path), **settings))
    return execute_task(TestTask(0, inst, target), state, lambda stage: None)


def test_its_unsupported_pattern_makes_a_coverage_gap(one_file_target, tmp_path) -> None:
    outcome = _verdict(relu(np.array([1.0, -2.0], np.float32), test="refuse"), "test-one-file", tmp_path)
    assert outcome.result.outcome == Outcome.UNSUPPORTED, outcome.result.message
    # and the same failure with the target patterns switched off is a crash
    no_targets = tmp_path / "none.toml"
    no_targets.write_text("target_patterns = false\n[common]\npatterns = []\n")
    crashed = _verdict(
        relu(np.array([1.0, -2.0], np.float32), test="refuse"),
        "test-one-file",
        tmp_path,
        unsupported_config=str(no_targets),
    )
    assert crashed.result.outcome == Outcome.CRASH
    assert "ZeroDivisionError" in crashed.result.signature


def test_its_tolerances_reach_the_oracle_and_the_toml_overrides_them(one_file_target, tmp_path) -> None:
    # +1 on float32 outputs within atol 1.5: pass (test-wrong, with the default 1e-3, is inconsistent)
    inst = relu(np.array([1.0, -2.0, 3.0], np.float32))
    assert _verdict(inst, "test-one-file", tmp_path).result.outcome == Outcome.PASS
    assert _verdict(inst, "test-wrong", tmp_path).result.outcome == Outcome.INCONSISTENT
    assert load_oracle_config().threshold("test-one-file", "float32").atol == 1.5
    tighter = tmp_path / "oracle.toml"
    tighter.write_text('[default]\natol = 1e-3\n[target."test-one-file".dtype.float32]\natol = 0.5\n')
    assert load_oracle_config(tighter).threshold("test-one-file", "float32").atol == 0.5
    outcome = _verdict(inst, "test-one-file", tmp_path, oracle_config=str(tighter))
    assert outcome.result.outcome == Outcome.INCONSISTENT
    # its converter name signs the inconsistency, and its reproducer steps (inherited) write the script
    assert outcome.result.signature == "inconsistent:test-one-file:converter=OneFile.Relu"
    assert outcome.reproducer and "session = ort.InferenceSession" in Path(outcome.reproducer).read_text()


def test_patterns_are_collected_along_the_class_hierarchy() -> None:
    ov_onnx = get_target("ov-onnx")
    declared = type(ov_onnx).declared_unsupported_patterns()
    assert "No conversion rule found for operations" in declared  # OpenVINO's, on its base class
    assert "Unsupported padding mode" in declared  # ov-onnx's own
    assert "Unsupported padding mode" not in type(get_target("ov-torch")).declared_unsupported_patterns()
    patterns = load_unsupported().patterns_for("ov-onnx", "openvino")
    assert [p.pattern for p in patterns].count("No conversion rule found for operations") == 1


def test_the_interface_is_declared_not_discovered() -> None:
    class Incomplete(Target):
        name, library, compiler = "test-incomplete", "onnx", "nothing"

    with pytest.raises(TypeError, match="abstract"):
        Incomplete()  # type: ignore[abstract]

    class Nameless(TestWrongTarget):
        name, library = "test-nameless", ""

    with pytest.raises(ValueError, match="library and compiler"):
        register_target(Nameless)
    # every shipped target implements the declared hooks with its own class attributes
    for cls in target_classes():
        assert cls.library in ("onnx", "torch", "keras") and cls.compiler, cls
        assert isinstance(cls.native_frontend, bool) and isinstance(cls.requires, tuple)
    assert get_target("ov-onnx").native_frontend and not get_target("tvm-onnx").native_frontend
    assert get_target("test-wrong").versions().keys() == {"onnxruntime"}
