"""`opera generate`: mutation kinds, determinism, the validity learner, the real gate, bad input.

Most tests use small hand-made instances and a fake gate (a rule deciding validity), so they say
exactly which behaviour broke; ``test_real_gate_*`` send a handful of mutants of each library
through the real validity gate (marked slow: they import the libraries).
"""

from __future__ import annotations

import gzip
import json
import random
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from _generate_fixtures import HUMAN, SMALL, RuleGate, corpus_file, torch_fn, x

from opera.cli import main
from opera.corpus import read_corpus, write_corpus
from opera.generate import GENERATED_SUITE, GENERATOR, GenerateOptions, generate
from opera.generate.feedback import ValidityLearner
from opera.generate.gate import InProcessGate, IsolatedGate
from opera.generate.mutations import LARGE_INT, MAX_RANK, Choice, apply_mutation, mutation_choices
from opera.generate.profiles import learn_profiles
from opera.generate.related import related_operators
from opera.harvest.manifest import build_manifest
from opera.model import InstanceKind, OperatorInstance, Origin
from opera.outcomes import Outcome, Stage, TestResult
from opera.prioritize.partitions import partition
from opera.report.by_source import breakdown_by_source, source_of
from opera.templates import get_template
from opera.values import DType, TensorSpec

REPO = Path(__file__).resolve().parents[1]




def mutate(insts: list[OperatorInstance], kind: str, parameter: str, seed: int = 0) -> OperatorInstance:
    """Apply one (parameter, kind) to the first instance; the others only teach the profile."""
    profiles = learn_profiles(insts)
    prof = profiles[insts[0].api]
    related = [profiles[r] for r in related_operators(profiles).get(insts[0].api, [])]
    choice = Choice(parameter, kind)
    assert choice in mutation_choices(insts[0], prof, related), f"{choice} not offered"
    mutated = apply_mutation(insts[0], choice, prof, random.Random(seed), related)
    assert mutated is not None
    return mutated.instance


# ---- each mutation kind does what it says ------------------------------------------------------
SOFTMAX = torch_fn("torch.nn.functional.softmax", x(2, 3), dim=1)


@pytest.mark.parametrize(("kind", "expected"), [("int:-1", -1), ("int:0", 0), ("int:large", LARGE_INT)])
def test_int_boundaries(kind: str, expected: int) -> None:
    assert mutate([SOFTMAX], kind, "kw:dim").kwargs["dim"] == expected


def test_int_boundary_not_offered_for_the_current_value() -> None:
    prof = learn_profiles([SOFTMAX])["torch.nn.functional.softmax"]
    assert Choice("kw:dim", "int:1") not in mutation_choices(SOFTMAX, prof)


LEAKY = torch_fn("torch.nn.functional.leaky_relu", x(4), negative_slope=0.5, inplace=False)


@pytest.mark.parametrize(
    ("kind", "check"),
    [
        ("float:0", lambda v: v == 0.0),
        ("float:negative", lambda v: v == -0.5),
        ("float:tiny", lambda v: 0 < v < 1e-20),
        ("float:huge", lambda v: v > 1e20),
    ],
)
def test_float_kinds(kind: str, check: Callable[[float], bool]) -> None:
    assert check(mutate([LEAKY], kind, "kw:negative_slope").kwargs["negative_slope"])


def test_bool_flip() -> None:
    assert mutate([LEAKY], "bool:flip", "kw:inplace").kwargs["inplace"] is True


def test_enum_swap_takes_another_value_seen_for_the_parameter() -> None:
    insts = [
        torch_fn("torch.nn.functional.mse_loss", x(3), x(3), reduction=r) for r in ("mean", "sum", "none")
    ]
    new = mutate(insts, "enum:swap", "kw:reduction").kwargs["reduction"]
    assert new in ("sum", "none")
    lonely = learn_profiles(insts[:1])["torch.nn.functional.mse_loss"]
    assert Choice("kw:reduction", "enum:swap") not in mutation_choices(insts[0], lonely)


def test_dtype_parameter_swaps_to_another_seen_dtype() -> None:
    insts = [torch_fn("torch.ones", (2, 3), dtype=DType(d)) for d in ("float32", "int64")]
    assert mutate(insts, "enum:swap", "kw:dtype").kwargs["dtype"] == DType("int64")


