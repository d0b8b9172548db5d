"""Verdicts on Keras and OpenVINO that a compiler team can trust (issue 11, defect classes 2, 3, 8).

Each class has a regression test on a real instance of the shipped corpus (picked by API and
source test from ``harvested/{keras,onnx}.jsonl.gz``), run through ``execute_task`` in this process
as in ``test_targets.py``; the outcome before the fix is in each test's docstring.

2. The reference is the inference model the converters consume: ``training=False`` (baked into
   the layer's node, since OpenVINO traces ``model(x)``) computed by the ``tf.function`` graph;
   float64 tensors stay float64 (only Python floats become Keras's float32).
3. OpenVINO parameters are fed by name; one that lost its source input's name is a crash at run.
8. Only the Keras model's declared outputs are compared, in declared order, once each.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from _run_fixtures import verdict_in_process

from opera.corpus import CorpusReader
from opera.model import InstanceKind, OperatorInstance, Source
from opera.outcomes import Outcome, Stage, TestResult
from opera.run.execution import WorkerState

pytestmark = pytest.mark.slow

HARVESTED = Path(__file__).resolve().parents[1] / "harvested"
IMAGE = "keras/src/layers/preprocessing/image_preprocessing/"


def _instance(library: str, api: str, test: str, instance_id: str | None = None) -> OperatorInstance:
    """The first valid instance of ``api`` recorded by ``test`` in the shipped corpus (the one with
    ``instance_id`` where a test recorded several)."""
    for inst in CorpusReader([HARVESTED / f"{library}.jsonl.gz"]):
        if inst.api != api or inst.source.test != test or inst.valid is False or not inst.migratable:
            continue
        if instance_id is None or inst.id == instance_id:
            return inst
    raise AssertionError(f"no {api} instance {instance_id or ''} of {test} in harvested/{library}.jsonl.gz")


def _available(state: WorkerState, target: str) -> None:
    reason = state.target(target).availability()
    if reason is not None:
        pytest.skip(f"{target} is not available here: {reason}")


def _run(state: WorkerState, inst: OperatorInstance, target: str) -> TestResult:
    return verdict_in_process(state, inst, target)


def _detail(result: TestResult) -> tuple[object, ...]:
    return (result.outcome, result.stage, result.distance, (result.message or "")[-600:])


# ---- class 2: the reference is the inference graph the converters consume ---------------------

# (target, api, source test): each was a false verdict while the reference ran in training mode.
INFERENCE_MODE: list[tuple[str, str, str]] = [
    # before: inconsistent, distance 252.7 (the reference equalized; TFLite's graph is inference)
    ("tvm-keras", "keras.layers.Equalization", IMAGE + "equalization_test.py::EqualizationTest::test_layer"),
    # before: unsupported: OpenVINO traced model(x), RandomFlip's default is training=True, so
    # it converted the random training graph (StatelessRandomUniformV2)
    (
        "ov-keras",
        "keras.layers.RandomFlip",
        IMAGE + "random_flip_test.py::RandomFlipTest::test_random_flip_random_flip_both",
    ),
    # recorded with training=True; before: nondeterministic (two training-mode references differ)
    (
        "tvm-keras",
        "keras.layers.Dropout",
        "keras/src/layers/regularization/dropout_test.py::DropoutTest::test_dropout_basics",
    ),
    (
        "ov-keras",
        "keras.layers.Dropout",
        "keras/src/layers/regularization/dropout_test.py::DropoutTest::test_dropout_basics",
    ),
]


@pytest.mark.parametrize(("target", "api", "test"), INFERENCE_MODE)
def test_augmentation_layers_are_compared_in_inference_mode(
    target: str, api: str, test: str, state: WorkerState
) -> None:
    result = _run(state, _instance("keras", api, test), target)
    assert result.outcome is Outcome.PASS, _detail(result)


def test_the_built_model_is_the_inference_model() -> None:
    """The recorded ``training=True`` is kept aside and the layer's node says ``training=False``:
    the reference, eager ``model(x, training=False)`` and OpenVINO's ``model(x)`` trace agree."""
    import keras

    from opera.templates.keras_template import KerasTemplate

    inst = _instance("keras", "keras.layers.Dropout", INFERENCE_MODE[2][2])
    template = KerasTemplate()
    built = template.build(inst)
    assert built.details["recorded_training"] is True
    (reference,) = template.reference(built)
    (x,) = built.inputs
    np.testing.assert_array_equal(reference, x)  # Dropout in inference is the identity
    plain = built.model([keras.ops.convert_to_tensor(x)])  # no training=: what OpenVINO traces
    np.testing.assert_array_equal(np.asarray(plain[0] if isinstance(plain, list) else plain), x)
    assert built.details["reference"] == "keras tf.function (training=False)"


