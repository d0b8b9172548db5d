"""Classes a third judged sample found (issue 11, docs/verdict-sample.md, sample 3), each on the
corpus instance the sample drew, through the real compiler:

- gaps in the frontend's own words or code: TVM's ONNX ``Attention`` converter is the com.microsoft
  operator's (its docstring), ``as_strided`` beyond a contiguous view ("is not supported"),
  ``max_pool*_with_indices`` whose indices TVM fills with a placeholder (its source's words: the
  pooled values are still judged), a TFLite tensor type TVM "is currently not supported";
- OpenVINO's CPU plugin computes float64 in float32 (its documented inference precisions): float64
  outputs are judged at float32's relative tolerance, while an Inf turned finite stays a finding;
- an attribute a frontend ignores (its outputs are exactly the operator's with that attribute at its
  default: OpenVINO's SpaceToDepth-28 ``mode='CRD'``, GRU-22 ``layout=1``; sample 4) and OpenVINO's
  two-dimensional Col2Im (its words) are gaps, while a wrong ReduceMin stays a bug; an optional
  input a frontend drops (sample 8: LSTM's peephole) is a gap, shown by re-running the compiled
  model with another value of it, while NonMaxSuppression, which matches its omitted threshold by
  chance, stays a bug;
- random numbers an operator draws inside (torch tags them ``nondeterministic_seeded``) are not
  compared; a fractional ``correction`` of torch.std is outside its documented int domain;
- sample 5: a module returning its first output again in place of the others, torch's own
  decomposition disagreeing with eager torch (tvm-torch, ov-torch convert it: the library's
  inconsistency; Inductor's decomposition is the compiler's own), OpenVINO string and bf16 gaps;
- a known defect of the library's references (ONNX RoiAlign ``mode='max'``: onnxruntime and
  onnx.reference agree against the spec's text) is ``unstable-reference``, not a compiler bug.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from _run_fixtures import verdict_in_process

from opera.corpus import CorpusReader
from opera.model import OperatorInstance
from opera.outcomes import Outcome

HARVESTED = Path(__file__).resolve().parents[1] / "harvested"


def _by_id(library: str, instance_id: str) -> OperatorInstance:
    for inst in CorpusReader([HARVESTED / f"{library}.jsonl.gz"]):
        if inst.id == instance_id:
            return inst
    raise AssertionError(f"{instance_id} is not in harvested/{library}.jsonl.gz")


@pytest.mark.slow
@pytest.mark.parametrize(
    ("target", "library", "instance_id", "words"),
    [
        ("tvm-onnx", "onnx", "143c17f89e6746cab6a1", "implements the com.microsoft operator"),
        ("tvm-torch", "torch", "41c6075e9e53c369852a", "is not supported"),
        ("tvm-torch", "torch", "804b7c3305e3b4c75342", "computes only its first output"),
        ("tvm-keras", "keras", "3ae4154795d910ef3afc", "is currently not supported"),
        # sample 6: integer log2 (TVM casts only for sqrt/rsqrt), native_layer_norm's mean/rstd that
        # OpenVINO's translator never yields, QuantizeLinear to float4e2m1 (FakeConvert: float8 only)
        ("tvm-torch", "torch", "1414e1296ce2eacb30f0", "requires the input tensor to have float dtype"),
        ("ov-torch", "torch", "e57f4265bf38d3f7006b", "is out of bounds of input list of len"),
        ("ov-onnx", "onnx", "a7dc016401b3f409825b", "Bad format for f8 conversion type"),
        # sample 7: a uint16 model (TVM's TFLite type table has no UINT16, KeyError: 16)
        ("tvm-keras", "keras", "340f225532517c7d4339", "UINT16 (16) have no entry in TVM's TFLite frontend type table"),
        # sample 8: multi_head_attention_forward with a training-mode dropout (OpenVINO's FX table
        # maps native_dropout to skip_node)
        ("ov-torch", "torch", "4d57d9d77ae6080281ae", "a training-mode dropout (aten.dropout.default, p=0.5)"),
        # sample 9: GridSample on a 5-D input ("only supported for 4D input tensors")
        ("ov-onnx", "onnx", "31c8922d50de3df14d78", "is only supported for 4D input tensors"),
        # sample 12: Pow(int32, float32) at opset 15: Pow-12 typed the exponent apart, TVM has Pow-7 only
        ("tvm-onnx", "onnx", "5aaba51f022a0d4b67dd", "Pow-15 types them apart (T, T1), Pow-7 ties them (T)"),
        # the human torch corpus's whole run: x[mask], a boolean mask read (data-dependent size)
        ("tvm-torch", "torch", "fbfef7b71f90eb5c2689", "the given indices dtype is T.bool"),
    ],
)
def test_features_a_frontend_lacks_are_gaps(target: str, library: str, instance_id: str, words: str, state) -> None:
    result = verdict_in_process(state, _by_id(library, instance_id), target)
    assert result.outcome is Outcome.UNSUPPORTED, (result.outcome, result.message[-400:])
    assert words in result.message, result.message


@pytest.mark.slow
def test_float64_is_judged_at_the_precision_openvino_computes_it(state) -> None:
    conv = verdict_in_process(state, _by_id("keras", "ffd932101ea440c2dd36"), "ov-keras")  # float64 conv3d, ~1e7
    assert conv.outcome is Outcome.PASS, (conv.outcome, conv.message[-300:])
    cast = verdict_in_process(state, _by_id("onnx", "9bec86cdbb154bbb2725"), "ov-onnx")  # Inf cast to float64
    assert cast.outcome is Outcome.INCONSISTENT, (cast.outcome, cast.message[-300:])


@pytest.mark.slow
def test_float16_is_judged_at_a_few_ulps(state) -> None:
    """Sample 9: keras.ops.geomspace in float16, where TensorFlow rounds every step to float16 and
    OpenVINO computes in float32 and rounds once: 199.875 vs 200.125 around 200 (2 ulps)."""
    result = verdict_in_process(state, _by_id("keras", "3aabbeda5505579721aa"), "ov-keras")
    assert result.outcome is Outcome.PASS, (result.outcome, result.message[-300:])


@pytest.mark.slow
def test_tvm_keras_following_tflites_own_conversion_is_the_librarys_inconsistency(state) -> None:
    """TF lowers ``isinf`` to ``ABS(x) == FLT_MAX`` for TFLite, so ``nan_to_num`` misses the
    infinities in the flatbuffer itself: TFLite's own interpreter and TVM both give inf where Keras
    gives posinf/neginf. The library disagrees with itself; TVM converts what it was given. Where TVM
    has a defect of its own (``NaN != x`` compiled as an ordered compare: the NaN stays), it does
    not follow TFLite's interpreter and stays inconsistent."""
    import numpy as np

    from opera.model import InstanceKind, Source

    def nan_to_num(x: np.ndarray) -> OperatorInstance:
        return OperatorInstance(
            library="keras", api="keras.ops.nan_to_num", kind=InstanceKind.FUNCTION, args=(x,),
            kwargs={"nan": 2, "neginf": 4, "posinf": 3}, source=Source(suite="t", test="nan_to_num"),
        )  # fmt: skip

    infinities = verdict_in_process(state, nan_to_num(np.array([1.0, np.inf, -np.inf], np.float32)), "tvm-keras")
    assert infinities.outcome is Outcome.UNSTABLE_REFERENCE, (infinities.outcome, infinities.message[-300:])
    assert "TFLite's own interpreter, which the frontend converts and the compiler agrees with" in infinities.message
    nan = verdict_in_process(state, nan_to_num(np.array([1.0, np.nan], np.float32)), "tvm-keras")
    assert nan.outcome is Outcome.INCONSISTENT and "NaN positions differ" in nan.message, (nan.outcome, nan.message[-300:])


