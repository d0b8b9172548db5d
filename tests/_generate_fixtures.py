"""What tests/test_generate.py and tests/test_generate_steered.py share: hand-made torch instances,
a small human corpus of them, and a fake validity gate (a rule decides validity), so that a failing
test says exactly which generator behaviour broke."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from opera.corpus import write_corpus
from opera.model import InstanceKind, OperatorInstance, Source
from opera.values import TensorSpec

HUMAN = Source(suite="opinfo", test="hand-made")


def torch_fn(api: str, *args: object, **kwargs: object) -> OperatorInstance:
    return OperatorInstance(
        library="torch",
        api=api,
        kind=InstanceKind.FUNCTION,
        args=args,
        kwargs=kwargs,
        source=HUMAN,
        valid=True,
    )


def x(*shape: int, dtype: str = "float32") -> TensorSpec:
    return TensorSpec(dtype=dtype, shape=shape, seed=1)


def corpus_file(tmp_path: Path, insts: list[OperatorInstance], name: str = "human.jsonl") -> Path:
    path = tmp_path / name
    write_corpus(path, insts, header={"library": insts[0].library})
    return path


class RuleGate:
    """A fake validity gate: ``rule(inst)`` is the verdict (one output when valid)."""

    def __init__(self, rule: Callable[[OperatorInstance], bool] = lambda inst: True) -> None:
        self.rule = rule
        self.seen: list[OperatorInstance] = []

    def validate(self, inst: OperatorInstance) -> OperatorInstance:
        self.seen.append(inst)
        ok = self.rule(inst)
        return inst.with_verdict(ok, None if ok else "rejected by the rule", ("float32[1]",) if ok else None)

    def close(self) -> None:
        pass


SMALL = [
    torch_fn("torch.sum", x(2, 3), dim=1, keepdim=False),
    torch_fn("torch.sum", x(4, 1), dim=0, keepdim=True),
    torch_fn("torch.nn.functional.leaky_relu", x(4), negative_slope=0.5),
    torch_fn("torch.nn.functional.softmax", x(2, 3), dim=1),
]