def test_float64_tensors_stay_float64(state: WorkerState) -> None:
    """``keras.ops.logsumexp`` on a float64 tensor: before, the template cast the input to float32
    (the Python-float rule matched arrays), so a float64 model was never built."""
    from opera.templates.keras_template import KerasTemplate

    inst = _instance(
        "keras", "keras.ops.logsumexp", "keras/src/ops/math_test.py::MathOpsCorrectnessTest::test_logsumexp"
    )
    template = KerasTemplate()
    built = template.build(inst)
    assert [x.dtype for x in built.inputs] == [np.float64]
    assert [r.dtype for r in template.reference(built)] == [np.float64]
    result = _run(state, inst, "ov-keras")
    assert result.outcome is Outcome.PASS, _detail(result)


def test_python_float_scalars_become_float32() -> None:
    """Only a Python float is Keras's default float32 when it has to stand as an input."""
    from opera.templates.keras_template import KerasTemplate

    inst = OperatorInstance(
        library="keras",
        api="keras.ops.sqrt",
        kind=InstanceKind.FUNCTION,
        args=(2.0,),
        source=Source(suite="opera-tests", test="sqrt-of-a-python-float"),
    )
    built = KerasTemplate().build(inst)
    assert [x.dtype for x in built.inputs] == [np.float32]
    scalar = OperatorInstance(
        library="keras",
        api="keras.ops.sqrt",
        kind=InstanceKind.FUNCTION,
        args=(np.float64(2.0),),
        source=Source(suite="opera-tests", test="sqrt-of-a-numpy-float64"),
    )
    assert [x.dtype for x in KerasTemplate().build(scalar).inputs] == [np.float64]


def test_the_graph_is_the_reference(state: WorkerState) -> None:
    """``keras.ops.isin`` runs eagerly but not as a ``tf.function`` (a Python bool of a tensor).
    Both converters trace the graph; before, OpenVINO's convert failed inside TensorFlow's tracing
    and it was signed as an OpenVINO crash. The graph reference fails first: invalid, not a bug."""
    inst = _instance(
        "keras",
        "keras.ops.isin",
        "keras/src/ops/numpy_test.py::NumpyDtypeTest::test_isin_('float32', 'int8')",
    )
    for target in ("ov-keras", "tvm-keras"):
        result = _run(state, inst, target)
        assert (result.outcome, result.stage) == (Outcome.INVALID, Stage.REFERENCE), _detail(result)
        assert result.signature is None


# ---- class 3: inputs by name --------------------------------------------------------------------


def test_a_renamed_input_is_a_crash_at_run(state: WorkerState) -> None:
    """ONNX ``Dropout`` (inference: output = input): OpenVINO's parameter carries only the output's
    name, ``output_0``; ``input_0`` is gone, so a user feeding by name cannot run the model. Before:
    fed by position, pass."""
    inst = _instance("onnx", "onnx::Dropout", "test_dropout_default")
    result = _run(state, inst, "ov-onnx")
    assert (result.outcome, result.stage) == (Outcome.CRASH, Stage.RUN), _detail(result)
    assert "OpenVINO model has no parameter for input 'input_0'" in (result.message or "")
    assert (result.signature or "").startswith("crash:ov-onnx:InterfaceError:OpenVINO model has no parameter")


