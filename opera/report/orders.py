"""The order every strategy gives to a run's own instances, per target.

The instances come from the run's corpus files (recorded with the run), restricted to the tests the
run holds for that target and fed in corpus order, exactly as ``opera prioritize`` would read them;
each strategy runs through ``opera.prioritize.prioritize`` (the same code, timed the same way).
Coverage strategies run only where coverage data is given for the target; otherwise they are
listed as skipped with the reason. ``random`` runs once per seed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from opera.corpus import CorpusReader
from opera.errors import CorpusError, OperaError
from opera.model import OperatorInstance
from opera.prioritize import PrioritizeContext, get_strategy, load_equipped, prioritize, strategy_names
from opera.prioritize.coverage_data import COVERAGE_COMMAND, CoverageDataMissing
from opera.prioritize.history import OperatorHistory
from opera.progress import progress_bar
from opera.report.data import RunData

__all__ = [
    "RUN_ORDER",
    "STRATEGY_ORDER",
    "OrderSettings",
    "Skipped",
    "StrategyOrder",
    "load_run_instances",
    "strategy_orders",
]

RUN_ORDER = "run"  # the run's actual (planned) order
# Table order: the paper's strategy first, its ablations, then the baselines; others after.
STRATEGY_ORDER = ("opera", "op-only", "param-only", "random", "fast", "total-cov", "add-cov")
RANDOM = "random"


@dataclass
class StrategyOrder:
    strategy: str
    ids: list[str]
    seconds: float  # the strategy's own wall time (counted in at the start of time curves)
    seed: int | None = None
    notes: dict[str, Any] = field(default_factory=dict)


@dataclass
class Skipped:
    strategy: str
    reason: str


@dataclass
class OrderSettings:
    """How the strategies run (the `opera prioritize` options, per report)."""

    strategies: Sequence[str] | None = None  # None: every registered strategy
    equipped: Sequence[str] = ()  # "FILE" (every target of its library) or "TARGET=FILE"
    coverage: Mapping[str, str] = field(default_factory=dict)  # target -> coverage data file
    random_seeds: int = 5
    seed: int = 0  # seed of the other seeded strategies (fast)
    precover_equipped: bool = True
    zero_case: str = "untested-first"
    history: str | Sequence[str] | None = None  # results stores of earlier runs (the opera strategy's scores, merged)


def ordered_strategy_names(names: Sequence[str] | None) -> list[str]:
    known = strategy_names()
    if names is None:
        chosen = known
    else:
        for name in names:
            get_strategy(name)  # UnknownStrategy (an OperaError) names the known ones
        chosen = list(dict.fromkeys(names))
    rank = {name: k for k, name in enumerate(STRATEGY_ORDER)}
    return sorted(chosen, key=lambda n: (rank.get(n, len(rank)), n))


def load_run_instances(data: RunData, *, progress: bool = False) -> dict[str, OperatorInstance]:
    """id -> instance for every test of the report's targets, in corpus order."""
    wanted = {iid for tests in data.targets.values() for iid in tests.ids}
    corpus = data.run.corpus
    missing = [p for p in corpus if not Path(p).exists()]
    if missing:
        raise OperaError(
            f"run {data.run.id}'s corpus file {missing[0]} is missing: the strategies need the run's instances"
        )
    found: dict[str, OperatorInstance] = {}
    bar = progress_bar(desc="reading corpus", unit="inst", disable=not progress)
    try:
        for inst in CorpusReader(corpus):
            bar.update(1)
            if inst.id in wanted and inst.id not in found:
                found[inst.id] = inst
    except CorpusError as exc:
        raise OperaError(f"run {data.run.id}'s corpus cannot be read: {exc}") from None
    finally:
        bar.close()
    absent = [iid for iid in wanted if iid not in found]
    if absent:
        raise OperaError(
            f"{len(absent)} test(s) of run {data.run.id} are not in its corpus files any more "
            f"(e.g. {sorted(absent)[0]}): the corpus changed since the run"
        )
    return found


def parse_equipped(
    specs: Iterable[str], run_targets: Sequence[str]
) -> tuple[list[str], dict[str, list[str]]]:
    """Split ``FILE`` / ``TARGET=FILE`` specs into (for every target, per target)."""
    shared: list[str] = []
    targeted: dict[str, list[str]] = {}
    for spec in specs:
        target, sep, path = spec.partition("=")
        if sep and target and not any(c in target for c in "/\\."):
            if target not in run_targets:
                raise OperaError(
                    f"--equipped {spec}: the run has no target {target} (its targets: {', '.join(run_targets)})"
                )
            targeted.setdefault(target, []).append(path)
        else:
            shared.append(spec)
    for path in [*shared, *(p for ps in targeted.values() for p in ps)]:
        if not Path(path).exists():
            raise OperaError(f"equipped corpus not found: {path}")
    return shared, targeted


