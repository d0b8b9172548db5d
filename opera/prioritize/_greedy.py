"""The greedy diversity ordering behind the ``opera``, ``op-only`` and ``param-only`` strategies.

Paper section III-B3: repeatedly take the test with the highest operator score x parameter
diversity, mark its partitions covered for its operator, re-score. Two facts make this cheap:

* Coverage is per operator, so a pick changes the scores of that operator's tests only. The engine
  keeps one candidate heap per operator and a small global heap with one exact entry per operator
  (its best candidate's priority); after a pick only the picked operator's entry is refreshed.
* Diversity only decreases as coverage grows, so a candidate heap can be re-scored lazily: an entry
  computed under the operator's current coverage version is exact; a stale one is re-scored and
  pushed back. A pick that covers nothing new does not bump the version.

Each instance's elements (parameter partitions and their pairs) are interned once to ints, and
instances with the same elements share one tuple, so the loop does no hashing of values and a
million-instance corpus stays in memory as ids, operator indices and shared tuples.

Ties are deterministic: equal priorities prefer the operator picked fewer times so far (which also
makes the phase after every partition is covered a round-robin over operators), then the higher
operator score, then the operator seen first; within an operator, the rarer setting (mean inverse
frequency of its partitions among the operator's tests), then the instance seen first.

The rarity tie-break is ours, not the paper's: without it every operator's first pick is its first
test in corpus order, which in suites sorted by name is the most basic one (``test_bitshift_left``
before ``..._shift_ge_width``). On the measured ONNX run it raised the ``opera`` strategy's APFD on
tvm-onnx from 0.602 to 0.708 and on ov-onnx from 0.555 to 0.614 (docs/results.md, The real comparison).
"""

from __future__ import annotations

import heapq
import time
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from itertools import chain
from typing import TYPE_CHECKING

import numpy as np

from opera.model import OperatorInstance
from opera.prioritize.partitions import instance_singles, operator_key

if TYPE_CHECKING:
    from opera.prioritize.history import OperatorHistory

__all__ = [
    "ZERO_CASES",
    "CompiledCorpus",
    "ElementInterner",
    "compile_corpus",
    "greedy_order",
    "operator_scores",
]


@dataclass
class ElementInterner:
    """(operator, parameter partition) singles and pairs -> dense ints, shared by corpus and equipped."""

    singles_by_op: list[dict[object, int]] = field(default_factory=list)
    pairs: dict[tuple[int, int], int] = field(default_factory=dict)
    patterns: dict[tuple[int, ...], tuple[int, ...]] = field(default_factory=dict)
    ops: dict[str, int] = field(default_factory=dict)
    count: int = 0

    def op_index(self, api: str) -> int:
        index = self.ops.get(api)
        if index is None:
            index = self.ops[api] = len(self.ops)
        return index

    def elements(self, op: int, inst: OperatorInstance) -> tuple[int, ...]:
        """Element ids of ``inst`` under operator ``op``: its singles, then its pairs.

        Instances with the same singles share one tuple (the pattern cache, keyed by the single
        ids), so pairs are interned once per distinct pattern, not once per instance.
        """
        found = instance_singles(inst)
        while len(self.singles_by_op) <= op:
            self.singles_by_op.append({})
        singles = self.singles_by_op[op]
        ids = []
        for s in found:
            sid = singles.get(s)
            if sid is None:
                sid = singles[s] = self.count
                self.count += 1
            ids.append(sid)
        pattern = tuple(ids)
        cached = self.patterns.get(pattern)
        if cached is not None:
            return cached
        elems = list(ids)
        pairs = self.pairs
        n = len(ids)
        for i in range(n):
            a = ids[i]
            for j in range(i + 1, n):
                pk = (a, ids[j])
                pid = pairs.get(pk)
                if pid is None:
                    pid = pairs[pk] = self.count
                    self.count += 1
                elems.append(pid)
        result = self.patterns[pattern] = pattern if n == 1 else tuple(elems)
        return result


@dataclass
class CompiledCorpus:
    ids: list[str]
    op_of: list[int]
    elements: list[tuple[int, ...]]
    interner: ElementInterner

    @property
    def op_names(self) -> list[str]:
        return list(self.interner.ops)


def compile_corpus(
    instances: Iterable[OperatorInstance], interner: ElementInterner | None = None
) -> CompiledCorpus:
    """Intern every instance once; duplicates (same id) are kept once, first occurrence wins."""
    interner = interner or ElementInterner()
    seen: set[str] = set()
    ids: list[str] = []
    op_of: list[int] = []
    elements: list[tuple[int, ...]] = []
    for inst in instances:
        iid = inst.id
        if iid in seen:
            continue
        seen.add(iid)
        op = interner.op_index(operator_key(inst))
        ids.append(iid)
        op_of.append(op)
        elements.append(interner.elements(op, inst))
    return CompiledCorpus(ids=ids, op_of=op_of, elements=elements, interner=interner)