def test_an_unused_input_that_openvino_dropped_is_not_fed(state: WorkerState) -> None:
    """``CastLike`` reads only the type of its second input: OpenVINO drops that parameter, and
    the one left is fed by its name."""
    from opera.templates import get_template

    inst = _instance("onnx", "onnx::CastLike", "test_castlike_FLOAT_to_FLOAT16")
    result = _run(state, inst, "ov-onnx")
    assert result.outcome is Outcome.PASS, _detail(result)
    converted = state.target("ov-onnx").convert(get_template("onnx").build(inst))
    assert (converted.input_indices, converted.interface_error) == ([0], None)


def test_match_parameters_by_name() -> None:
    from opera.run.targets._ov_io import match_parameters as _match_parameters

    sources = ["a", "b", "c"]
    assert _match_parameters([{"c"}, {"a"}, {"b"}], sources) == ([2, 0, 1], None)  # reordered
    assert _match_parameters([{"c", "c:0"}], sources) == ([2], None)  # b and a unused, dropped
    assert _match_parameters([], sources) == ([], None)
    indices, error = _match_parameters([{"a"}, {"out"}], sources)
    assert error is not None and error.startswith("OpenVINO model has no parameter for input 'b'")
    _, error = _match_parameters([{"a"}, {"a"}], sources)  # two parameters for one input
    assert error is not None


# ---- class 8: the declared outputs, in order, once each ------------------------------------------


def test_declared_outputs() -> None:
    from opera.run.targets._ov_io import declared_outputs as _declared_outputs

    # Identity names in output order; a dangling internal tensor and an Identity past the count
    assert _declared_outputs([{"Identity:0", "m/Relu:0"}, {"m/Cast_1:0"}, {"Identity_1:0"}], ["kt"]) == (
        [0],
        None,
    )
    # named after the Keras tensors: the TF signature sorts them as strings (keras_tensor_10 first)
    names = [f"keras_tensor_{k}" for k in (8, 9, 10)]
    assert _declared_outputs([{names[2]}, {names[0]}, {names[1]}], names) == ([1, 2, 0], None)
    # one tensor declared twice is one result: read twice, not a missing output
    assert _declared_outputs([{"keras_tensor_5"}], ["keras_tensor_5", "keras_tensor_5"]) == ([0, 0], None)
    # a duplicate Identity on a second result counts once
    assert _declared_outputs([{"Identity:0"}, {"Identity:0", "x:0"}], ["kt"]) == ([0], None)
    # an output that is an input passes the input's name (or none), next to internal tensors
    assert _declared_outputs([{"input_0"}], ["kt"]) == (None, None)
    assert _declared_outputs([set(), {"m/sub:0"}], ["kt"]) == ([0], None)
    _, error = _declared_outputs([{"m/Cast:0"}, {"m/Cast_1:0"}], ["kt"])
    assert error is not None and error.startswith("OpenVINO model has no result for declared output 0")
    # ... but only for a declared output that is an input: a constant output the frontend dropped
    # (sample 10: keras.ops.isinf of an int16 tensor is tf.zeros) is not stood for by the input
    assert _declared_outputs([{"input_0"}], ["kt"], lambda k: True) == (None, None)
    _, error = _declared_outputs([{"input_0"}], ["kt"], lambda k: False)
    assert error is not None and error.startswith("OpenVINO model has no result for declared output 0")


def test_which_keras_outputs_are_inputs_passed_through() -> None:
    import keras

    from opera.run.targets._ov_io import keras_input_outputs

    x = keras.Input(batch_shape=(2, 4, 4, 3), name="input_0")
    flip = keras.Model(x, keras.layers.RandomFlip()(x, training=False))  # the identity in inference
    assert keras_input_outputs(flip)(0)
    n = keras.Input(batch_shape=(3,), dtype="int16", name="input_0")
    assert not keras_input_outputs(keras.Model(n, keras.ops.isinf(n)))(0)  # a constant (tf.zeros)
    assert not keras_input_outputs(keras.Model(n, keras.ops.negative(n)))(0)