@pytest.mark.slow
def test_a_complex_output_keras_declares_as_float_is_decoded_from_the_tflite_tensor_type(state) -> None:
    """A generated ``Lambda`` multiplying complex64 tensors declares a float32 output to Keras; the
    flatbuffer's output is COMPLEX64, which TVM's TFLite frontend hands back as (real, imaginary)
    pairs. Decoded by the Keras dtype, the test compared (2, 3) with (2, 3, 2); decoded by the
    TFLite tensor type, it compares the values, where TVM's MUL multiplies the pairs element by
    element (the judged rc-41ecf50d86)."""
    inst = next(i for i in CorpusReader([HARVESTED / "generated-keras.jsonl.gz"]) if i.id == "5c54d29f1b60f191eaa3")
    result = verdict_in_process(state, inst, "tvm-keras")
    assert result.outcome is Outcome.INCONSISTENT, (result.outcome, result.message[-300:])
    assert "(complex64)" in result.message and "shape" not in result.message, result.message


@pytest.mark.slow
def test_a_keras_argument_tvms_tflite_frontend_reads_as_an_operator_input_is_no_gap(state) -> None:
    """Conv2DTranspose's ``output_padding`` becomes TFLite's ``output_shape`` input, which TVM's
    TRANSPOSE_CONV converter reads and mishandles (judged REAL: bugs/tvm-keras/rc-d427aef2af). Its
    output equals Keras's with output_padding at its default, which the Keras-level "argument
    ignored" check took for a gap: tvm-keras's converters read TFLite, not Keras's arguments."""
    result = verdict_in_process(state, _by_id("keras", "add8c4ac6895c9debd37"), "tvm-keras")
    assert result.outcome is Outcome.INCONSISTENT, (result.outcome, result.message[-300:])
    assert result.signature == "inconsistent:tvm-keras:converter=TRANSPOSE_CONV"