def test_sequence_element_to_boundary() -> None:
    inst = torch_fn("torch.nn.functional.avg_pool2d", x(1, 1, 4, 4), kernel_size=(3, 3))
    new = mutate([inst], "seq:int:0", "kw:kernel_size").kwargs["kernel_size"]
    assert isinstance(new, tuple) and sorted(new) == [0, 3]


def test_tensor_rank_changes_rank_and_keeps_trailing_dims() -> None:
    inst = torch_fn("torch.add", x(2, 3), x(2, 3))
    for seed in range(10):
        new = mutate([inst], "tensor:rank", "arg0", seed).args[0]
        assert isinstance(new, TensorSpec) and len(new.shape) != 2 and 0 <= len(new.shape) <= MAX_RANK
        assert new.shape[-2:] == (2, 3) if len(new.shape) > 2 else new.shape == (2, 3)[2 - len(new.shape) :]
        assert new.dtype == "float32"


def test_tensor_zero_size_dimension() -> None:
    new = mutate([torch_fn("torch.add", x(2, 3), x(5))], "tensor:zero", "arg0").args[0]
    assert 0 in new.shape and len(new.shape) == 2


def test_tensor_dtype() -> None:
    new = mutate([torch_fn("torch.abs", x(2, 3))], "tensor:dtype", "arg0").args[0]
    assert new.dtype != "float32" and new.shape == (2, 3)


def test_dtype_new_picks_a_dtype_never_seen_for_the_parameter() -> None:
    seen = [torch_fn("torch.abs", x(2, 3)), torch_fn("torch.abs", x(4, dtype="float64"))]
    for seed in range(8):
        new = mutate(seen, "tensor:dtype-new", "arg0", seed).args[0]
        assert new.dtype not in ("float32", "float64") and new.shape == (2, 3)
    assert {mutate(seen, "tensor:dtype-new", "arg0", s).args[0].dtype for s in range(40)} >= {"int8", "int16", "uint16"}


@pytest.mark.parametrize(
    ("cls", "check"),
    [
        ("zeros", lambda a: not a.any()),
        ("negative", lambda a: (a < 0).all()),
        ("special", lambda a: np.isnan(a).any() and np.isinf(a).any()),
        ("boundary", lambda a: set(np.unique(a)) <= {np.finfo(np.float32).min, np.finfo(np.float32).max,
                                                     np.finfo(np.float32).tiny, -np.finfo(np.float32).tiny}),
        ("ties", lambda a: (a == a.flat[0]).all()),
        ("small", lambda a: set(np.unique(a)) <= {-2, -1, 0, 1, 2}),
    ],
)  # fmt: skip
def test_values_are_redrawn_from_one_class_keeping_shape_and_dtype(cls: str, check: Callable[[np.ndarray], bool]) -> None:
    new = mutate([torch_fn("torch.abs", x(8, 8))], f"tensor:values:{cls}", "arg0").args[0]
    assert isinstance(new, np.ndarray) and new.shape == (8, 8) and new.dtype == np.float32 and check(new)


def test_integer_values_stay_in_their_dtype_and_large_tensors_are_not_redrawn() -> None:
    ints = torch_fn("torch.abs", x(3, 4, dtype="int8"))
    new = mutate([ints], "tensor:values:boundary", "arg0").args[0]
    assert new.dtype == np.int8 and set(np.unique(new)) <= {-128, 127, 0}
    prof = learn_profiles([ints])["torch.abs"]
    assert Choice("arg0", "tensor:values:special") not in mutation_choices(ints, prof)  # no NaN in int8
    big = torch_fn("torch.abs", x(100, 100))
    assert not [c for c in mutation_choices(big, learn_profiles([big])["torch.abs"]) if c.kind.startswith("tensor:values")]


def test_spatial_dimensions_move_around_the_window() -> None:
    pool = torch_fn("torch.nn.functional.max_pool2d", x(1, 2, 9, 9), kernel_size=3)
    shapes = {mutate([pool], "tensor:spatial", "arg0", seed).args[0].shape for seed in range(30)}
    assert shapes <= {(1, 2, s, s) for s in (1, 2, 3, 4)} and len(shapes) >= 3
    plain = torch_fn("torch.abs", x(1, 2, 9, 9))
    assert Choice("arg0", "tensor:spatial") not in mutation_choices(plain, learn_profiles([plain])["torch.abs"])


