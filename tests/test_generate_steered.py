"""`opera generate --steer coverage`: generation steered toward uncovered operator-level coverage.

Like tests/test_generate.py: hand-made torch instances and a fake gate (a rule deciding validity)
say exactly which behaviour broke; ``test_real_*`` generate from a slice of the shipped ONNX corpus
through the real validity gate (a child process, as ``opera generate`` runs it; marked slow).
"""

from __future__ import annotations

import gzip
import json
import random
from pathlib import Path

import pytest
from _generate_fixtures import SMALL, RuleGate, corpus_file, torch_fn, x

from opera.cli import main
from opera.corpus import read_corpus
from opera.errors import OperaError
from opera.generate import GenerateOptions, GenerateSummary, generate
from opera.generate.feedback import ValidityLearner
from opera.generate.gate import IsolatedGate
from opera.generate.mutations import Choice
from opera.generate.steering import CoverageBandit, CoverageTracker
from opera.model import OperatorInstance
from opera.prioritize.partitions import operator_key
from opera.report.op_coverage import CoverageSets, coverage_sets

REPO = Path(__file__).resolve().parents[1]







def _new_elements(covered: CoverageSets, inst: OperatorInstance) -> int:
    """Elements ``inst`` adds to ``covered`` (counted here from the report's own sets, then added)."""
    one, op = coverage_sets([inst]), inst.api
    new = (
        len(one.input_degrees[op] - covered.input_degrees.get(op, set()))
        + len(one.output_degrees[op] - covered.output_degrees.get(op, set()))
        + len(one.vectors[op] - covered.vectors.get(op, set()))
    )
    covered.add(inst)
    return new


def _assert_every_written_mutant_adds_coverage(
    human: list[OperatorInstance], generated: list[OperatorInstance]
) -> None:
    covered = coverage_sets(human)
    for inst in generated:  # in the order generated: each against the input and the mutants before it
        assert _new_elements(covered, inst) > 0, inst.source.test


# ---- the driver, with a fake gate -----------------------------------------------------------------
def test_steered_writes_only_mutants_that_add_coverage(tmp_path: Path) -> None:
    corpus = corpus_file(tmp_path, SMALL)
    out = tmp_path / "steered.jsonl"
    options = GenerateOptions(per_api=6, show_progress=False, steer="coverage")
    summary = generate([corpus], out, options, gate_factory=lambda lib: RuleGate())
    generated = list(read_corpus(out))
    figures = summary.figures["torch"]
    assert len(generated) == summary.written == figures.coverage_gains > 0
    _assert_every_written_mutant_adds_coverage(SMALL, generated)
    # a re-draw of tensor values keeps the (shape, dtype, parameters) vector: never sent to the gate
    assert not any("tensor:values" in i.source.test for i in generated)
    assert figures.no_gain_skipped > 0
    # the budget: at most --per-api written and --attempts x --per-api gated per operator
    per_op: dict[str, int] = {}
    for inst in generated:
        per_op[operator_key(inst)] = per_op.get(operator_key(inst), 0) + 1
    assert max(per_op.values()) <= 6 and figures.tried <= 3 * 6 * 3


def test_unsteered_writes_mutants_that_add_nothing_and_counts_them(tmp_path: Path) -> None:
    corpus = corpus_file(tmp_path, SMALL)
    summary = generate(
        [corpus], tmp_path / "plain.jsonl", GenerateOptions(per_api=6, show_progress=False),
        gate_factory=lambda lib: RuleGate(),
    )  # fmt: skip
    generated = list(read_corpus(tmp_path / "plain.jsonl"))
    covered = coverage_sets(SMALL)
    adding = sum(_new_elements(covered, inst) > 0 for inst in generated)
    figures = summary.figures["torch"]
    assert figures.coverage_gains == adding < len(generated) == figures.valid
    assert figures.no_gain_skipped == 0


def test_steering_is_recorded_only_when_on(tmp_path: Path) -> None:
    corpus = corpus_file(tmp_path, SMALL)

    def header(steer: str | None) -> dict:
        out = tmp_path / f"{steer}.jsonl.gz"
        generate(
            [corpus], out, GenerateOptions(per_api=2, show_progress=False, steer=steer),
            gate_factory=lambda lib: RuleGate(),
        )  # fmt: skip
        with gzip.open(out, "rt") as fh:
            return json.loads(fh.readline())

    plain, steered = header(None), header("coverage")
    assert "steer" not in plain and "coverage" not in plain["generation"]["torch"]  # as before steering
    assert steered["steer"] == "coverage"
    coverage = steered["generation"]["torch"]["coverage"]
    assert coverage["gains"] == steered["generation"]["torch"]["valid"] > 0
    with pytest.raises(OperaError, match="steer"):
        generate([corpus], tmp_path / "x.jsonl", GenerateOptions(steer="partitions", show_progress=False))