@pytest.mark.slow
def test_a_bfloat16_result_is_confirmed_by_the_float64_reference(state) -> None:
    """keras.ops.image.hsv_to_rgb in bfloat16 with hue 1.0: OpenVINO gives black where Keras (and
    Keras in float64) give red (the judged rc-2b6e14b85d). The float64 second reference was not
    rounded to bfloat16 (numpy calls ml_dtypes' kind 'V', not 'f'), so the two references differed
    by dtype and the test was filed unstable-reference."""
    result = verdict_in_process(state, _by_id("keras", "cf674914f9284407664e"), "ov-keras")
    assert result.outcome is Outcome.INCONSISTENT, (result.outcome, result.message[-300:])
    assert "confirmed by a second reference: keras float64" in result.message


@pytest.mark.slow
@pytest.mark.parametrize("target", ["tvm-onnx", "ov-onnx"])
def test_a_known_defect_of_the_reference_is_no_compiler_verdict(target: str, state) -> None:
    result = verdict_in_process(state, _by_id("onnx", "05e91083ca149d61e4c7"), target)  # RoiAlign mode=max
    assert result.outcome is Outcome.UNSTABLE_REFERENCE, (result.outcome, result.message[-300:])
    assert "known defect of the library's reference" in result.message and "onnx/onnx#4764" in result.message


@pytest.mark.slow
@pytest.mark.parametrize(
    ("instance_id", "words"),
    [
        # SpaceToDepth-28's mode: newer than every opset OpenVINO's frontend knows (27)
        ("8cc26049787f3916ea9b", "attribute mode='CRD': in SpaceToDepth-28, not in SpaceToDepth-13"),
        # sample 7: Attention-25 with both window attributes, which OpenVINO's converter never reads
        ("e4e952292cc0963ce421", "left_window_size=1, right_window_size=2 named nowhere in OpenVINO's ONNX"),
        ("0803795f15a7f82743aa", "attribute layout=1 ignored"),  # GRU-22
        ("e6973e0d0c65204b8cec", "output_size must be a 1D input of shape [2]"),  # Col2Im on a 3-D image
        # sample 8: LSTM-22's peephole P, dropped (its outputs are P's omitted ones, whatever P is)
        ("7b64541ad2a7542e3a54", "optional input P ignored"),
    ],
)
def test_what_openvino_ignores_or_lacks_is_a_gap(instance_id: str, words: str, state) -> None:
    result = verdict_in_process(state, _by_id("onnx", instance_id), "ov-onnx")
    assert result.outcome is Outcome.UNSUPPORTED, (result.outcome, result.message[-400:])
    assert words in result.message, result.message


