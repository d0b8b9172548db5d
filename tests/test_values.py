"""Round-trip properties of the tagged value encoding (docs/design.md, Tagged values)."""

from __future__ import annotations

import json
import math

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from opera.values import (
    DTYPES,
    CallableRef,
    DType,
    EnumValue,
    ObjectSpec,
    Opaque,
    TensorSpec,
    ValueEncodingError,
    contains_opaque,
    decode_value,
    encode_value,
)

NATIVE_DTYPES = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
                 "float16", "float32", "float64", "complex64", "complex128"]
ML_DTYPES = ["bfloat16", "float8_e4m3fn", "float8_e5m2"]


def _same(a: object, b: object) -> bool:
    """Structural equality where NaN equals NaN and arrays compare bit for bit."""
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return (
            isinstance(a, np.ndarray)
            and isinstance(b, np.ndarray)
            and a.dtype == b.dtype
            and a.shape == b.shape
            and a.tobytes() == b.tobytes()
        )
    if isinstance(a, np.generic) or isinstance(b, np.generic):
        return type(a) is type(b) and np.asarray(a).tobytes() == np.asarray(b).tobytes()
    if isinstance(a, float) and isinstance(b, float):
        return (math.isnan(a) and math.isnan(b)) or a == b
    if isinstance(a, complex) and isinstance(b, complex):
        return _same(a.real, b.real) and _same(a.imag, b.imag)
    if type(a) is not type(b):
        return False
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))  # type: ignore[arg-type]
    if isinstance(a, dict):
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)  # type: ignore[index]
    if isinstance(a, ObjectSpec):
        return a.api == b.api and _same(a.args, b.args) and _same(a.kwargs, b.kwargs)  # type: ignore[attr-defined]
    return a == b


def _roundtrip(value: object) -> object:
    # Through real JSON text, as the corpus stores it.
    return decode_value(json.loads(json.dumps(encode_value(value), allow_nan=False)))


shapes = hnp.array_shapes(min_dims=0, max_dims=6, min_side=0, max_side=4)


@st.composite
def native_arrays(draw: st.DrawFn) -> np.ndarray:
    name = draw(st.sampled_from(NATIVE_DTYPES))
    return draw(hnp.arrays(dtype=DTYPES[name], shape=shapes))


@st.composite
def ml_arrays(draw: st.DrawFn) -> np.ndarray:
    """bfloat16 / float8 arrays: draw float32 values (NaN/Inf included) and cast."""
    name = draw(st.sampled_from(ML_DTYPES))
    base = draw(hnp.arrays(dtype=np.float32, shape=shapes))
    return base.astype(DTYPES[name])


@given(native_arrays())
@settings(max_examples=300, deadline=None)
def test_tensor_roundtrip_native_dtypes(arr: np.ndarray) -> None:
    assert _same(_roundtrip(arr), arr)


@given(ml_arrays())
@settings(max_examples=100, deadline=None)
def test_tensor_roundtrip_bfloat16_and_float8(arr: np.ndarray) -> None:
    assert _same(_roundtrip(arr), arr)


def test_every_library_dtype_roundtrips_including_non_contiguous_and_big_endian() -> None:
    for name, dt in DTYPES.items():
        arr = (np.arange(24).reshape(2, 3, 4) % 3).astype(dt)
        assert _same(_roundtrip(arr), arr), name
    transposed = np.arange(12, dtype=np.float32).reshape(3, 4).T
    assert _same(_roundtrip(transposed), np.ascontiguousarray(transposed))
    big_endian = np.arange(5, dtype=">i4")
    back = _roundtrip(big_endian)
    assert isinstance(back, np.ndarray) and back.tolist() == [0, 1, 2, 3, 4] and back.dtype == np.int32


scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.complex_numbers(allow_nan=True, allow_infinity=True),
    st.text(max_size=8),
    st.binary(max_size=8),
    st.just(Ellipsis),
    st.sampled_from(sorted(DTYPES)).map(DType),
    st.builds(EnumValue, type=st.sampled_from(["torch.memory_format", "torch.layout"]), name=st.text(min_size=1, max_size=8)),
    st.builds(CallableRef, qualname=st.sampled_from(["torch.nn.functional.relu", "keras.activations.gelu"])),
    st.builds(Opaque, type=st.text(min_size=1, max_size=8), reason=st.text(max_size=10)),
    st.builds(
        TensorSpec,
        dtype=st.sampled_from(sorted(DTYPES)),
        shape=st.lists(st.one_of(st.none(), st.integers(0, 5)), max_size=6).map(tuple),
        seed=st.integers(0, 2**31),
        low=st.floats(-10, 0),
        high=st.floats(0, 10),
    ),
    st.sampled_from(NATIVE_DTYPES + ML_DTYPES).flatmap(
        lambda name: st.floats(-100, 100, width=16).map(lambda x: np.array(x).astype(DTYPES[name])[()])
    ),
    st.builds(slice, st.one_of(st.none(), st.integers(-5, 5)), st.one_of(st.none(), st.integers(-5, 5)), st.one_of(st.none(), st.integers(1, 3))),
)

hashable_keys = st.one_of(st.text(max_size=5), st.integers(-3, 3), st.none(), st.booleans())

values = st.recursive(
    st.one_of(scalars, native_arrays()),
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.lists(children, max_size=4).map(tuple),
        st.dictionaries(hashable_keys, children, max_size=4),
        st.builds(
            ObjectSpec,
            api=st.sampled_from(["torch.nn.Linear", "keras.layers.Dense"]),
            args=st.lists(children, max_size=3).map(tuple),
            kwargs=st.dictionaries(st.text(min_size=1, max_size=5), children, max_size=3),
        ),
    ),
    max_leaves=12,
)


@given(values)
@settings(max_examples=400, deadline=None)
def test_any_supported_value_roundtrips(value: object) -> None:
    assert _same(_roundtrip(value), value)


def test_encoded_json_is_strict_json_even_with_nan_and_inf() -> None:
    encoded = encode_value([math.nan, math.inf, -math.inf, complex(math.nan, 1)])
    text = json.dumps(encoded, allow_nan=False)  # raises if a bare NaN slipped through
    assert "NaN" not in text and "Infinity" not in text


def test_small_integer_tensor_data_list_form_is_accepted_on_read() -> None:
    value = decode_value({"$tensor": {"dtype": "int64", "shape": [3], "data": [0, 2, 1]}})
    assert isinstance(value, np.ndarray) and value.dtype == np.int64 and value.tolist() == [0, 2, 1]


def test_tensor_spec_materializes_deterministically_within_range() -> None:
    spec = TensorSpec("float32", (None, 3, 4), seed=7, low=0.5, high=2.0)
    a, b = spec.materialize(), spec.materialize()
    assert a.shape == (2, 3, 4) and a.dtype == np.float32
    assert np.array_equal(a, b) and a.min() >= 0.5 and a.max() <= 2.0
    assert not np.array_equal(a, TensorSpec("float32", (None, 3, 4), seed=8, low=0.5, high=2.0).materialize())
    ints = TensorSpec("int64", (50,), seed=1, low=-2, high=2).materialize()
    assert ints.min() >= -2 and ints.max() <= 2 and ints.dtype == np.int64
    assert TensorSpec("bfloat16", (4,)).materialize().dtype == np.dtype(ml_dtypes.bfloat16)


@pytest.mark.parametrize(
    "bad",
    [
        {"$nope": 1},
        {"$tensor": {"dtype": "float32"}},
        {"$tensor": {"dtype": "float99", "shape": [1], "b64": ""}},
        {"$tensor": {"dtype": "float32", "shape": [2], "b64": "AAAAAA=="}},
        {"$float": "bogus"},
        {"$tuple": [1], "$list": []},
    ],
)
def test_malformed_encodings_raise_value_encoding_error(bad: object) -> None:
    with pytest.raises(ValueEncodingError):
        decode_value(bad)


def test_unencodable_python_object_raises() -> None:
    with pytest.raises(ValueEncodingError, match="no encoding"):
        encode_value(object())


def test_contains_opaque_finds_nested_opaque() -> None:
    inner = Opaque("torch.Generator", "stateful RNG object")
    assert contains_opaque([1, {"k": (2, ObjectSpec("torch.nn.Linear", (inner,)))}]) == inner
    assert contains_opaque([1, (2.0, "x"), {"a": np.zeros(2)}]) is None
