"""Keras harvesting: the recorder through the pytest plugin, uninstall, the template and TFLite."""

from __future__ import annotations

import importlib
import inspect
import os
import sys
from pathlib import Path

import numpy as np
import pytest

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

keras = pytest.importorskip("keras")

from opera.instrumentation.keras_recorder import KerasRecorder, to_neutral  # noqa: E402
from opera.instrumentation.pytest_source import run_pytest_harvest  # noqa: E402
from opera.model import InstanceKind, OperatorInstance  # noqa: E402
from opera.templates import get_template  # noqa: E402
from opera.templates.keras_template import to_tflite  # noqa: E402
from opera.values import ObjectSpec, TensorSpec  # noqa: E402

# Conv2DTranspose(4, 3, output_padding=1) alone is rejected by Keras (output_padding must be
# smaller than strides, default 1), so the recorded test uses strides=2.
SUITE = """
import numpy as np
import keras
from keras.ops import softmax

OUT = {out!r}

def test_layers_and_ops():
    keras.utils.set_random_seed(0)
    conv = keras.layers.Conv2DTranspose(4, 3, strides=2, output_padding=1)
    x = (np.arange(36, dtype="float32").reshape(2, 3, 3, 2) / 10.0)
    y = conv(x)
    np.save(OUT + "/conv.npy", keras.ops.convert_to_numpy(y))
    probs = softmax(np.array([[1.0, 2.0, 3.0]], dtype="float32"), axis=-1)
    np.save(OUT + "/softmax.npy", keras.ops.convert_to_numpy(probs))
    bidi = keras.layers.Bidirectional(keras.layers.LSTM(2))
    bidi(np.zeros((1, 3, 2), dtype="float32"), training=False)
"""


@pytest.fixture(scope="module")
def harvested(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[OperatorInstance], Path]:
    tmp = tmp_path_factory.mktemp("keras_suite")
    test_file = tmp / "test_tiny_keras.py"
    test_file.write_text(SUITE.format(out=str(tmp)))
    recorder = KerasRecorder()
    instances = list(
        run_pytest_harvest(
            recorder, [str(test_file)], suite="tiny", extra_env={"KERAS_BACKEND": "tensorflow"}
        )
    )
    return instances, tmp


@pytest.mark.slow
def test_records_exactly_the_top_level_calls(harvested: tuple[list[OperatorInstance], Path]) -> None:
    instances, _ = harvested
    # Nothing from inside the calls: not the conv_transpose/bias ops of Conv2DTranspose.call, not
    # the LSTM copies or cells that Bidirectional builds and calls, not convert_to_numpy (skipped).
    assert [i.api for i in instances] == [
        "keras.layers.Conv2DTranspose",
        "keras.ops.softmax",
        "keras.layers.Bidirectional",
    ]
    conv, soft, bidi = instances
    assert conv.kind == InstanceKind.MODULE
    assert conv.args == (4, 3) and conv.kwargs == {"strides": 2, "output_padding": 1}
    (x,) = conv.inputs
    assert isinstance(x, np.ndarray) and x.dtype == np.float32 and x.shape == (2, 3, 3, 2)
    np.testing.assert_array_equal(x, np.arange(36, dtype="float32").reshape(2, 3, 3, 2) / 10.0)
    assert (
        conv.extra == {}
        and conv.source.suite == "tiny"
        and conv.source.test.endswith("::test_layers_and_ops")
    )

    assert soft.kind == InstanceKind.FUNCTION and soft.inputs == () and soft.kwargs == {"axis": -1}
    np.testing.assert_array_equal(soft.args[0], np.array([[1.0, 2.0, 3.0]], dtype="float32"))

    assert bidi.args == (ObjectSpec("keras.layers.LSTM", (2,), {}),)
    assert bidi.extra == {"call_kwargs": {"training": False}}
    assert all(i.library_version == keras.__version__ for i in instances)


