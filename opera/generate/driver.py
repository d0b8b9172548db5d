"""`opera generate`: new operator instances by type-aware mutation of harvested ones.

For every operator of the input corpora (sorted, so runs are reproducible): learn its parameter
profiles from its valid harvested instances, then repeatedly pick a parent (a harvested instance,
or now and then a valid mutant, so mutations compound), let the validity learner pick one of the
applicable mutations, build the mutant, and send it through the library's validity gate, until the
operator has ``per_api`` valid mutants or ``attempts_per_valid * per_api`` mutants were tried.
Every random choice for an operator comes from ``Random(f"{seed}/{operator}")``, so the same seed
gives the same corpus, whatever else is in the input.

``steer="coverage"`` (``--steer coverage``) steers toward operator-level coverage the corpus lacks
(``steering``): only mutants that add a coverage element are written and count toward ``per_api``.
The coverage figures are counted either way; they enter the JSON (and so the corpus header) only
when steering is on, so an unsteered corpus regenerates byte for byte.
"""

from __future__ import annotations

import random
import sys
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from opera import __version__
from opera.corpus import CorpusReader, CorpusWriter
from opera.errors import CorpusError, OperaError
from opera.generate.feedback import ValidityLearner
from opera.generate.gate import Gate, IsolatedGate
from opera.generate.mutations import apply_mutation, mutation_choices
from opera.generate.novelty import NoveltyMeter
from opera.generate.profiles import ApiProfile, learn_profiles
from opera.generate.related import related_operators
from opera.generate.steering import SKIPS_PER_VALID, STEER_MODES, CoverageBandit, CoverageTracker
from opera.model import OperatorInstance, Origin, Source, known_libraries
from opera.prioritize.partitions import operator_key
from opera.progress import progress_bar

__all__ = ["GENERATED_SUITE", "GENERATOR", "GenerateOptions", "GenerateSummary", "LibraryFigures", "generate"]

GENERATED_SUITE = "opera-generate"
GENERATOR = f"opera-mutate/{__version__}"
CHAIN_SHARE = 0.3  # how often a valid mutant, rather than a harvested instance, is the parent


@dataclass(frozen=True)
class GenerateOptions:
    seed: int = 0
    per_api: int = 10
    attempts_per_valid: int = 3
    libraries: tuple[str, ...] = ()  # empty: every library of the input
    apis: tuple[str, ...] = ()  # empty: every operator of the input
    keep_invalid: bool = False
    show_progress: bool = True
    timeout_s: float = 30.0
    steer: str | None = None  # None: as before; "coverage": toward uncovered operator-level coverage


@dataclass
class LibraryFigures:
    library: str
    operators: int = 0
    tried: int = 0  # mutants sent through the validity gate
    valid: int = 0
    new_partitions: int = 0  # valid mutants covering a partition (pair) no human instance covers
    duplicates: int = 0  # mutants equal to an instance already known (not gated)
    valid_per_kind: Counter[str] = field(default_factory=Counter)
    tried_per_kind: Counter[str] = field(default_factory=Counter)
    killed: Counter[str] = field(default_factory=Counter)  # gate children killed: memory, cpu-time, ...
    # operator-level coverage (opera.report.op_coverage's sets, from the input corpus on):
    coverage_gains: int = 0  # valid mutants that added an input degree, output degree or SPC vector
    coverage_elements: int = 0  # the elements they added
    gains_per_kind: Counter[str] = field(default_factory=Counter)
    no_gain_skipped: int = 0  # steering: mutants not gated, their vector already covered or gated

    @property
    def validity_rate(self) -> float:
        return self.valid / self.tried if self.tried else 0.0

    @property
    def new_share(self) -> float:
        return self.new_partitions / self.valid if self.valid else 0.0

    def to_json(self, coverage: bool = False) -> dict[str, Any]:
        out = self._validity_json()
        if coverage:
            out["coverage"] = {
                "gains": self.coverage_gains,
                "elements": self.coverage_elements,
                "gains_per_kind": dict(sorted(self.gains_per_kind.items())),
                "no_gain_skipped": self.no_gain_skipped,
            }
        return out

    def _validity_json(self) -> dict[str, Any]:
        return {
            "operators": self.operators,
            "tried": self.tried,
            "valid": self.valid,
            "validity_rate": round(self.validity_rate, 4),
            "new_partitions": self.new_partitions,
            "new_partition_share": round(self.new_share, 4),
            "duplicates": self.duplicates,
            "valid_per_kind": dict(sorted(self.valid_per_kind.items())),
            "tried_per_kind": dict(sorted(self.tried_per_kind.items())),
            "killed": dict(sorted(self.killed.items())),
        }