def test_all_variant_changes_every_tensor_of_the_same_shape() -> None:
    inst = torch_fn("torch.add", x(2, 3), x(2, 3))
    new = mutate([inst], "tensor:zero-all", "arg0")
    assert new.args[0].shape == new.args[1].shape and 0 in new.args[0].shape
    single = torch_fn("torch.add", x(2, 3), x(3))
    prof = learn_profiles([single])["torch.add"]
    assert Choice("arg0", "tensor:zero-all") not in mutation_choices(single, prof)


def test_integer_tensor_keeps_its_value_range() -> None:
    idx = np.array([0, 2, 1], dtype=np.int64)
    inst = torch_fn("torch.take", x(3), idx)
    new = mutate([inst], "tensor:rank", "arg1").args[1]
    assert (new.low, new.high) == (0.0, 2.0) and new.dtype == "int64"


def test_optional_absent_and_present() -> None:
    with_kw = torch_fn("torch.sum", x(2, 3), dim=1)
    without = torch_fn("torch.sum", x(4))
    assert "dim" not in mutate([with_kw, without], "optional:absent", "kw:dim").kwargs
    assert mutate([without, with_kw], "optional:present", "kw:dim").kwargs == {"dim": 1}
    # a parameter every instance has is not optional
    prof = learn_profiles([with_kw])["torch.sum"]
    assert Choice("kw:dim", "optional:absent") not in mutation_choices(with_kw, prof)


def test_optional_onnx_input_is_omitted_as_none() -> None:
    def clip(*inputs: object) -> OperatorInstance:
        return OperatorInstance(
            library="onnx",
            api="onnx::Clip",
            kind=InstanceKind.ONNX_NODE,
            inputs=inputs,
            extra={"opset": 13, "domain": "", "n_outputs": 1},
            source=HUMAN,
            valid=True,
        )

    low = np.array(-1.0, dtype=np.float32)
    new = mutate([clip(x(3), low), clip(x(3), None)], "optional:absent", "in1")
    assert new.inputs == (x(3), None)


def test_borrow_from_a_related_operator() -> None:
    module = OperatorInstance(
        library="torch",
        api="torch.nn.Conv2d",
        kind=InstanceKind.MODULE,
        args=(1, 1, 3),
        kwargs={"padding": 1},
        inputs=(x(1, 1, 5, 5),),
        source=HUMAN,
        valid=True,
    )
    function = torch_fn("torch.nn.functional.conv2d", x(1, 1, 5, 5), x(1, 1, 3, 3), padding="same")
    assert related_operators(["torch.nn.Conv2d", "torch.nn.functional.conv2d"])["torch.nn.Conv2d"] == [
        "torch.nn.functional.conv2d"
    ]
    new = mutate([module, function], "borrow", "kw:padding")
    assert new.kwargs["padding"] == "same"


# ---- the validity learner ----------------------------------------------------------------------
def test_learner_lowers_the_share_of_a_rejected_mutation() -> None:
    good, bad = Choice("arg0", "tensor:dtype"), Choice("kw:dim", "int:large")

    def share_of_bad(feedback: bool) -> tuple[ValidityLearner, float]:
        learner, rng, picks = ValidityLearner(), random.Random(0), []
        for _ in range(300):
            choice = learner.choose(rng, [good, bad], "torch", "torch.sum")
            if feedback:
                learner.record("torch", "torch.sum", choice, valid=choice == good)
            picks.append(choice)
        return learner, sum(c == bad for c in picks[-100:]) / 100

    _, blind = share_of_bad(feedback=False)
    learner, taught = share_of_bad(feedback=True)
    assert 0.35 < blind < 0.65 and taught < 0.1
    # what a kind did on one parameter is the prior on the operator's other parameters, not elsewhere
    other_param = Choice("kw:other", "int:large")
    assert learner.acceptance("torch", "torch.sum", other_param) < 0.2
    assert learner.acceptance("torch", "torch.mean", other_param) == 0.5