@pytest.mark.slow
@pytest.mark.parametrize(
    "instance_id",
    [
        "7758e9ea39010f9e2a82",  # ReduceMin, empty axis
        # NonMaxSuppression's strict IoU comparison: its outputs equal those with the optional
        # iou_threshold omitted on this test's boxes, but they move with the threshold (a bug)
        "f2f6bc49a358534b4de8",
    ],
)
def test_a_wrong_result_with_default_attributes_stays_a_bug(instance_id: str, state) -> None:
    result = verdict_in_process(state, _by_id("onnx", instance_id), "ov-onnx")
    assert result.outcome is Outcome.INCONSISTENT, (result.outcome, result.message[-300:])


@pytest.mark.slow
@pytest.mark.parametrize(
    ("target", "library", "instance_id", "outcome", "words"),
    [
        # torch.std(correction=0.5): the documented type is int
        ("ov-torch", "torch", "d503db3c0341869b3fc1", Outcome.UNDEFINED, "correction (int)"),
        # sample 9: topk's indices at tied values ("not guaranteed to be stable")
        ("ov-torch", "torch", "7aaa95d39b205842e4c6", Outcome.UNDEFINED, "indices of tied elements"),
        # torch.std(correction=2): "[PyTorch Frontend] Unexpected value of correction"
        ("ov-torch", "torch", "b0e4f053c49c61756a7c", Outcome.UNSUPPORTED, "Unexpected value of correction"),
        # keras.ops.unique: TOPK_V2 with a k computed at run time, read as a constant by TVM
        ("tvm-keras", "keras", "99481c2b8b81d22dfaef", Outcome.UNSUPPORTED, "bytes-like object"),
        # TFLite options TVM's frontend never reads: GATHER's batch_dims, ARG_MIN's output type
        ("tvm-keras", "keras", "a3ea4704c7c0f00852df", Outcome.UNSUPPORTED, "GATHER.BatchDims=1 never read"),
        ("tvm-keras", "keras", "9030885f7c872d5d5bdf", Outcome.UNSUPPORTED, "ARG_MIN.OutputType=2 never read"),
        # a keyword argument a torch frontend ignores is a gap, as an ONNX attribute is (the
        # project's rule, docs/design.md): torch add's alpha dropped by TVM, and (sample 9)
        # embedding_bag's padding_idx, which OpenVINO's translator never reads
        ("tvm-torch", "torch", "103b337cfc9b172da0cc", Outcome.UNSUPPORTED, "attribute alpha=-3.125 ignored"),
        ("ov-torch", "torch", "b05f4dfb488d430a7a11", Outcome.UNSUPPORTED, "attribute padding_idx=-1 ignored"),
    ],
)
def test_sample_4_classes(target: str, library: str, instance_id: str, outcome: Outcome, words: str, state) -> None:
    result = verdict_in_process(state, _by_id(library, instance_id), target)
    assert result.outcome is outcome, (result.outcome, result.message[-400:])
    assert words in result.message, result.message


@pytest.mark.slow
def test_random_numbers_drawn_inside_an_operator_are_not_compared(state) -> None:
    """Sample 4: fractional_max_pool3d draws its offsets with aten.rand, and Inductor has its own
    generator (the pooled maxima coincide with eager's on some draws, so the outcome is a pass
    either way; before, a difference was an inconsistency)."""
    from opera.templates import get_template

    inst = _by_id("torch", "7a9f59a22d2f72e01500")
    drawn = get_template("torch").draws_random(get_template("torch").build(inst))
    assert drawn is not None and "aten.rand" in drawn
    result = verdict_in_process(state, inst, "inductor-torch")
    # the two reference runs draw again: where their maxima differ the reference disagrees with
    # itself (nondeterministic, values not compared); where they coincide, a difference from
    # Inductor's own draw is not compared (pass). Never an inconsistency.
    assert result.outcome in (Outcome.PASS, Outcome.NONDETERMINISTIC), (result.outcome, result.message[-300:])