@dataclass
class GenerateSummary:
    output: Path
    seed: int
    figures: dict[str, LibraryFigures] = field(default_factory=dict)
    messages: list[str] = field(default_factory=list)
    written: int = 0
    interrupted: bool = False
    steer: str | None = None

    def render(self) -> str:
        lines = [f"generate (seed {self.seed}) -> {self.output}: {self.written} instances written"]
        if self.interrupted:
            lines[0] += "  [INTERRUPTED: partial corpus]"
        for lib, f in sorted(self.figures.items()):
            lines.append(
                f"  {lib}: {f.operators} operators, {f.tried} mutants tried, {f.valid} valid "
                f"(validity rate {f.validity_rate:.1%}), {f.new_partitions} cover a new partition or pair "
                f"({f.new_share:.1%} of valid)"
            )
            kinds = ", ".join(
                f"{k} {f.valid_per_kind[k]}/{n}"
                for k, n in sorted(f.tried_per_kind.items(), key=lambda kv: -kv[1])
            )
            lines.append(f"    valid/tried per mutation kind: {kinds}")
            lines.append(
                f"    operator-level coverage: {f.coverage_gains} valid mutants add "
                f"{f.coverage_elements} elements (input/output degrees, SPC vectors)"
                + (
                    f"; steered: {f.no_gain_skipped} mutants not gated (nothing new possible)"
                    if self.steer
                    else ""
                )
            )
            if f.killed:
                lines.append(f"    mutants that killed the gate's child: {dict(sorted(f.killed.items()))}")
        return "\n".join(lines)

    def to_json(self) -> dict[str, Any]:
        return {lib: f.to_json(coverage=self.steer is not None) for lib, f in sorted(self.figures.items())}


def _load(
    paths: Sequence[str | Path], libraries: tuple[str, ...], messages: list[str]
) -> list[OperatorInstance]:
    """Every instance of the readable corpora; a file from an unknown library is skipped with one message."""
    instances: list[OperatorInstance] = []
    for path in paths:
        reader = CorpusReader([path])
        loaded: list[OperatorInstance] = []
        try:
            for inst in reader:
                loaded.append(inst)
        except CorpusError as exc:
            library = reader.stats.header.get("library")
            if library is not None and library not in known_libraries():
                messages.append(
                    f"{path}: corpus from an unknown library {library!r} (known: {', '.join(known_libraries())}); skipped"
                )
            elif "unknown library" in str(exc):
                messages.append(f"{path}: corpus from an unknown library ({exc}); skipped")
            else:
                raise
            continue
        instances.extend(i for i in loaded if not libraries or i.library in libraries)
    return instances


def _generated(child: OperatorInstance, parent: OperatorInstance, description: str) -> OperatorInstance:
    source = Source(
        suite=GENERATED_SUITE, test=f"{parent.id}: {description}", origin=Origin.TOOL, generator=GENERATOR
    )
    return replace(child, source=source, valid=None, invalid_reason=None, outputs=None)