def test_driver_learns_to_avoid_what_the_gate_rejects(tmp_path: Path) -> None:
    corpus = corpus_file(tmp_path, SMALL)
    options = GenerateOptions(per_api=30, attempts_per_valid=3, show_progress=False)
    rejects_dtype = RuleGate(lambda i: "tensor:dtype" not in i.source.test)
    picky = generate([corpus], tmp_path / "a.jsonl", options, gate_factory=lambda lib: rejects_dtype)
    accepts_all = generate(
        [corpus], tmp_path / "b.jsonl", options, gate_factory=lambda lib: RuleGate(lambda i: True)
    )
    tried_picky = picky.figures["torch"].tried_per_kind["tensor:dtype"] / picky.figures["torch"].tried
    tried_all = (
        accepts_all.figures["torch"].tried_per_kind["tensor:dtype"] / accepts_all.figures["torch"].tried
    )
    assert tried_picky < tried_all / 2


# ---- the driver ----------------------------------------------------------------------------------
def test_same_seed_same_ids_other_seed_other_ids(tmp_path: Path) -> None:
    corpus = corpus_file(tmp_path, SMALL)
    gate = lambda lib: RuleGate(lambda i: "int:large" not in i.source.test)  # noqa: E731

    def ids(seed: int, name: str) -> list[str]:
        generate(
            [corpus],
            tmp_path / name,
            GenerateOptions(seed=seed, per_api=5, show_progress=False),
            gate_factory=gate,
        )
        return [i.id for i in read_corpus(tmp_path / name)]

    first = ids(7, "a.jsonl")
    assert len(first) >= 10
    assert ids(7, "b.jsonl") == first
    assert ids(8, "c.jsonl") != first


def test_generated_instances_carry_their_origin(tmp_path: Path) -> None:
    corpus = corpus_file(tmp_path, SMALL)
    out = tmp_path / "gen.jsonl.gz"
    summary = generate(
        [corpus],
        out,
        GenerateOptions(per_api=3, show_progress=False),
        gate_factory=lambda lib: RuleGate(lambda i: True),
    )
    parents = {i.id for i in SMALL}
    generated = list(read_corpus(out))
    assert len(generated) == summary.written == summary.figures["torch"].valid == 9
    for inst in generated:
        assert inst.source.origin is Origin.TOOL and inst.source.suite == GENERATED_SUITE
        assert inst.source.generator == GENERATOR and inst.valid is True
        parent_id, _, description = inst.source.test.partition(": ")
        assert description and (parent_id in parents or parent_id in {g.id for g in generated})
        assert inst.id not in parents
    with gzip.open(out, "rt") as fh:
        header = json.loads(fh.readline())
    assert header["generation"]["torch"]["valid"] == 9 and header["library"] == "torch"


def test_invalid_mutants_are_dropped_unless_kept(tmp_path: Path) -> None:
    corpus = corpus_file(tmp_path, SMALL)
    rule = lambda lib: RuleGate(lambda i: "tensor" in i.source.test)  # noqa: E731
    options = GenerateOptions(per_api=4, show_progress=False)
    summary = generate([corpus], tmp_path / "v.jsonl", options, gate_factory=rule)
    assert all(i.valid for i in read_corpus(tmp_path / "v.jsonl"))
    kept = generate(
        [corpus],
        tmp_path / "k.jsonl",
        GenerateOptions(per_api=4, keep_invalid=True, show_progress=False),
        gate_factory=rule,
    )
    every = list(read_corpus(tmp_path / "k.jsonl"))
    assert len(every) == kept.figures["torch"].tried > summary.written
    assert any(i.valid is False and i.invalid_reason for i in every)


def test_novelty_counts_new_partitions_only(tmp_path: Path) -> None:
    corpus = corpus_file(tmp_path, [torch_fn("torch.nn.functional.softmax", x(2, 3), dim=1)])
    summary = generate(
        [corpus],
        tmp_path / "n.jsonl",
        GenerateOptions(per_api=5, show_progress=False),
        gate_factory=lambda lib: RuleGate(lambda i: True),
    )
    # a single human instance: every mutant changes some partition, so each one is new, except a
    # re-draw of a tensor's values (same shape and dtype: the partition function does not see values)
    figures = summary.figures["torch"]
    redrawn = sum(n for kind, n in figures.valid_per_kind.items() if kind.startswith("tensor:values:"))
    assert figures.valid == 5 and figures.new_partitions == 5 - redrawn
    assert partition(-1) != partition(1)