@pytest.mark.slow
def test_template_round_trip_matches_the_test(harvested: tuple[list[OperatorInstance], Path]) -> None:
    """The rebuilt model reproduces what the test computed: same seed -> same initial weights."""
    instances, out = harvested
    template = get_template("keras")
    conv, soft, bidi = instances
    built = template.build(conv, seed=0)  # the test seeded with keras.utils.set_random_seed(0)
    (conv_out,) = template.reference(built)
    np.testing.assert_allclose(conv_out, np.load(out / "conv.npy"), rtol=1e-5, atol=1e-6)
    (soft_out,) = template.reference(template.build(soft))
    np.testing.assert_allclose(soft_out, np.load(out / "softmax.npy"), rtol=1e-6)
    checked = template.validate(bidi)
    assert checked.valid is True and checked.outputs == ("float32[1,4]",)


def _op_bindings() -> dict[tuple[str, str], object]:
    """Every (module, attr) in sys.modules bound to a keras.ops function."""
    funcs = {
        id(f)
        for ns in ("keras.ops", "keras.ops.nn", "keras.ops.numpy")
        for f in vars(importlib.import_module(ns)).values()
        if inspect.isfunction(f)
    }
    return {
        (name, attr): value
        for name, module in list(sys.modules.items())
        for attr, value in list(getattr(module, "__dict__", {}).items())
        if id(value) in funcs
    }


def test_uninstall_restores_everything(tmp_path: Path) -> None:
    layer_classes = [
        c for c in vars(keras.layers).values() if inspect.isclass(c) and issubclass(c, keras.layers.Layer)
    ]
    inits_before = {c: c.__dict__.get("__init__") for c in layer_classes}
    call_before = keras.layers.Layer.__dict__["__call__"]
    bindings_before = _op_bindings()
    softmax_before = keras.ops.softmax

    recorded: list[OperatorInstance] = []
    recorder = KerasRecorder(recorded.append)
    recorder.install()
    # A module imported while recording binds the wrapper; uninstall must reach it too.
    (tmp_path / "late_binder.py").write_text("from keras.ops import softmax\n")
    sys.path.insert(0, str(tmp_path))
    try:
        late = importlib.import_module("late_binder")
        assert keras.ops.softmax is not softmax_before and late.softmax is keras.ops.softmax
        from keras.src.ops import nn as knn

        assert knn.softmax is keras.ops.softmax
        late.softmax(np.ones((2, 2), "float32"))
    finally:
        recorder.uninstall()
        sys.path.remove(str(tmp_path))
    assert [i.api for i in recorded] == ["keras.ops.softmax"]
    assert late.softmax is softmax_before
    assert {c: c.__dict__.get("__init__") for c in layer_classes} == inits_before
    assert keras.layers.Layer.__dict__["__call__"] is call_before
    after = _op_bindings()
    assert {k: v for k, v in after.items() if k[0] != "late_binder"} == bindings_before
    # Nothing is recorded once uninstalled.
    keras.layers.Dense(2)(np.ones((1, 3), "float32"))
    keras.ops.relu(np.ones(3, "float32"))
    assert len(recorded) == 1
    sys.modules.pop("late_binder", None)


def test_value_conversion_rules() -> None:
    ints = np.arange(4096, dtype="int32")
    assert isinstance(to_neutral(ints), np.ndarray)
    small = np.linspace(-2, 3, 64, dtype="float32")
    assert isinstance(to_neutral(small), np.ndarray)
    big = np.linspace(-2, 3, 65, dtype="float32")
    spec = to_neutral(big)
    assert isinstance(spec, TensorSpec) and spec.shape == (65,) and (spec.low, spec.high) == (-2.0, 3.0)
    assert spec == to_neutral(big.copy())  # the seed comes from the data: stable across runs
    symbolic = to_neutral(keras.KerasTensor((None, 7), dtype="float16"))
    assert isinstance(symbolic, TensorSpec) and (symbolic.dtype, symbolic.shape) == ("float16", (None, 7))
    assert (symbolic.low, symbolic.high) == (-1.0, 1.0)
    other = to_neutral(keras.KerasTensor((None, 7), dtype="float16"))  # same shape, another input
    assert other.seed != symbolic.seed  # its own values (issue 17: no BatchNorm with mean == var)