def generate(
    corpus_paths: Sequence[str | Path],
    output: str | Path,
    options: GenerateOptions | None = None,
    *,
    header: dict[str, Any] | None = None,
    gate_factory: Callable[[str], Gate] | None = None,
    learner: ValidityLearner | None = None,
) -> GenerateSummary:
    options = options or GenerateOptions()
    if options.per_api < 1:
        raise OperaError("--per-api must be at least 1")
    if options.steer is not None and options.steer not in STEER_MODES:
        raise OperaError(f"unknown --steer {options.steer!r}; known: {', '.join(STEER_MODES)}")
    for lib in options.libraries:
        if lib not in known_libraries():
            raise OperaError(f"unknown library {lib!r}; known: {', '.join(known_libraries())}")
    summary = GenerateSummary(output=Path(output), seed=options.seed, steer=options.steer)
    instances = _load(corpus_paths, options.libraries, summary.messages)
    if not instances:
        raise OperaError(
            "no instances to mutate in the given corpora"
            + (f" ({summary.messages[-1]})" if summary.messages else "")
        )
    known_ids = {i.id for i in instances}
    profiles = learn_profiles(instances)
    every_operator = sorted({operator_key(i) for i in instances})
    wanted = list(options.apis) or every_operator
    operators: list[str] = []
    for api in wanted:
        if api in profiles:
            operators.append(api)
        elif api in every_operator:
            summary.messages.append(f"{api}: no valid, migratable harvested instance to mutate; skipped")
        else:
            summary.messages.append(f"{api}: no harvested instances in the given corpora; skipped")
    related = related_operators(profiles)
    novelty = NoveltyMeter()
    for prof in profiles.values():
        for parent in prof.parents:
            if parent.source.origin is Origin.HUMAN:  # "new" is measured against human-written tests
                novelty.cover(parent)
    learner = learner or ValidityLearner()
    steering = _Steering(CoverageTracker(instances), CoverageBandit() if options.steer else None)
    factory = gate_factory or (lambda lib: IsolatedGate(lib, timeout_s=options.timeout_s))
    gates: dict[str, Gate] = {}
    kept: list[OperatorInstance] = []
    bar = progress_bar(total=len(operators), desc="generate", unit="op", disable=not options.show_progress)
    try:
        for api in operators:
            prof = profiles[api]
            figures = summary.figures.setdefault(prof.library, LibraryFigures(prof.library))
            figures.operators += 1
            if prof.library not in gates:
                gates[prof.library] = factory(prof.library)
            kept.extend(
                _mutate_operator(
                    prof,
                    [profiles[r] for r in related.get(api, [])],
                    gates[prof.library],
                    learner,
                    novelty,
                    steering,
                    known_ids,
                    figures,
                    options,
                )
            )
            bar.update(1)
            bar.set_postfix(valid=sum(f.valid for f in summary.figures.values()), refresh=False)
    except KeyboardInterrupt:
        summary.interrupted = True
        print("\ninterrupted: writing what was generated so far", file=sys.stderr)
    finally:
        bar.close()
        for lib, gate in gates.items():
            summary.figures[lib].killed.update(getattr(gate, "kills", {}))
            gate.close()
    libraries = sorted({i.library for i in instances})
    versions = sorted({i.library_version for i in instances})
    head = {
        **(header or {}),
        "library": libraries[0] if len(libraries) == 1 else None,
        "library_version": versions[0] if len(versions) == 1 else None,
        "generator": GENERATOR,
        "seed": options.seed,
        "steer": options.steer,
        "generation": summary.to_json(),
    }
    with CorpusWriter(output, header={k: v for k, v in head.items() if v is not None}) as writer:
        for inst in kept:
            writer.write(inst)
    summary.written = writer.written
    return summary


@dataclass
class _Steering:
    """The coverage reached so far (always kept, for the figures) and, when steering, the bandit."""

    tracker: CoverageTracker
    bandit: CoverageBandit | None


def _mutate_operator(
    prof: ApiProfile,
    related: list[ApiProfile],
    gate: Gate,
    learner: ValidityLearner,
    novelty: NoveltyMeter,
    steering: _Steering,
    known_ids: set[str],
    figures: LibraryFigures,
    options: GenerateOptions,
) -> Iterable[OperatorInstance]:
    rng = random.Random(f"{options.seed}/{prof.api}")
    bandit = steering.bandit
    mutants: list[OperatorInstance] = []
    valid = attempts = misses = skips = 0
    while (
        valid < options.per_api
        and attempts < options.per_api * options.attempts_per_valid
        and misses < 5 * options.per_api
        and skips < SKIPS_PER_VALID * options.per_api
    ):
        parent = rng.choice(mutants) if mutants and rng.random() < CHAIN_SHARE else rng.choice(prof.parents)
        choices = mutation_choices(parent, prof, related)
        if not choices:
            misses += 1
            continue
        if bandit is None:
            choice = learner.choose(rng, choices, prof.library, prof.api)
        else:
            choice = bandit.choose(rng, choices, learner, prof.library, prof.api)
        mutated = apply_mutation(parent, choice, prof, rng, related)
        if mutated is None or mutated.instance.id in known_ids:
            misses += 1
            figures.duplicates += mutated is not None
            continue
        child = _generated(mutated.instance, parent, mutated.description)
        if bandit is not None and not steering.tracker.promising(child):
            skips += 1
            figures.no_gain_skipped += 1
            bandit.record(prof.api, choice, gained=False)
            continue
        known_ids.add(child.id)
        attempts += 1
        figures.tried += 1
        figures.tried_per_kind[choice.kind] += 1
        steering.tracker.gated(child)
        verdict = gate.validate(child)
        learner.record(prof.library, prof.api, choice, bool(verdict.valid))
        if verdict.valid:
            figures.valid += 1
            figures.valid_per_kind[choice.kind] += 1
            figures.new_partitions += novelty.is_new(verdict)
            added = steering.tracker.add(verdict)
            if added:
                figures.coverage_gains += 1
                figures.coverage_elements += added
                figures.gains_per_kind[choice.kind] += 1
            if bandit is not None:
                bandit.record(prof.api, choice, gained=added > 0)
                if not added:  # not reached (a gated vector is new), but steering writes only gains
                    continue
            valid += 1
            mutants.append(verdict)
            yield verdict
        elif options.keep_invalid:
            yield verdict