@pytest.mark.slow
@pytest.mark.parametrize(
    ("target", "library", "instance_id", "outcome", "words"),
    [
        # sample 5: TVM's module returns native_layer_norm's output again as its mean and rstd
        ("tvm-torch", "torch", "1092c548fcd0d20d011b", Outcome.UNSUPPORTED, "returns its first output again"),
        # torch's own linspace decomposition disagrees with eager torch, and TVM converts it
        ("tvm-torch", "torch", "e3ea450392141e2d74de", Outcome.UNSTABLE_REFERENCE, "run_decompositions"),
        # a string model OpenVINO's core cannot type ("Unknown type")
        ("ov-onnx", "onnx", "0c8fba3222db03ee1b35", Outcome.UNSUPPORTED, "Unknown type"),
        # bfloat16 through OpenVINO's TensorFlow frontend: a dynamic element type reaching Swish
        ("ov-keras", "keras", "9eeeb3282cf195602ead", Outcome.UNSUPPORTED, "and dynamic"),
    ],
)
def test_sample_5_classes(target: str, library: str, instance_id: str, outcome: Outcome, words: str, state) -> None:
    result = verdict_in_process(state, _by_id(library, instance_id), target)
    assert result.outcome is outcome, (result.outcome, result.message[-400:])
    assert words in result.message, result.message


@pytest.mark.slow
def test_inductor_is_judged_on_its_own_decomposition(state) -> None:
    """The same linspace through Inductor stays a bug: torch.compile's decomposition is part of the
    compiler under test (pytorch#137546), not a library it merely consumes."""
    result = verdict_in_process(state, _by_id("torch", "e3ea450392141e2d74de"), "inductor-torch")
    assert result.outcome is Outcome.INCONSISTENT, (result.outcome, result.message[-300:])


@pytest.mark.slow
def test_an_onnx_instance_whose_reference_breaks_the_declared_output_shape_is_invalid(state) -> None:
    """PRelu's slope must be "unidirectional broadcastable to X" (the ONNX PRelu doc); a generated
    mutant with X of shape [5] and a slope of [3, 4, 5] gets X's shape from shape inference while
    onnxruntime broadcasts both ways to [3, 4, 5]. The model is outside the operator's shape rules:
    invalid, not a compiler's inconsistency (OpenVINO's build without snippets even crashes on it)."""
    inst = _by_id("generated-onnx", "d912f2786c89609760a3")
    assert inst.api == "onnx::PRelu"
    result = verdict_in_process(state, inst, "ov-onnx")
    assert result.outcome is Outcome.INVALID
    assert "shape inference gives [5]" in result.message and "[3, 4, 5]" in result.message


@pytest.mark.slow
@pytest.mark.parametrize(
    ("target", "instance_id", "outcome", "words"),
    [
        # generated mutants judged UNDEFINED (whole-corpus run): ReduceMean over an empty set
        # ("yields undefined"), Trilu with upper = -1 or 65537 ("Boolean")
        ("ov-onnx", "db4265c211967ca08921", Outcome.UNDEFINED, "yields undefined"),
        ("tvm-onnx", "db4265c211967ca08921", Outcome.UNDEFINED, "yields undefined"),
        ("ov-onnx", "629258be6d5608448643", Outcome.UNDEFINED, "Boolean"),
        # generated Keras (run 5 of the whole-corpus script): GlobalAveragePooling1D over an empty
        # sequence, NaN in Keras and 0 in OpenVINO
        ("ov-keras", "0eee4331e3ef44c60d0b", Outcome.UNDEFINED, "the mean of an empty set"),
        ("ov-keras", "c4bf2a32ebd6be9478ed", Outcome.UNDEFINED, "the mean of an empty set"),  # moments
        ("ov-keras", "48aa9a7fd5763095c0c0", Outcome.UNDEFINED, "the mean of an empty set"),  # psnr
        # top_k(sorted=False): the same values and indices in another order; none is promised
        ("ov-keras", "a903af7a273fbf50b8cc", Outcome.UNDEFINED, "no order is promised"),
    ],
)
def test_generated_mutants_outside_the_specifications_definitions_are_undefined(
    target: str, instance_id: str, outcome: Outcome, words: str, state
) -> None:
    library = "generated-keras" if target.endswith("keras") else "generated-onnx"
    result = verdict_in_process(state, _by_id(library, instance_id), target)
    assert result.outcome is outcome, (result.outcome, result.message[-400:])
    assert words in result.message, result.message