def test_cli_flag_and_recorded_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    corpus = corpus_file(tmp_path, [torch_fn("torch.nn.functional.softmax", x(2, 3), dim=1)])
    out = tmp_path / "cli.jsonl.gz"
    assert (
        main(["generate", str(corpus), "-o", str(out), "--per-api", "2", "--steer", "coverage", "--quiet"])
        == 0
    )
    assert "not gated" in capsys.readouterr().out
    with gzip.open(out, "rt") as fh:
        assert "--steer coverage" in json.loads(fh.readline())["command"]
    with pytest.raises(SystemExit) as exc:
        main(["generate", str(corpus), "-o", str(out), "--steer", "bogus"])
    assert exc.value.code == 2


# ---- the parts ------------------------------------------------------------------------------------
def test_tracker_counts_new_degrees_and_vectors() -> None:
    tracker = CoverageTracker(SMALL[:1])
    same_vector = SMALL[0].with_verdict(True, None, ("float32[2]",))
    assert not tracker.promising(same_vector)
    other = torch_fn("torch.sum", x(2, 3), x(3), dim=1, keepdim=False).with_verdict(True, None, ("a", "b"))
    assert tracker.promising(other)
    assert tracker.add(other) == 3  # an input degree (2 tensors), an output degree (2) and a vector
    assert tracker.add(other) == 0 and not tracker.promising(other)
    rejected = torch_fn("torch.sum", x(5), dim=0)
    tracker.gated(rejected)  # sent through the gate once: not again
    assert not tracker.promising(rejected)


def test_bandit_prefers_kinds_that_add_coverage() -> None:
    adds, adds_nothing = Choice("kw:dim", "int:0"), Choice("arg0", "tensor:values:zeros")
    learner, bandit, rng = ValidityLearner(), CoverageBandit(), random.Random(0)
    picks = []
    for _ in range(300):
        choice = bandit.choose(rng, [adds, adds_nothing], learner, "torch", "torch.sum")
        bandit.record("torch.sum", choice, gained=choice == adds)
        picks.append(choice)
    assert sum(c == adds_nothing for c in picks[-100:]) < 10
    # per operator: another operator starts even
    assert bandit.gain_rate("torch.mean", adds_nothing) == bandit.gain_rate("torch.mean", adds) == 0.5


# ---- the real validity gate on a slice of the shipped ONNX corpus ---------------------------------
REAL_SLICE = ("onnx::Relu", "onnx::Conv", "onnx::Clip", "onnx::Transpose", "onnx::ReduceSum", "onnx::Gather")


def _real(tmp_path: Path, name: str, steer: str | None) -> tuple[GenerateSummary, Path]:
    out = tmp_path / f"{name}.jsonl"
    options = GenerateOptions(per_api=4, apis=REAL_SLICE, show_progress=False, steer=steer)
    summary = generate(
        [REPO / "harvested" / "onnx.jsonl.gz"], out, options, gate_factory=lambda lib: IsolatedGate(lib)
    )
    return summary, out


@pytest.fixture(scope="module")
def onnx_human() -> list[OperatorInstance]:
    return [i for i in read_corpus(REPO / "harvested" / "onnx.jsonl.gz") if operator_key(i) in REAL_SLICE]


@pytest.mark.slow
def test_real_steered_adds_coverage_with_every_mutant_and_repeats(
    tmp_path: Path, onnx_human: list[OperatorInstance]
) -> None:
    summary, first = _real(tmp_path, "a", "coverage")
    generated = list(read_corpus(first))
    assert len(generated) >= len(REAL_SLICE)
    _assert_every_written_mutant_adds_coverage(onnx_human, generated)
    _, second = _real(tmp_path, "b", "coverage")
    assert second.read_bytes() == first.read_bytes()  # the same seed, the same corpus


@pytest.mark.slow
def test_real_steered_covers_more_vectors_with_the_same_attempts(
    tmp_path: Path, onnx_human: list[OperatorInstance]
) -> None:
    _, plain = _real(tmp_path, "plain", None)
    steered, with_steering = _real(tmp_path, "steered", "coverage")
    human = _vectors(onnx_human)
    assert (
        _vectors([*onnx_human, *read_corpus(with_steering)])
        > _vectors([*onnx_human, *read_corpus(plain)])
        > human
    )
    assert steered.figures["onnx"].tried <= 3 * 4 * len(REAL_SLICE)  # the same cap on gate calls


def _vectors(insts: list[OperatorInstance]) -> int:
    """Distinct SPC vectors, over all operators."""
    return sum(len(v) for v in coverage_sets(insts).vectors.values())