def history_weights(corpus: CompiledCorpus, history: OperatorHistory) -> list[float]:
    """``history.weight`` of every instance of ``corpus``, from its interned partitions: each
    single's Laplace rate is computed once, and each distinct partition pattern's maximum once
    (weighing 1M instances one by one would compute their partitions a second time)."""
    interner = corpus.interner
    rate = [0.0] * interner.count  # pairs stay 0: a weight is the best single's rate
    prior_of: dict[int, float] = {}
    for api, op in interner.ops.items():
        prior = prior_of[op] = history.score(api)
        if op < len(interner.singles_by_op):
            for single, sid in interner.singles_by_op[op].items():
                rate[sid] = history.partition_rate(api, single, prior)
    by_pattern: dict[int, float] = {}  # id of a shared elements tuple -> its weight
    known, rate_of = by_pattern.get, rate.__getitem__
    weights: list[float] = []
    append = weights.append
    for op, elements in zip(corpus.op_of, corpus.elements, strict=True):
        weight = known(id(elements))
        if weight is None:
            prior = prior_of[op]
            weight = by_pattern[id(elements)] = max(map(rate_of, elements), default=prior) / prior
        append(weight)
    return weights


ZERO_CASES = ("untested-first", "smoothed")
# Num_DLC = 0 reads as an infinite ratio: a large finite stand-in keeps score x diversity ordered
# lexicographically (any untested instance with new partitions before every tested one) while
# 0 x diversity stays 0, never NaN.
UNTESTED_FACTOR = 1e9


def operator_scores(
    corpus_counts: Counter[str], equipped_counts: Counter[str], zero_case: str = "untested-first"
) -> dict[str, float]:
    """Operator score ``Num_DLL / Num_DLC`` (paper III-B1) with a defined ``Num_DLC = 0`` case.

    * ``untested-first``: ``Num_DLL / 0`` is infinite: every operator the compiler's own tests never
      use shares one score far above all finite ratios, so their instances with anything new come
      first, ordered among themselves by parameter diversity alone. This is what the artifact's
      published order shows (untested operators, round after round, before any tested one).
    * ``smoothed``: ``Num_DLL / (Num_DLC + 1)`` for every operator; a frequent untested operator
      then outranks rare ones until its diversity drops a lot.
    """
    if zero_case == "smoothed":
        return {api: n / (equipped_counts.get(api, 0) + 1) for api, n in corpus_counts.items()}
    if zero_case != "untested-first":
        raise ValueError(f"unknown zero case {zero_case!r} (known: {', '.join(ZERO_CASES)})")
    ratios = {
        api: n / equipped_counts[api] for api, n in corpus_counts.items() if equipped_counts.get(api, 0) > 0
    }
    top = UNTESTED_FACTOR * (1.0 + max(ratios.values(), default=0.0))
    return {api: ratios.get(api, top) for api in corpus_counts}