def test_outputs_are_read_in_declared_order(state: WorkerState) -> None:
    """``RandomBrightness`` on a dict (5 outputs). OpenVINO names the results after the Keras
    tensors and the TF signature sorts those names as strings, so once Keras's name counter
    crosses a power of ten (``keras_tensor_10`` < ``keras_tensor_6``), reading the results by
    position compared each output with another one (before: a shape mismatch)."""
    import keras

    from opera.templates.keras_template import KerasTemplate

    _available(state, "ov-keras")
    inst = _instance(
        "keras",
        "keras.layers.RandomBrightness",
        IMAGE + "random_brightness_test.py::RandomBrightnessTest::test_dict_input",
    )
    template = KerasTemplate()
    for pad in range(12):  # shift the name counter until the declared names straddle ten
        keras.backend.clear_session()
        for _ in range(pad):
            keras.KerasTensor((1,))
        built = template.build(inst)
        names = [t.name for t in built.model.outputs]
        if sorted(names) != names:
            break
    else:
        pytest.fail(f"the output names never straddled a power of ten: {names}")
    reference = template.reference(built)
    target = state.target("ov-keras")
    converted = target.convert(built)
    assert converted.output_indices is not None and sorted(converted.output_indices) == list(
        range(len(names))
    )
    assert converted.output_indices != list(range(len(names)))
    outputs = target.run(target.compile(converted), [x.copy() for x in built.inputs])
    assert [o.shape for o in outputs] == [r.shape for r in reference]
    for out, ref in zip(outputs, reference, strict=True):
        np.testing.assert_allclose(out, ref, atol=1e-5)


def test_an_output_that_is_the_input_is_found_among_dangling_results(state: WorkerState) -> None:
    """``RandomPosterization`` in inference returns its input: OpenVINO's result is the parameter
    (named ``input_0``), next to a dangling internal ``.../sub:0``. Both are unnamed as outputs;
    the internal one is not a candidate, so the output is read, not reported missing."""
    from opera.templates.keras_template import KerasTemplate

    _available(state, "ov-keras")
    inst = _instance(
        "keras",
        "keras.layers.RandomPosterization",
        IMAGE + "random_posterization_test.py::RandomPosterizationTest::test_layer",
    )
    target = state.target("ov-keras")
    converted = target.convert(KerasTemplate().build(inst))
    assert (converted.output_indices, converted.interface_error) == ([0], None)
    result = _run(state, inst, "ov-keras")
    assert result.outcome is not Outcome.CRASH and result.stage is Stage.COMPARE, _detail(result)


def test_dangling_results_are_not_compared(state: WorkerState) -> None:
    """An unrolled ``LSTM``: OpenVINO adds an internal slice and the stacked states as results
    (3 results for 1 declared output); only ``Identity:0`` is compared."""
    inst = _instance(
        "keras",
        "keras.layers.LSTM",
        "keras/src/layers/rnn/lstm_test.py::LSTMTest::test_correctness0",
        "12e87e206a4b17391a00",  # unroll=True, implementation=1
    )
    result = _run(state, inst, "ov-keras")
    assert result.outcome is Outcome.PASS, _detail(result)


def test_sparse_outputs_are_not_a_compiler_verdict(state: WorkerState) -> None:
    """``CategoryEncoding(sparse=True)``: OpenVINO has no sparse tensors and returns the
    components (``Identity:0`` indices, ``Identity_1:0`` values) for the one declared output.
    Before: inconsistent, "output count differs: reference 1, actual 2"."""
    inst = _instance(
        "keras",
        "keras.layers.CategoryEncoding",
        "keras/src/layers/preprocessing/category_encoding_test.py::CategoryEncodingTest::test_one_hot_sparse",
    )
    result = _run(state, inst, "ov-keras")
    assert result.outcome is Outcome.INVALID, _detail(result)
    assert "sparse" in (result.message or "")