@pytest.mark.slow
@pytest.mark.parametrize(
    ("instance_id", "words"),
    [
        ("23ba81c615eff432f96b", "Starts and ends shape mismatch"),  # Slice: 3 starts, no ends
        ("52d5ec91f672de129188", "boxes must be a 3D tensor"),  # NonMaxSuppression: rank-6 boxes
    ],
)
def test_a_generated_mutant_onnxruntime_rejects_is_invalid(instance_id: str, words: str, state) -> None:
    """Judged HARNESS on the whole-corpus run: onnx.reference computed these mutants anyway, so a
    frontend's rightful refusal looked like a crash. onnxruntime's refusal, when it is not a missing
    feature, makes a generated instance invalid (a human-written test keeps the fallback)."""
    result = verdict_in_process(state, _by_id("generated-onnx", instance_id), "ov-onnx")
    assert result.outcome is Outcome.INVALID, (result.outcome, result.message[-400:])
    assert "rejects this generated instance" in result.message and words in result.message, result.message


@pytest.mark.slow
@pytest.mark.parametrize(
    ("target", "library", "instance_id", "outcome", "words"),
    [
        # torch.argmax of a slice holding NaN: no documented rule for the index (ov-torch skips NaN)
        ("ov-torch", "torch", "1b78698c0cf30b298405", Outcome.UNDEFINED, "slice holding NaN"),
        # bfloat16 through OpenVINO's TensorFlow frontend: a Convert to the dynamic element type
        ("ov-keras", "keras", "661ca5137bbf1381222a", Outcome.UNSUPPORTED, ":dynamic["),
        # isinf of an int16 tensor is a constant OpenVINO drops: a lost output, not the input compared
        ("ov-keras", "keras", "2201e12664495058a585", Outcome.CRASH, "has no result for declared output 0"),
        # TVM's LayerNormalization returns constant placeholders for Mean and InvStdDev by its source
        ("tvm-onnx", "onnx", "23da11572413d23a1517", Outcome.UNSUPPORTED, "computes only its first output"),
        # sample 11: TVM's convolution converters build the result in float32 only (int64 conv3d)
        ("tvm-torch", "torch", "cf2dba64aa17a4b94c8a", Outcome.UNSUPPORTED, "builds its result in float32 only"),
        # samples 8 and 11: a type the operator gained with the very schema version the model's
        # opset selects, where TVM's converter is older (BitShift-28's signed integers, _impl_v11)
        ("tvm-onnx", "onnx", "56539a75d7622ecb80d6", Outcome.UNSUPPORTED, "tensor(int32) of X, tensor(int32) of Y"),
        # samples 10 and 11 (judged REAL, then UNSUPPORTED): Mod-28 newly defines float inputs with
        # fmod=0, which Mod-13's text excluded; TVM's converter is Mod._impl_v10
        ("tvm-onnx", "onnx", "db42e3112e1298e8c785", Outcome.UNSUPPORTED, "defined since Mod-28"),
        # sample 12: torch.gather of a 0-d input with a 1-d index, outside its documented domain
        ("ov-torch", "torch", "ab86d1922844129b6cdc", Outcome.UNDEFINED, "must have the same number of dimensions"),
    ],
)
def test_sample_10_classes(target: str, library: str, instance_id: str, outcome: Outcome, words: str, state) -> None:
    result = verdict_in_process(state, _by_id(library, instance_id), target)
    assert result.outcome is outcome, (result.outcome, result.message[-400:])
    assert words in result.message, result.message



@pytest.mark.slow
@pytest.mark.parametrize(
    ("target", "instance_id", "outcome", "words"),
    [
        # a complex64 graph input: OpenVINO has no complex element type ("m_element_type.is_static()")
        ("ov-torch", "774822c4381c54c962b2", Outcome.UNSUPPORTED, "OpenVINO has no complex element type"),
        # vector_norm(ord=-inf) of an input holding NaN: min(abs(x)) has no NaN rule in torch's docs
        ("ov-torch", "5031c68aa141b2033647", Outcome.UNDEFINED, "no rule for how a NaN propagates"),
        # index_put with a boolean mask: Relax's IndexPut refuses it ("requires ... integer dtype")
        ("tvm-torch", "dc00b0bcfd8b73840907", Outcome.UNSUPPORTED, "has dtype=T.bool"),
    ],
)
def test_sample_14_classes(target: str, instance_id: str, outcome: Outcome, words: str, state) -> None:
    result = verdict_in_process(state, _by_id("torch", instance_id), target)
    assert result.outcome is outcome, (result.outcome, result.message[-400:])
    assert words in result.message, result.message