def greedy_order(
    corpus: CompiledCorpus,
    op_score: Sequence[float],
    *,
    use_diversity: bool = True,
    precovered: Iterable[int] = (),
    stats: dict[str, object] | None = None,
    rarity_ties: bool = True,
    weights: Sequence[float] | None = None,
) -> list[str]:
    """Greedy order by ``op_score[op] * diversity``; ``use_diversity=False`` makes diversity 1.
    ``rarity_ties=False`` breaks equal-diversity ties by corpus order alone (the paper's text).
    ``weights``: per instance (equal for instances of one element tuple), multiplying its diversity
    and breaking ties before rarity (a history's instance-level bug rate).

    Instances of one operator with the same element tuple (the interner shares it) always have the
    same diversity, so each operator's heap holds one entry per distinct tuple (a *group*), keyed by
    its first remaining instance; picking from a group re-enters it with its next instance.
    """
    n_ops = len(op_score)
    covered = bytearray(corpus.interner.count)
    for e in precovered:
        covered[e] = 1
    getc = covered.__getitem__
    version = [0] * n_ops
    picks = [0] * n_ops
    rescored = 0

    # Groups: per operator, element tuple -> its instances in corpus order.
    group_members: list[list[int]] = []
    group_elements: list[tuple[int, ...]] = []
    group_next: list[int] = []
    # Keyed by the tuple's identity: the interner gives equal element tuples one shared object, and
    # hashing a million tuples of tens of ints is a measurable share of a 1M-instance order.
    group_of: list[dict[int, int]] = [{} for _ in range(n_ops)]
    for i, (op, el) in enumerate(zip(corpus.op_of, corpus.elements, strict=True)):
        key = id(el)
        g = group_of[op].get(key)
        if g is None:
            g = group_of[op][key] = len(group_members)
            group_members.append([])
            group_elements.append(el)
            group_next.append(0)
        group_members[g].append(i)

    weight = [1.0] * len(group_members)
    if weights is not None:
        weight = [float(weights[members[0]]) for members in group_members]

        def diversity(g: int) -> float:
            el = group_elements[g]
            return weight[g] * (len(el) - sum(map(getc, el))) / len(el)

    else:  # the hot path without a history: no multiplication by 1

        def diversity(g: int) -> float:
            el = group_elements[g]
            return (len(el) - sum(map(getc, el))) / len(el)

    # Rarity: the mean inverse frequency of a group's elements among its operator's instances.
    # It breaks ties of equal diversity (every operator's first round is all ties at 1.0): the most
    # unusual setting first, not the corpus's first (often its most basic) instance. An element id
    # belongs to one operator (singles are interned per operator, pairs from them), so one global
    # count per element is the per-operator frequency; numpy adds in the same order as a Python
    # loop would, so the values are the same to the bit.
    n_groups = len(group_members)
    lengths = np.fromiter(map(len, group_elements), dtype=np.int32, count=n_groups)
    flat = np.fromiter(chain.from_iterable(group_elements), dtype=np.int32, count=int(lengths.sum()))
    safe_lengths = np.maximum(lengths, 1)  # an empty tuple has rarity 0 and diversity 0
    if rarity_ties:
        sizes = np.fromiter(map(len, group_members), dtype=np.float64, count=n_groups)
        # integer counts in float64: exact, whatever the order of the chunks' additions
        freq = np.zeros(corpus.interner.count)
        for lo, hi, g0, g1 in _chunks(lengths):
            freq += np.bincount(flat[lo:hi], weights=np.repeat(sizes[g0:g1], lengths[g0:g1]), minlength=len(freq))
        with np.errstate(divide="ignore"):  # elements no group holds (precovered only): never read
            inverse = 1.0 / freq
        rarity = (_group_sums(flat, lengths, inverse) / safe_lengths).tolist()
        del sizes, freq, inverse
    else:
        rarity = [0.0] * n_groups
    if weights is not None:  # the weight decides ties first: rarity is at most 1
        rarity = [2.0 * weight[g] + r for g, r in enumerate(rarity)]

    # Candidate heaps: (-diversity, -rarity, first remaining instance, version, group), the
    # starting diversities from the precovered elements (the same arithmetic as ``diversity``).
    if use_diversity:
        held = _group_sums(flat, lengths, np.frombuffer(bytes(covered), dtype=np.uint8))
        uncovered = lengths - held.astype(np.int64)
        if weights is not None:
            start = (np.asarray(weight) * uncovered / safe_lengths).tolist()
        else:
            start = (uncovered / safe_lengths).tolist()
        del held, uncovered
    else:
        start = [1.0] * n_groups
    del lengths, flat, safe_lengths
    heaps: list[list[tuple[float, float, int, int, int]]] = [[] for _ in range(n_ops)]
    for op in range(n_ops):
        heap = heaps[op]
        for g in group_of[op].values():
            heap.append((-start[g], -rarity[g], group_members[g][0], 0, g))
        heapq.heapify(heap)

    def best(op: int) -> tuple[float, int] | None:
        nonlocal rescored
        h = heaps[op]
        v = version[op]
        while h:
            negd, negr, i, ver, g = h[0]
            if ver == v or not negd or not use_diversity:  # diversity 0 stays 0: exact
                return -negd, i
            rescored += 1
            heapq.heapreplace(h, (-diversity(g), negr, i, v, g))
        return None

    def op_entry(op: int, div: float) -> tuple[float, int, float, int]:
        s = op_score[op]
        return (-(s * div), picks[op], -s, op)

    top: list[tuple[float, int, float, int]] = []
    for op in range(n_ops):
        b = best(op)
        if b is not None:
            top.append(op_entry(op, b[0]))
    heapq.heapify(top)

    order: list[str] = []
    ids = corpus.ids
    append, heapreplace, heappop = order.append, heapq.heapreplace, heapq.heappop
    while top:
        op = top[0][3]
        h = heaps[op]  # its top is exact: only a pick from ``op`` changes ``op``'s coverage
        negd, negr, i, _, g = h[0]
        append(ids[i])
        picks[op] += 1
        taken = group_next[g]
        if use_diversity and not taken:  # a group's later picks cover nothing new
            new = False
            for e in group_elements[g]:
                if not covered[e]:
                    covered[e] = 1
                    new = True
            if new:
                version[op] += 1
        taken += 1
        group_next[g] = taken
        members = group_members[g]
        if taken < len(members):
            # the group's own elements are now all covered: exact diversity 0 (or 1 without diversity)
            heapreplace(h, (0.0 if use_diversity else negd, negr, members[taken], version[op], g))
        else:
            heappop(h)
        if not h:
            heappop(top)
            continue
        negd, _, _, ver, _ = h[0]
        if negd and use_diversity and ver != version[op]:  # stale: re-score (``best``)
            b = best(op)
            assert b is not None
            negd = -b[0]
        s = op_score[op]
        heapreplace(top, (s * negd, picks[op], -s, op))  # ``op_entry``, inlined
    if stats is not None:
        stats.update(groups=len(group_members), rescored=rescored)
    return order