# ---- the real validity gate ----------------------------------------------------------------------
REAL_SLICE = {
    "torch": ["torch.nn.functional.softmax", "torch.add", "torch.nn.Conv2d"],
    "onnx": ["onnx::Relu", "onnx::Conv", "onnx::Clip"],
    "keras": ["keras.ops.softmax", "keras.layers.Dense"],
}


@pytest.mark.slow
@pytest.mark.parametrize("library", sorted(REAL_SLICE))
def test_real_gate_accepts_what_it_says_is_valid(tmp_path: Path, library: str) -> None:
    out = tmp_path / f"{library}.jsonl"
    options = GenerateOptions(per_api=2, apis=tuple(REAL_SLICE[library]), show_progress=False)
    summary = generate([REPO / "harvested" / f"{library}.jsonl.gz"], out, options, gate_factory=InProcessGate)
    assert not summary.messages
    generated = list(read_corpus(out))
    assert len(generated) >= len(REAL_SLICE[library])  # most operators give at least one valid mutant
    template = get_template(library)
    for inst in generated:
        assert inst.valid and template.validate(inst).valid, inst.source.test
    # and the gate really rejects: a torch mutant that cannot run is marked invalid with a reason
    if library == "torch":
        bad = torch_fn("torch.nn.functional.softmax", x(2, 3), dim=LARGE_INT)
        verdict = InProcessGate("torch").validate(bad)
        assert verdict.valid is False and "dim" in (verdict.invalid_reason or "").lower()


@pytest.mark.slow
def test_isolated_gate_survives_a_dying_library() -> None:
    gate = IsolatedGate("onnx", timeout_s=30)
    try:
        relu = next(
            i for i in read_corpus(REPO / "harvested" / "onnx.jsonl.gz") if i.api == "onnx::Relu" and i.valid
        )
        assert gate.validate(relu).valid is True
        gate._process.kill()  # the child dies (as a native crash in the library would kill it)
        gate._process.join()
        assert gate.validate(relu).valid is False and gate.restarts == 1
        assert gate.validate(relu).valid is True  # a fresh child
    finally:
        gate.close()


@pytest.mark.slow
def test_isolated_gate_limits_cpu_time(monkeypatch) -> None:
    # the CPU-time limit is under test: on a loaded machine the child gets a fraction of a core,
    # so the wall-clock backstop (WALL_FACTOR x the limit) is moved out of its way
    from opera.generate import gate as gate_module

    monkeypatch.setattr(gate_module, "WALL_FACTOR", 60)
    gate = IsolatedGate("torch", timeout_s=0.5)
    try:
        assert gate.validate(torch_fn("torch.abs", x(2, 3))).valid is True  # the child is up
        slow = torch_fn("torch.matmul", x(3000, 3000, dtype="float64"), x(3000, 3000, dtype="float64"))
        verdict = gate.validate(slow)
        assert verdict.valid is False and "CPU time" in (verdict.invalid_reason or "")
        assert gate.kills == {"cpu-time": 1}
        assert gate.validate(torch_fn("torch.abs", x(2, 3))).valid is True
    finally:
        gate.close()


