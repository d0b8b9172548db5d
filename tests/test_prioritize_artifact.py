"""The ``opera-artifact`` strategy: the OPERA artifact's prioritization code, rule for rule.

Hand-checkable examples of its rules (operator rate, heap key, distance-0 operators in a seeded
shuffle at the end, the raw-defaults quirk), and its order against the artifact's own output on
real data vendored under ``tests/data/artifact_tcp/`` (sources in its README).
"""

from __future__ import annotations

import gzip
import random
from pathlib import Path

import pytest

from opera.model import InstanceKind, OperatorInstance
from opera.prioritize import PrioritizeContext, prioritize, strategy_names
from opera.prioritize.artifact import (
    ArtifactCase,
    abstract_int,
    abstract_list,
    abstract_value,
    artifact_order,
    distance,
    load_cases,
    onnx_defaults,
    operator_rates,
)
from opera.prioritize.equipped import EquippedReader

DATA = Path(__file__).parent / "data" / "artifact_tcp"
EQUIPPED = Path(__file__).parent / "data" / "equipped"


def _ids(path: Path) -> list[int]:
    return [int(line) for line in path.read_text().split()]


# ---- encode.py ---------------------------------------------------------------------------------
def test_abstraction_follows_encode_py() -> None:
    assert [abstract_int(v) for v in (None, -7, -1, 0, 1, 9)] == [-100, -2, -1, 0, 1, 2]
    # a two-element list gains its relation: ordered ints -1/1, equal 0, anything else -1
    assert abstract_list([1, 3]) == [1, 2, -1]
    assert abstract_list([3, 1]) == [2, 1, 1]
    assert abstract_list([5, 7]) == [2, 2, 0]  # equal after abstraction
    assert abstract_list([[3, 4], [2]]) == [[2, 2, 0], [2], -1]
    assert abstract_list([None, None, 4]) == [2, -100, 2]  # a first None is a batch size
    assert abstract_value(0.0) == -0.1 and abstract_value(1e-9) == 0.1
    assert abstract_value(True) is True  # bools are ints there: -1/0/1 stay as they are
    assert abstract_value(b"UPPER") == "UPPER"
    # abstracting twice is not the identity for None: the artifact's raw-defaults quirk rests on it
    assert abstract_value(abstract_value(None)) == -2


# ---- the rules on hand-made tests --------------------------------------------------------------
def _case(pos: int, op: str, a: int, b: int) -> ArtifactCase:
    return ArtifactCase(pos=pos, op=op, params={"a": a, "b": b}, iid=f"{op}{pos}")


DEFAULTS = {op: {"a": 0, "b": 0} for op in "XYZW"}


def test_operator_rate_is_one_minus_the_product_of_equipped_over_all_counts() -> None:
    # X: the compiler's test selects a in {0 (default), 1}, b in {0}, pair (b, a) in {(0, 1)};
    # with the corpus's test: a in {0, 1, 2}, b in {0, 1}, (b, a) in {(0, 1), (1, 2)}.
    # rate = 1 - 2/3 * 1/2 * 1/2 = 5/6. Y: no compiler test, rate 1. Z: nothing new, rate 0.
    corpus = {"X": [_case(0, "X", 2, 1)], "Y": [_case(1, "Y", 1, 0)], "Z": [_case(2, "Z", 0, 0)]}
    equipped = {"X": [_case(0, "X", 1, 0)], "Z": [_case(1, "Z", 0, 0)], "W": [_case(2, "W", 2, 2)]}
    rates = operator_rates(corpus, equipped, DEFAULTS)
    assert rates == pytest.approx({"X": 5 / 6, "Y": 1.0, "Z": 0.0})


def test_pair_table_starts_from_the_first_tests_values() -> None:
    # case.py TCDict.add: the pair (b, a) starts as (default of b, the first test's a), so the
    # default setting itself is new as a pair: distance 1, not 0.
    corpus = [_case(0, "Y", 1, 0), _case(1, "Y", 0, 0)]
    result = artifact_order(corpus, [], DEFAULTS)
    assert [tc.pos for tc in result.order] == [1, 0]
    assert result.first_distance == {"Y": 1.0}