_CHUNK_GROUPS = 1 << 16


def _chunks(lengths: np.ndarray) -> Iterator[tuple[int, int, int, int]]:
    """(first, end) positions in the flat element array and (first, end) groups, per chunk of
    groups: the per-element temporaries stay a chunk long (at 1M instances the flat array holds
    millions of entries, beside the groups and heaps)."""
    ends = np.cumsum(lengths, dtype=np.int64)
    for a in range(0, len(lengths), _CHUNK_GROUPS):
        b = min(a + _CHUNK_GROUPS, len(lengths))
        yield (int(ends[a - 1]) if a else 0), int(ends[b - 1]), a, b


def _group_sums(flat: np.ndarray, lengths: np.ndarray, value_of: np.ndarray) -> np.ndarray:
    """For each group, the sum of ``value_of`` over its elements, added in the elements' order
    (``np.bincount`` adds its weights sequentially: the same bits as a Python loop)."""
    out = np.zeros(len(lengths))
    for lo, hi, a, b in _chunks(lengths):
        owner = np.repeat(np.arange(b - a, dtype=np.int32), lengths[a:b])
        out[a:b] = np.bincount(owner, weights=value_of[flat[lo:hi]], minlength=b - a)
    return out


def diversity_order(
    instances: Iterable[OperatorInstance],
    equipped: Sequence[OperatorInstance],
    *,
    use_op_score: bool,
    use_diversity: bool,
    precover_equipped: bool,
    zero_case: str = "untested-first",
    notes: dict[str, object] | None = None,
    rarity_ties: bool = True,
    history: OperatorHistory | None = None,
) -> list[str]:
    """Compile the corpus, score operators against the equipped corpus (or, given ``history``, by
    what earlier runs on the target say of them: ``OperatorHistory.score``), run the greedy order.

    Instances the validity gate rejected (``valid is False``: their own library refused them, so
    no compiler can be tested with them) go last, in corpus order: known before any test runs, they
    would only spend the first positions of the order.
    """
    start = time.perf_counter()
    rejected: list[str] = []

    def runnable(items: Iterable[OperatorInstance]) -> Iterable[OperatorInstance]:
        for inst in items:
            if inst.valid is False:
                rejected.append(inst.id)
            else:
                yield inst

    corpus = compile_corpus(runnable(instances))
    interner = corpus.interner
    counts = Counter(corpus.op_of)
    corpus_counts = Counter({api: counts[i] for api, i in interner.ops.items()})
    equipped_counts = Counter(operator_key(inst) for inst in equipped)
    if use_op_score and history is not None:
        scores = {api: history.score(api) for api in interner.ops}
    else:
        scores = operator_scores(corpus_counts, equipped_counts, zero_case)
    op_score = [scores[api] if use_op_score else 1.0 for api in interner.ops]
    precovered: list[int] = []
    if use_diversity and precover_equipped:
        known = dict(interner.ops)
        for inst in equipped:
            op = known.get(operator_key(inst))
            if op is not None:  # an operator the corpus does not use cannot matter
                precovered.extend(interner.elements(op, inst))
    compile_seconds = time.perf_counter() - start
    stats: dict[str, object] = {}
    start = time.perf_counter()
    weights = None
    if history is not None and use_diversity:
        weights = history_weights(corpus, history)
    order = greedy_order(
        corpus,
        op_score,
        use_diversity=use_diversity,
        precovered=precovered,
        stats=stats,
        rarity_ties=rarity_ties,
        weights=weights,
    )
    placed = set(order)
    for iid in rejected:
        if iid not in placed:
            placed.add(iid)
            order.append(iid)
    if notes is not None:
        notes.update(
            compile_seconds=round(compile_seconds, 3),
            greedy_seconds=round(time.perf_counter() - start, 3),
            **stats,
            operators=len(interner.ops),
            operators_in_equipped=sum(1 for api in interner.ops if equipped_counts.get(api)),
            elements=interner.count,
            precovered_elements=len(set(precovered)),
        )
        if history is not None and use_op_score:
            notes.update(history=history.source, operators_in_history=history.knows(interner.ops))
    return order