def _equipped_for(
    library: str,
    target: str,
    shared: Sequence[OperatorInstance],
    targeted: Mapping[str, list[str]],
) -> list[OperatorInstance]:
    own = load_equipped(targeted.get(target, []), library, target)
    return [inst for inst in shared if inst.library == library] + own


def strategy_orders(
    data: RunData,
    instances: Mapping[str, OperatorInstance],
    settings: OrderSettings,
    *,
    progress: bool = False,
) -> dict[str, tuple[list[StrategyOrder], list[Skipped]]]:
    """target -> (orders, skipped strategies). ``random`` gives one order per seed."""
    if settings.random_seeds < 1:
        raise OperaError("--random-seeds must be at least 1")
    names = ordered_strategy_names(settings.strategies)
    run_targets = list(data.targets)
    for target, path in settings.coverage.items():
        if target not in run_targets:
            raise OperaError(
                f"--coverage {target}=...: the run has no target {target} (its targets: {', '.join(run_targets)})"
            )
        if not Path(path).exists():
            raise OperaError(f"coverage data not found: {path}")
    shared_paths, targeted = parse_equipped(settings.equipped, run_targets)
    shared = load_equipped(shared_paths) if shared_paths else []
    jobs = sum(settings.random_seeds if n == RANDOM else 1 for n in names) * len(data.targets)
    bar = progress_bar(total=jobs, desc="prioritizing", unit="order", disable=not progress)
    out: dict[str, tuple[list[StrategyOrder], list[Skipped]]] = {}
    try:
        for target, tests in data.targets.items():
            own = [instances[iid] for iid in _corpus_order(tests.ids, instances)]
            library = own[0].library if own else ""
            equipped = _equipped_for(library, target, shared, targeted) if own else []
            history = _history(settings, data, target)
            orders: list[StrategyOrder] = []
            skipped: list[Skipped] = []
            for name in names:
                seeds = list(range(settings.random_seeds)) if name == RANDOM else [settings.seed]
                impl = get_strategy(name)
                ctx = _context(target, library, equipped, settings, seeds[0], history)
                try:
                    impl.check(ctx)
                except CoverageDataMissing:
                    skipped.append(
                        Skipped(
                            name,
                            f"no coverage data for {target}: pass --coverage {target}=FILE "
                            f"(measured with `{COVERAGE_COMMAND}`)",
                        )
                    )
                    bar.update(len(seeds))
                    continue
                for seed in seeds:
                    bar.set_postfix_str(
                        f"{target} {name}" + (f" seed {seed}" if len(seeds) > 1 else ""), refresh=False
                    )
                    ordering = prioritize(own, name, _context(target, library, equipped, settings, seed, history))
                    orders.append(
                        StrategyOrder(
                            name,
                            ordering.ids,
                            ordering.seconds,
                            seed if impl.uses_seed else None,
                            dict(ordering.notes),
                        )
                    )
                    bar.update(1)
            out[target] = (orders, skipped)
    finally:
        bar.close()
    return out


def run_order(data: RunData, target: str) -> StrategyOrder:
    """The run's actual order for one target; its prioritization time comes from the order file's
    header when the run used one that is still there (else 0)."""
    tests = data.targets[target]
    seconds = 0.0
    notes: dict[str, Any] = {}
    order_path = data.run.config.get("order")
    if order_path:
        notes["order_file"] = order_path
        try:
            from opera.prioritize import read_order

            _, header = read_order(order_path)
            seconds = float(header.get("prioritization_seconds", 0.0))
            if "strategy" in header:
                notes["order_strategy"] = header["strategy"]
        except (OperaError, ValueError):
            notes["order_file_unreadable"] = True
    return StrategyOrder(RUN_ORDER, list(tests.ids), seconds, None, notes)


def _corpus_order(ids: Sequence[str], instances: Mapping[str, OperatorInstance]) -> list[str]:
    position = {iid: k for k, iid in enumerate(instances)}
    return sorted(ids, key=position.__getitem__)


def _history(settings: OrderSettings, data: RunData, target: str) -> OperatorHistory | None:
    """The target's history from ``settings.history``, never counting the evaluated run itself (an
    order may not know the outcomes it is judged on)."""
    if settings.history is None:
        return None
    return OperatorHistory.from_stores(settings.history, target, evaluated=(Path(data.store), data.run.id))


def _context(
    target: str,
    library: str,
    equipped: Sequence[OperatorInstance],
    settings: OrderSettings,
    seed: int,
    history: OperatorHistory | None = None,
) -> PrioritizeContext:
    coverage = settings.coverage.get(target)
    return PrioritizeContext(
        target=target,
        library=library or None,
        equipped=equipped,
        seed=seed,
        coverage=Path(coverage) if coverage else None,
        precover_equipped=settings.precover_equipped,
        zero_case=settings.zero_case,
        history=history,
    )