@pytest.mark.slow
@pytest.mark.parametrize(
    ("instance_id", "words"),
    [
        # Celu-28 on float16: OpenVINO's frontend knows schemas up to an older opset (samples 8, 13)
        ("b7f4fd5a26fe59ba73e5", "came with Celu-28"),
        # Attention-25's sliding window: the attribute is named nowhere in the library (sample 14)
        ("de4ced5b2914fe2fcb85", "left_window_size=2 named nowhere in OpenVINO's ONNX frontend library"),
    ],
)
def test_what_openvinos_onnx_library_cannot_implement(instance_id: str, words: str, state) -> None:
    result = verdict_in_process(state, _by_id("onnx", instance_id), "ov-onnx")
    assert result.outcome is Outcome.UNSUPPORTED, (result.outcome, result.message[-400:])
    assert words in result.message, result.message


@pytest.mark.slow
@pytest.mark.parametrize(
    ("target", "library", "instance_id", "outcome", "words"),
    [
        # torch.amax over slices holding NaN: no NaN rule in its docs (OpenVINO's ReduceMax drops a
        # NaN unless it is a slice's last element)
        ("ov-torch", "torch", "27bd0ada188a27683c80", Outcome.UNDEFINED, "torch.amax/amin: no rule says how a NaN"),
        # nansum of int64: torch decomposes it into aten.isnan, which OpenVINO maps to float-only IsNaN
        ("ov-torch", "torch", "6ecda2aac2fccc349d70", Outcome.UNSUPPORTED, "must be a floating point number"),
        # MaxPool-22 (ceil_mode drops windows starting in the right padding): OpenVINO's output has
        # MaxPool-12's shape for the model
        ("ov-onnx", "onnx", "8e16755cd8b1595623fc", Outcome.UNSUPPORTED, "are the ones MaxPool-12 defines"),
    ],
)
def test_sample_15_classes(target: str, library: str, instance_id: str, outcome: Outcome, words: str, state) -> None:
    result = verdict_in_process(state, _by_id(library, instance_id), target)
    assert result.outcome is outcome, (result.outcome, result.message[-400:])
    assert words in result.message, result.message


def _new_kinds(instance_id: str) -> OperatorInstance:
    """Instances of the new value and dtype mutation kinds (tests/data/generated_new_kinds.jsonl)."""
    for inst in CorpusReader([Path(__file__).parent / "data" / "generated_new_kinds.jsonl"]):
        if inst.id == instance_id:
            return inst
    raise AssertionError(f"{instance_id} is not in tests/data/generated_new_kinds.jsonl")


@pytest.mark.slow
@pytest.mark.parametrize(
    ("target", "instance_id", "outcome", "words"),
    [
        # Pad with axes [-3, -3] (a 'ties' re-draw): "Behavior is undefined if an axis is repeated"
        ("tvm-onnx", "a46ce151f7204745f6fe", Outcome.UNDEFINED, "Behavior is undefined if an axis is repeated"),
        # TopK over values holding NaN (a 'special' re-draw): no NaN order in the spec
        ("ov-onnx", "0ffcafe1d90027d323ba", Outcome.UNDEFINED, "nothing about NaN"),
        # HardSigmoid of NaN: max(0, min(1, ...)), and Max/Min leave NaN open
        ("tvm-onnx", "11bd3919b2d23d78ed7b", Outcome.UNDEFINED, "Max/Min do not say how NaN propagates"),
        # a float64 transpose of +-DBL_MAX on OpenVINO: the CPU plugin computes float64 in float32
        ("ov-onnx", "c8e81c2c85947a91b81d", Outcome.UNSUPPORTED, "computes float64 in float32"),
    ],
)
def test_new_value_kinds_classes(target: str, instance_id: str, outcome: Outcome, words: str, state) -> None:
    """The judged non-REAL classes of the new mutation kinds (8 of their 27 new signatures judged)."""
    result = verdict_in_process(state, _new_kinds(instance_id), target)
    assert result.outcome is outcome, (result.outcome, result.message[-400:])
    assert words in result.message, result.message