def _dense_and_conv() -> list[OperatorInstance]:
    return [
        OperatorInstance(
            "keras",
            "keras.layers.Dense",
            InstanceKind.MODULE,
            args=(4,),
            inputs=(TensorSpec("float32", (None, 3), seed=1),),
        ),
        OperatorInstance(
            "keras",
            "keras.layers.Conv2D",
            InstanceKind.MODULE,
            args=(3, 2),
            kwargs={"padding": "same"},
            inputs=(TensorSpec("float32", (1, 5, 5, 2), seed=2),),
        ),
    ]


@pytest.mark.filterwarnings("ignore:.*tf.lite.Interpreter is deprecated")
@pytest.mark.parametrize("inst", _dense_and_conv(), ids=lambda i: i.api)
def test_to_tflite_runs_like_keras(inst: OperatorInstance) -> None:
    import tensorflow as tf

    template = get_template("keras")
    built = template.build(inst, seed=3)
    (expected,) = template.reference(built)
    flatbuffer = to_tflite(built)
    assert flatbuffer[4:8] == b"TFL3"
    interpreter = tf.lite.Interpreter(model_content=flatbuffer)
    interpreter.allocate_tensors()
    (inp,) = interpreter.get_input_details()
    interpreter.set_tensor(inp["index"], built.inputs[0])
    interpreter.invoke()
    (out,) = interpreter.get_output_details()
    np.testing.assert_allclose(interpreter.get_tensor(out["index"]), expected, rtol=1e-5, atol=1e-6)
    assert built.inputs[0].shape[0] == (2 if inst.inputs[0].shape[0] is None else 1)


def test_op_without_tensor_arguments_gets_its_float_scalar_as_input() -> None:
    template = get_template("keras")
    sqrt = OperatorInstance("keras", "keras.ops.sqrt", InstanceKind.FUNCTION, args=(2.0,))
    built = template.build(sqrt)
    assert [a.shape for a in built.inputs] == [()]
    np.testing.assert_allclose(template.reference(built)[0], np.sqrt(2.0), rtol=1e-6)
    # Integer arguments stay constants (sizes, counts): arange(5) has no input to feed.
    checked = template.validate(
        OperatorInstance("keras", "keras.ops.arange", InstanceKind.FUNCTION, args=(5,))
    )
    assert checked.valid is False and "no tensor arguments" in (checked.invalid_reason or "")


def test_recorded_layers_look_like_unrecorded_ones() -> None:
    """Keras's own serialization test compares dir() of a layer and its revived copy."""
    plain = keras.layers.Dense(3, name="plain")
    plain(np.ones((1, 2), "float32"))
    recorded: list[OperatorInstance] = []
    recorder = KerasRecorder(recorded.append)
    with recorder:
        layer = keras.layers.Dense(3, name="rec")
        layer(np.ones((1, 2), "float32"))
    assert [i.api for i in recorded] == ["keras.layers.Dense"] and recorded[0].kwargs == {"name": "rec"}
    assert set(dir(layer)) == set(dir(plain))
    config = {k: v for k, v in layer.get_config().items() if k != "name"}
    assert config == {k: v for k, v in plain.get_config().items() if k != "name"}


def test_rank0_bfloat16_reference() -> None:
    import ml_dtypes

    template = get_template("keras")
    inst = OperatorInstance(
        "keras", "keras.ops.elu", InstanceKind.FUNCTION, args=(np.ones((), dtype=ml_dtypes.bfloat16),)
    )
    checked = template.validate(inst)
    assert checked.valid is True, checked.invalid_reason
    assert checked.outputs == ("bfloat16[]",)