def test_heap_order_and_distance_zero_operators_last_in_a_seeded_shuffle() -> None:
    corpus = [
        _case(0, "W", 0, 0),  # W and Z: nothing new from the start, never in the heap
        _case(1, "W", 0, 0),
        _case(2, "X", 2, 1),  # rate 5/6, distance max((1/2 + 1)/2, 1/2) = 0.75: key 0.625
        _case(3, "Y", 1, 0),  # rate 1, distance 0.5
        _case(4, "Y", 0, 0),  # rate 1, distance 1 (see the pair-table test)
        _case(5, "X", 2, 1),  # X's duplicate: distance 0 after the first, key 0
        *[_case(p, "Z", 0, 0) for p in range(6, 11)],
    ]
    equipped = [_case(0, "X", 1, 0), _case(1, "Z", 0, 0)]
    result = artifact_order(corpus, equipped, DEFAULTS)
    order = [tc.pos for tc in result.order]
    # heap: Y(1.0), X(0.625), Y(0.5), then X's key-0 entry is still emitted (and ends X)
    assert order[: result.heap_count] == [4, 2, 3, 5]
    assert result.first_distance["W"] == 0 and result.first_distance["Z"] == 0
    # the rest, operators by equipped/corpus count (Z 1/5 before W 0), shuffled with seed 1
    tail = [6, 7, 8, 9, 10, 0, 1]
    random.Random(1).shuffle(tail)
    assert order[result.heap_count :] == tail
    assert tail != [0, 1, 6, 7, 8, 9, 10] and order[result.heap_count :] != [0, 1, 6, 7, 8, 9, 10]


def test_a_rate_zero_operator_gets_one_heap_slot_at_key_zero() -> None:
    # Z's compiler tests cover every value the corpus has for it: rate 0, so its key is 0 however
    # new its best test is; it is popped after every positive key and then stops.
    corpus = [_case(0, "Z", 2, 2), _case(1, "Z", 2, 2), _case(2, "Y", 1, 0)]
    equipped = [_case(0, "Z", 2, 2)]
    rates = operator_rates({"Z": corpus[:2], "Y": corpus[2:]}, {"Z": equipped}, DEFAULTS)
    assert rates["Z"] == 0.0
    result = artifact_order(corpus, equipped, DEFAULTS)
    assert [tc.pos for tc in result.order[: result.heap_count]] == [2]  # Z's best distance is 0 too
    # A corpus pair the compiler's tests "have" only through their pair table's start (default b,
    # first compiler test's a = 2) is new to the corpus's table (which starts from its own first
    # test): rate 0, distance 1/2. Key 0: after Y, emitted, and then Z stops (its rest is shuffled).
    corpus = [_case(0, "Z", 1, 0), _case(1, "Z", 2, 0), _case(2, "Y", 1, 0)]
    equipped = [_case(0, "Z", 2, 1), _case(1, "Z", 1, 0)]
    result = artifact_order(corpus, equipped, DEFAULTS)
    assert result.rates["Z"] == 0.0
    assert result.first_distance["Z"] == 0.5
    assert [tc.pos for tc in result.order] == [2, 1, 0]
    assert result.heap_count == 2


def test_distance_is_the_max_of_single_and_pair_distance() -> None:
    singles = {"a": [0, 1], "b": [0], "c": [0]}
    pairs = {("b", "a"): [(0, 1)], ("c", "a"): [(0, 0), (0, 1)]}
    # singles: a new (1/2), b new (1), c old -> 1.5/3 = 0.5;
    # pairs: (b,a) new among 1 -> 1, (c,a) new among 2 -> 1/2, (c,b) never seen -> 1: 2.5/3
    assert distance({"a": 2, "b": 1, "c": 0}, singles, pairs) == pytest.approx(2.5 / 3)
    assert distance({}, singles, pairs) == 0


# ---- the real artifact ---------------------------------------------------------------------------
def test_first_instance_of_an_operator_is_completed_with_raw_defaults() -> None:
    corpus = list(EquippedReader(DATA / "corpus_slice.txt"))
    cases, _, defaults = load_cases(corpus, [])
    normalizer = [c for c in cases if c is not None and c.op == "StringNormalizer"]
    assert len(normalizer) == 6
    # 'locale' has no default (None): -100 for the first test, -100 abstracted again (-2) later
    assert [c.params["locale"] for c in normalizer] == [-100, -2, -2, -2, -2, -2]
    assert defaults["StringNormalizer"]["locale"] == -100
    # and the artifact's parameters: schema attributes in onnx 1.14.1's order, then the tensors
    assert list(normalizer[0].params) == [
        "case_change_action",
        "is_case_sensitive",
        "locale",
        "stopwords",
        "input_shape",
        "input_dtype",
        "output_dtype",
        "output_shape",
    ]
    # ConvTranspose's attribute output_shape and the output-shape parameter are one key there
    conv = next(c for c in cases if c is not None and c.op == "ConvTranspose")
    assert list(conv.params).count("output_shape") == 1
    assert list(conv.params).index("output_shape") == 5