# Generated ONNX mutants with an attribute outside its documented values, judged UNDEFINED on the
# whole-corpus run (TopK sorted=-1, keepdims=-1, periodic=-1, LpPool p=0): now undefined before
# any compiler runs, as Trilu's upper already was
GENERATED_OUTSIDE_THE_DOMAIN = [
    ("2abdc6d073cd304eb00a", "sorted is"),
    ("ac9a55b1159ae120ed80", "keepdims is"),
    ("636d6bb09f713f885e05", "periodic"),
    ("5a7cd7bd4dbf793f79bc", "Lp norm"),
    # ... and inputs the schema calls a scalar given more dimensions
    ("6fb859837ea61787169b", "It is a scalar"),  # NonMaxSuppression's max_output_boxes_per_class, rank 6
    ("1760a679ceff566e02f6", "each a 'Scalar'"),  # Range's limit as [1, 1]
]


@pytest.mark.parametrize(("instance_id", "words"), GENERATED_OUTSIDE_THE_DOMAIN)
def test_generated_attribute_values_outside_the_spec_are_undefined(instance_id: str, words: str, state) -> None:
    result = verdict_in_process(state, _by_id("generated-onnx", instance_id), "tvm-onnx")
    assert result.outcome is Outcome.UNDEFINED, (result.outcome, result.message[-300:])
    assert "outside the operator's domain" in result.message and words in result.message, result.message


def test_attribute_values_the_spec_defines_stay_in_the_domain() -> None:
    import numpy as np

    from opera.verdict.oracles import load_oracle_config
    from opera.verdict.undefined import outside_domain

    rules = load_oracle_config().undefined
    x = np.zeros((2, 3), np.float32)
    for api, kwargs in [
        ("onnx::TopK", {"sorted": 0}),
        ("onnx::TopK", {"sorted": 1}),
        ("onnx::ReduceSum", {"keepdims": 0}),
        ("onnx::HannWindow", {"periodic": 1}),
        ("onnx::LpPool", {"p": 1}),
        ("onnx::LpPool", {"p": 3}),
    ]:
        data = np.int32(10) if api.endswith("Window") else x  # a window's size is a scalar
        assert outside_domain(rules, api, kwargs, {"input_0": data}, [x]) is None, (api, kwargs)
    one = np.ones(1, np.int64)
    assert outside_domain(rules, "onnx::NonMaxSuppression", {}, {"input_0": x, "input_2": one}, [x]) is None  # as the node tests write it
    assert outside_domain(rules, "onnx::Range", {}, {"input_0": np.int64(0), "input_1": np.int64(3)}, [x]) is None
    assert outside_domain(rules, "onnx::Range", {}, {"input_0": np.int64(0), "input_1": one}, [x]) is not None
    assert outside_domain(rules, "onnx::ReduceSum", {"keepdims": 65537}, {"input_0": x}, [x]) is not None
    assert outside_domain(rules, "onnx::LpPool", {"p": -1}, {"input_0": x}, [x]) is not None


@pytest.mark.parametrize(("instance_id", "op"), [("65cced107632dfbb7c27", "STFT"), ("c87179365477f3f33568", "CenterCropPad")])
def test_a_generated_instance_onnxruntime_rejects_as_the_frontends_get_it_is_invalid(instance_id: str, op: str, state) -> None:
    """Generated mutants onnxruntime runs with every input fed at run time and rejects once the
    parameter inputs are constants, the model every ONNX frontend gets (STFT's frame_length and
    CenterCropPad's shape given another rank): judged UNDEFINED on the whole-corpus run, now
    invalid, as the library itself refuses them. A domain rule says more where one applies
    (HammingWindow's size as int32[1] is `undefined` by the window ops' rule)."""
    result = verdict_in_process(state, _by_id("generated-onnx", instance_id), "tvm-onnx")
    assert result.outcome is Outcome.INVALID, (result.outcome, result.message[-300:])
    assert "once its parameter inputs are constants" in result.message and op in result.message, result.message