# ---- bad input -----------------------------------------------------------------------------------
def test_unknown_library_corpus_is_skipped_with_one_message(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good = corpus_file(tmp_path, SMALL)
    alien = tmp_path / "alien.jsonl"
    line = SMALL[0].to_json() | {"library": "mxnet"}
    line.pop("id")
    alien.write_text(
        json.dumps({"$schema": "opera-corpus", "version": 1, "library": "mxnet"})
        + "\n"
        + json.dumps(line)
        + "\n"
    )
    rc = main(
        [
            "generate",
            str(alien),
            str(good),
            "-o",
            str(tmp_path / "g.jsonl"),
            "--per-api",
            "1",
            "--quiet",
            "--api",
            "torch.sum",
            "--api",
            "torch.nosuch",
        ]
    )
    err = capsys.readouterr().err
    assert rc == 0, err
    messages = [line for line in err.splitlines() if line.startswith("opera generate:")]
    assert len(messages) == 2, err
    assert "alien.jsonl" in messages[0] and "unknown library 'mxnet'" in messages[0]
    assert "torch.nosuch" in messages[1] and "no harvested instances" in messages[1]
    generated = list(read_corpus(tmp_path / "g.jsonl"))
    assert generated and {i.api for i in generated} == {"torch.sum"}


def test_operator_with_only_invalid_instances_is_reported(tmp_path: Path) -> None:
    broken = OperatorInstance(
        library="torch",
        api="torch.broken",
        kind=InstanceKind.FUNCTION,
        args=(x(2),),
        source=HUMAN,
        valid=False,
        invalid_reason="x",
    )
    corpus = corpus_file(tmp_path, [*SMALL, broken])
    summary = generate(
        [corpus],
        tmp_path / "o.jsonl",
        GenerateOptions(per_api=1, show_progress=False),
        gate_factory=lambda lib: RuleGate(lambda i: True),
    )
    assert summary.messages == ["torch.broken: no valid, migratable harvested instance to mutate; skipped"]
    assert summary.written == 3


def test_cli_rejects_unknown_library_filter_and_missingcorpus_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    corpus = corpus_file(tmp_path, SMALL)
    assert main(["generate", str(corpus), "-o", str(tmp_path / "g.jsonl"), "--library", "mxnet"]) == 2
    assert "unknown library 'mxnet'" in capsys.readouterr().err
    assert main(["generate", str(tmp_path / "missing.jsonl"), "-o", str(tmp_path / "g.jsonl")]) == 2
    assert "not found" in capsys.readouterr().err


# ---- results by source, manifest -----------------------------------------------------------------
def test_breakdown_by_source() -> None:
    def result(suite: str, outcome: Outcome, signature: str | None = None) -> TestResult:
        return TestResult(
            "i", "api", "tvm-torch", outcome, Stage.CONVERT, signature=signature, source_suite=suite
        )

    breakdown = breakdown_by_source(
        [
            result("opinfo", Outcome.PASS),
            result("opinfo", Outcome.CRASH, "sig-both"),
            result(GENERATED_SUITE, Outcome.CRASH, "sig-both"),
            result(GENERATED_SUITE, Outcome.INCONSISTENT, "sig-gen"),
            result("keras-tests", Outcome.CRASH, "sig-human"),
        ]
    )
    assert source_of("moduleinfo") == "human" and source_of(GENERATED_SUITE) == "generated"
    assert breakdown.sources["human"].tests == 3 and breakdown.sources["generated"].tests == 2
    assert breakdown.only_in("generated") == ["sig-gen"] and breakdown.only_in("human") == ["sig-human"]
    assert "signatures found only by generated instances (1):" in breakdown.render()


def test_manifest_records_the_generation_command(tmp_path: Path) -> None:
    corpus = corpus_file(tmp_path, SMALL)
    out_dir = tmp_path / "harvested"
    out_dir.mkdir()
    write_corpus(
        out_dir / "torch.jsonl", SMALL, header={"library": "torch", "command": "opera harvest torch"}
    )
    rc = main(
        [
            "generate",
            str(corpus),
            "-o",
            str(out_dir / "generated-torch.jsonl"),
            "--per-api",
            "2",
            "--quiet",
            "--api",
            "torch.sum",
        ]
    )
    assert rc == 0
    manifest = build_manifest(out_dir)
    entry = manifest["files"]["generated-torch.jsonl"]
    assert entry["command"].startswith(f"opera generate {corpus} --seed 0 --per-api 2")
    assert entry["generator"] == GENERATOR and entry["generation"]["torch"]["valid"] == entry["valid"]
    assert manifest["totals"]["distinct_valid_apis"] == {"torch": 3}


def test_a_redrawn_0d_tensor_stays_0d() -> None:
    """A scalar operand (Clip's min, a 0-d torch tensor) keeps its shape: np.ascontiguousarray
    made it (1,), a mutant of another shape than the re-draw claimed."""
    scalar = torch_fn("torch.abs", np.array(1.5, dtype=np.float32))
    for cls in ("zeros", "negative", "boundary", "small"):
        new = mutate([scalar], f"tensor:values:{cls}", "arg0").args[0]
        assert isinstance(new, np.ndarray) and new.shape == () and new.dtype == np.float32, (cls, new)