def test_onnx_defaults_table_and_fallback() -> None:
    assert list(onnx_defaults("ArgMin") or {}) == [
        "axis", "keepdims", "select_last_index", "input_shape", "input_dtype", "output_dtype", "output_shape"
    ]  # fmt: skip
    assert (onnx_defaults("Cast") or {}).get("saturate") == 1  # onnx 1.14.1's Cast has no round_mode
    assert "round_mode" not in (onnx_defaults("Cast") or {})
    rms = onnx_defaults("RMSNormalization")  # newer than onnx 1.14.1: the installed onnx's schema
    assert rms is not None and list(rms)[:3] == ["axis", "epsilon", "stash_type"]
    assert onnx_defaults("LabelEncoder") is None  # ai.onnx.ml: the artifact cannot load it


def test_slice_reproduces_the_artifact_codes_order() -> None:
    expected = _ids(DATA / "ranked_slice_4_ov.txt")
    corpus = list(EquippedReader(DATA / "corpus_slice.txt", opaque_shapes=True))
    equipped = list(EquippedReader(DATA / "ov_equipped_slice.txt", opaque_shapes=True))
    result = artifact_order(*load_cases(corpus, equipped))
    assert [tc.pos + 1 for tc in result.order] == expected
    # through the strategy: Opera ids, each once, then the tests the artifact does not load
    ordering = prioritize(corpus, "opera-artifact", PrioritizeContext(equipped=equipped))
    by_line = {k + 1: inst.id for k, inst in enumerate(corpus)}
    loaded = list(dict.fromkeys(by_line[t] for t in expected))
    skipped = [i.id for i in corpus if i.api.split("::")[1] in {"Adagrad", "Adam", "ArrayFeatureExtractor", "Binarizer"}]
    assert ordering.ids == loaded + skipped
    assert len(skipped) == 6
    assert ordering.notes["not_loaded"] == 6


def test_opaque_input_shapes_change_the_order() -> None:
    # Opera's reader keeps a string input as Opaque("tensor of STRING"): without its recorded shape
    # two StringNormalizer tests tie and swap, and the order is no longer the artifact's
    expected = _ids(DATA / "ranked_slice_4_ov.txt")
    corpus = list(EquippedReader(DATA / "corpus_slice.txt"))
    equipped = list(EquippedReader(DATA / "ov_equipped_slice.txt"))
    got = [tc.pos + 1 for tc in artifact_order(*load_cases(corpus, equipped)).order]
    differ = [k for k, (a, b) in enumerate(zip(got, expected, strict=True)) if a != b]
    assert differ
    assert {corpus[got[k] - 1].api for k in differ} >= {"onnx::StringNormalizer"}


def test_published_tvm_order_is_reproduced(tmp_path: Path) -> None:
    expected = _ids(DATA / "ranked_onnx_tc_4_tvm.counts")
    paths = {}
    for name in ("original_migrated_onnx_tc.txt", "tvm_equipped_onnx_tc.txt"):
        paths[name] = tmp_path / name
        paths[name].write_bytes(gzip.decompress((EQUIPPED / f"{name}.gz").read_bytes()))
    corpus = list(EquippedReader(paths["original_migrated_onnx_tc.txt"], opaque_shapes=True))
    equipped = list(EquippedReader(paths["tvm_equipped_onnx_tc.txt"], opaque_shapes=True))
    result = artifact_order(*load_cases(corpus, equipped))
    assert len(expected) == 1004
    assert [tc.pos + 1 for tc in result.order] == expected


def test_strategy_is_registered_and_puts_rejected_instances_last() -> None:
    assert "opera-artifact" in strategy_names()
    insts = [
        OperatorInstance(
            library="onnx", api="onnx::Relu", kind=InstanceKind.ONNX_NODE, inputs=(),
            kwargs={"k": k}, valid=False if k == 1 else None,
        )
        for k in range(4)
    ]  # fmt: skip
    ordering = prioritize([*insts, insts[0]], "opera-artifact")
    assert sorted(ordering.ids) == sorted(i.id for i in insts)
    assert ordering.ids[-1] == insts[1].id
