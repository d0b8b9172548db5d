"""Root causes: from failure signatures to the defects behind them.

A signature (innermost frontend frame + exception type, or target + converter) is how a run
de-duplicates failures, but it is not a defect: one ``Resize`` converter signature can hold an
ignored ``antialias`` and a rounded scale, and one missing dtype in a shared helper shows up under
many operators. A root cause here is

    (target, signature, normalized error line, distinguishing features)

- **split**: within a signature, failures whose error lines differ after normalization (numbers,
  quoted names and addresses removed) are different defects; within one error line and one
  operator, the failing instances are explained by the features they have and no passing instance
  of the same operator on the same target has (a dtype, an attribute, an attribute's value, an
  opset, a rank, an empty tensor, a parameter's value partition; a pair of them when no single one
  separates), chosen greedily to cover the failures with as few features as possible. An operator
  none of whose instances passes is explained by "every instance".
- **merge**: root causes of one target with the same signature and features (e.g. ``dtype:float16``
  in a shared conversion helper, met by several operators) are one; so are those with the same
  long, specific error line (one message, one defect: reached with other features, by other
  operators, or through other frames). Their features are then the list of what explains each.

Failures whose instances are not available (the corpus is gone) are one root cause per signature
and error line, with features ``?``.
"""

from __future__ import annotations

import hashlib
import re
from collections import defaultdict
from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass, field
from itertools import combinations
from typing import Any

import numpy as np

from opera.model import OperatorInstance
from opera.outcomes import Outcome, TestResult
from opera.prioritize.partitions import named_parameters, partition
from opera.values import TensorSpec

__all__ = [
    "BUG_OUTCOMES",
    "RootCause",
    "error_line",
    "find_root_causes",
    "instance_features",
    "keeps_features",
    "native_error_line",
    "normalized_error",
    "raw_error_line",
    "required_features",
]

# the outcomes that are bugs (one signature each)
BUG_OUTCOMES = frozenset({Outcome.CRASH, Outcome.NATIVE_CRASH, Outcome.TIMEOUT, Outcome.INCONSISTENT})
EVERY_INSTANCE = "every instance"
UNKNOWN = "?"
NO_FEATURE = "no distinguishing feature"
# an error line this long (normalized) names one defect even when reached through different frames
_SPECIFIC_ERROR = 40

# feature kinds, most general first: a tie in coverage goes to the more general explanation
_KIND_ORDER = ("dtype", "attribute", "opset", "rank", "empty", "value")


@dataclass
class RootCause:
    target: str
    kind: str  # the outcome: crash / native-crash / timeout / inconsistent
    features: tuple[str, ...]
    error: str  # the normalized error line ("" for inconsistencies)
    signatures: list[str] = field(default_factory=list)
    apis: list[str] = field(default_factory=list)
    instances: list[str] = field(default_factory=list)  # failing instance ids
    example: str = ""  # the smallest failing instance's id
    keys: list[str] = field(default_factory=list)  # the member keys (one per merged part)

    @property
    def id(self) -> str:
        """Stable across runs: derived from the first member key (target, signature, error, features)."""
        return "rc-" + hashlib.sha1(min(self.keys).encode()).hexdigest()[:10]

    @property
    def title(self) -> str:
        where = self.signatures[0].split(":", 2)[-1] if self.signatures else ""
        ops = ", ".join(self.apis[:3]) + (f" (+{len(self.apis) - 3} more)" if len(self.apis) > 3 else "")
        return f"{self.target}: {self.kind} in {where} on {ops} [{', '.join(self.features)}]"

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "target": self.target,
            "kind": self.kind,
            "features": list(self.features),
            "error": self.error,
            "signatures": self.signatures,
            "apis": self.apis,
            "instances": len(self.instances),
            "instance_ids": sorted(set(self.instances)),  # the failing tests' instances, for a judge
            "example_instance": self.example,
            "keys": sorted(self.keys),
        }


_DTYPE_WORD = re.compile(
    r"\b(u?int(4|8|16|32|64)|float(4|8|16|32|64)\w*|bfloat16|bool|complex(64|128)|[iuf](4|8|16|32|64)|bf16|boolean)\b"
)
_NUMBER = re.compile(r"(?<![\w.])[-+]?\d+(\.\d+)?([eE][-+]?\d+)?(?![\w])")
_HEX = re.compile(r"0x[0-9a-fA-F]+")
# the counter a framework appends to the names it makes up (Keras' ``keras_tensor_80``,
# OpenVINO's ``functional_166_1/Sum_2``, Relax's ``inputs_0``): the same defect on the next model
_NAME_COUNTER = re.compile(r"(?<=\w)_\d+(?=_|\W|$)")
# lines of a native frontend's message that say where, not what
_LOCATION_ONLY = re.compile(
    r"^(Exception from \S+:\d+:?|FrontEnd API failed with \w+:?|-- .* with a message:|Summary:|"
    r"Check 'false' failed at \S+unconverted_ops_report\.cpp:\d+:?|\^+|~+)$"
)


def error_line(message: str) -> str:
    """What a stored crash message says went wrong, normalized (``raw_error_line`` with numbers,
    addresses and dtype names replaced, so that one defect met with other values reads the same).
    Quoted names are kept: ``KeyError: 'num_heads'`` and ``KeyError: 'axis'`` are different defects,
    but not the counters in generated names (``'keras_tensor_80'`` reads ``'keras_tensor_N'``)."""
    return normalized_error(raw_error_line(message))[:200]


def normalized_error(text: str) -> str:
    """``text`` with numbers, addresses, name counters and dtype names replaced as ``error_line``
    does (idempotent: a ledger entry's error, written from the raw message or from the normalized
    line, reads the same)."""
    line = _NUMBER.sub("N", _NAME_COUNTER.sub("_N", _HEX.sub("ADDR", text)))
    return " ".join(_DTYPE_WORD.sub("DT", line).split())


# "worker died (SIGFPE) during compile at libX.so+0x3a5f10 (symbol) < ...": the faulting place
# the worker's signal handler reported (opera.run.native_trace); the first one is the final death
_NATIVE_PLACE = re.compile(r"worker died \((\w+)\) during [^,(]*? at (\S+\+0x[0-9a-f]+)")


def native_error_line(message: str) -> str:
    """``SIGFPE at libopenvino.so.2641+0xe103f6``: the signal and the first frame outside the C and
    C++ runtimes of a native crash, or "" when the message names none. One defect reached through
    several operators faults at one instruction: their root causes merge on it."""
    found = _NATIVE_PLACE.search(message)
    return f"{found.group(1)} at {found.group(2)}" if found else ""


def raw_error_line(message: str) -> str:
    """The exception's type and its most specific line (the last one that is not only a location:
    OpenVINO's nested "Exception from <file>" / "Check ... failed at" wrappers are skipped)."""
    lines = [line.rstrip() for line in message.splitlines() if line.strip()]
    last_frame = max((i for i, line in enumerate(lines) if line.startswith('  File "')), default=-1)
    block = [line.strip() for line in lines[last_frame + 1 :] if not line.startswith("    ")]
    if not block:
        return ""
    kind = block[0].split(":", 1)[0] if ":" in block[0] else ""
    informative = [line for line in block if not _LOCATION_ONLY.match(line)]
    line = informative[-1] if informative else block[0]
    if kind and not line.startswith(kind):
        line = f"{kind}: {line}"
    return line


def _tensor(value: Any) -> tuple[str, tuple[Any, ...]] | None:
    if isinstance(value, TensorSpec):
        return str(value.dtype), tuple(value.shape)
    if isinstance(value, np.ndarray):
        return value.dtype.name, tuple(value.shape)
    return None


def _plain(value: Any) -> str | None:
    if isinstance(value, (np.ndarray, TensorSpec)):
        return None
    text = repr(value.item() if isinstance(value, np.generic) else value)
    return text if len(text) <= 40 else None


def instance_features(inst: OperatorInstance) -> set[str]:
    """What an instance is made of, in words a maintainer reads: ``dtype:float16``,
    ``attribute:antialias``, ``attribute:mode='cubic'``, ``opset:18``, ``rank:0``, ``empty``
    (a zero-size tensor), ``value:<param>=<partition>``."""
    feats: set[str] = set()

    def walk(name: str, value: Any) -> None:
        tensor = _tensor(value)
        if tensor is not None:
            dtype, shape = tensor
            feats.add(f"dtype:{dtype}")
            feats.add(f"rank:{len(shape)}")
            if any(isinstance(d, int) and d == 0 for d in shape):
                feats.add("empty")
        elif isinstance(value, (list, tuple)):
            for item in value:
                if _tensor(item) is not None:
                    walk(name, item)

    for name, value in named_parameters(inst):
        walk(name, value)
        feats.add(f"value:{name}={_partition_text(partition(value))}")
    for key, value in inst.kwargs.items():
        feats.add(f"attribute:{key}")
        text = _plain(value)
        if text is not None:
            feats.add(f"attribute:{key}={text}")
    opset = inst.extra.get("opset") if inst.extra else None
    if opset is not None:
        feats.add(f"opset:{opset}")
    return feats


def _partition_text(part: Hashable) -> str:
    return str(part).replace(" ", "")


def _feature_present(feature: str, feats: set[str]) -> bool:
    """``feature`` holds for an instance with features ``feats`` (``key in {...}``: the key is set)."""
    if " in {" in feature:
        key = feature.split(" in {", 1)[0]
        return any(f == key or f.startswith(key + "=") or f.startswith(key + ":") for f in feats)
    return feature in feats


def required_features(cause: RootCause, inst: OperatorInstance) -> set[str]:
    """The features of ``cause`` that its example ``inst`` has: what a reduced instance must keep to
    stay an instance of the same root cause (none for "every instance" and the like)."""
    feats = instance_features(inst)
    plain = (f for f in cause.features if f not in (EVERY_INSTANCE, NO_FEATURE, UNKNOWN))
    return {f for f in plain if _feature_present(f, feats)}


def keeps_features(inst: OperatorInstance, required: set[str]) -> bool:
    feats = instance_features(inst)
    return all(_feature_present(f, feats) for f in required)


def _kind_rank(feature: str) -> int:
    kind = feature.split(":", 1)[0]
    return _KIND_ORDER.index(kind) if kind in _KIND_ORDER else len(_KIND_ORDER)


def _explain(
    failing: dict[str, set[str]], passing: list[set[str]]
) -> dict[str, tuple[str, ...]]:
    """For each failing instance id, the feature (or pair) that explains it: present in it and in
    no passing instance; greedily the fewest features covering the most failures."""
    if not passing:
        return {i: (EVERY_INSTANCE,) for i in failing}
    seen_passing: set[str] = set().union(*passing)
    candidates: dict[tuple[str, ...], set[str]] = defaultdict(set)
    for inst_id, feats in failing.items():
        for feat in feats - seen_passing:
            candidates[(feat,)].add(inst_id)
    explained = set().union(*candidates.values()) if candidates else set()
    for inst_id, feats in failing.items():  # pairs, only for what no single feature explains
        if inst_id in explained:
            continue
        for a, b in combinations(sorted(feats), 2):
            if not any(a in p and b in p for p in passing):
                candidates[(a, b)].add(inst_id)
    out: dict[str, tuple[str, ...]] = {}
    uncovered = set(failing)
    while uncovered and candidates:
        best = min(
            candidates,
            key=lambda c: (-len(candidates[c] & uncovered), len(c), max(_kind_rank(f) for f in c), len("".join(c)), c),
        )
        covered = candidates.pop(best) & uncovered
        if not covered:
            break
        for inst_id in covered:
            out[inst_id] = best
        uncovered -= covered
    for inst_id in uncovered:
        out[inst_id] = (NO_FEATURE,)
    return _coarsen(out)


def _feature_key(feature: str) -> str:
    """What a single feature is a value of: ``attribute:to=17`` -> ``attribute:to``, ``dtype:int8`` ->
    ``dtype``; a feature with no value is its own key."""
    kind, _, rest = feature.partition(":")
    if kind == "dtype" or kind == "rank":
        return kind
    return f"{kind}:{rest.split('=', 1)[0]}" if "=" in rest else feature


def _coarsen(explanation: dict[str, tuple[str, ...]]) -> dict[str, tuple[str, ...]]:
    """Single features that are values of one key (``attribute:to=17``, ``attribute:to=19``) become
    one: ``attribute:to in {17, 19}``. Each value separating the failures on its own says the
    defect is in how that attribute (or dtype) is handled, not in one value of it."""
    singles = {f[0] for f in explanation.values() if len(f) == 1}
    by_key: dict[str, list[str]] = defaultdict(list)
    for feature in sorted(singles):
        key = _feature_key(feature)
        if key != feature:
            by_key[key].append(feature)
    merged: dict[str, str] = {}
    for key, features in by_key.items():
        if len(features) > 1:
            values = ", ".join(f.split("=", 1)[1] if "=" in f else f.split(":", 1)[1] for f in features)
            for feature in features:
                merged[feature] = f"{key} in {{{values}}}"
    return {i: ((merged[f[0]],) if len(f) == 1 and f[0] in merged else f) for i, f in explanation.items()}


def _key(target: str, signature: str, error: str, features: tuple[str, ...]) -> str:
    return "|".join((target, signature, error, "+".join(features)))


def find_root_causes(
    results: Iterable[TestResult], instances: Mapping[str, OperatorInstance] | None = None
) -> list[RootCause]:
    """The root causes of the bug outcomes in ``results`` (passing results of the same operators
    are the contrast), biggest first. ``instances``: id -> instance (the run's corpus)."""
    instances = instances or {}
    results = list(results)
    features: dict[str, set[str]] = {}

    def feats(inst_id: str) -> set[str] | None:
        if inst_id not in features:
            inst = instances.get(inst_id)
            if inst is None:
                return None
            features[inst_id] = instance_features(inst)
        return features[inst_id]

    passing: dict[tuple[str, str], list[str]] = defaultdict(list)
    # (target, signature, error, api) -> failing results
    groups: dict[tuple[str, str, str, str], list[TestResult]] = defaultdict(list)
    for r in results:
        if r.outcome is Outcome.PASS:
            passing[(r.target, r.api)].append(r.instance_id)
        elif r.outcome in BUG_OUTCOMES and r.signature:
            error = (
                error_line(r.message)
                if r.outcome is Outcome.CRASH
                else native_error_line(r.message) if r.outcome is Outcome.NATIVE_CRASH else ""
            )
            groups[(r.target, r.signature, error, r.api)].append(r)

    parts: dict[str, RootCause] = {}  # member key -> part (before merging)
    for (target, signature, error, api), failed in groups.items():
        known = {r.instance_id: feats(r.instance_id) for r in failed}
        if any(f is None for f in known.values()):
            explanation: dict[str, tuple[str, ...]] = {r.instance_id: (UNKNOWN,) for r in failed}
        else:
            contrast = [f for i in passing[(target, api)] if (f := feats(i)) is not None]
            explanation = _explain({i: f for i, f in known.items() if f is not None}, contrast)
        for r in failed:
            feature = explanation[r.instance_id]
            key = _key(target, signature, error, feature)
            part = parts.get(key)
            if part is None:
                part = parts[key] = RootCause(target, r.outcome.value, feature, error, keys=[key])
            if signature not in part.signatures:
                part.signatures.append(signature)
            if api not in part.apis:
                part.apis.append(api)
            part.instances.append(r.instance_id)
    merged = _merge(list(parts.values()))
    size = {r.instance_id: len(instances[r.instance_id].to_line()) for r in results if r.instance_id in instances}
    for cause in merged:
        cause.example = min(cause.instances, key=lambda i: (size.get(i, 1 << 30), i))
        cause.signatures.sort()
        cause.apis.sort()
    return sorted(merged, key=lambda c: (-len(c.instances), c.target, c.id))


def _merge(parts: list[RootCause]) -> list[RootCause]:
    """Union of parts of one target that share (signature, error, features), or a long specific
    error line (with the same features)."""
    parent = list(range(len(parts)))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    first_of: dict[tuple[str, ...], int] = {}
    for i, part in enumerate(parts):
        keys = [("signature", part.target, part.signatures[0], part.error, *part.features)]
        if len(part.error) >= _SPECIFIC_ERROR or (part.kind == Outcome.NATIVE_CRASH.value and part.error):
            keys.append(("error", part.target, part.kind, part.error))
        for key in keys:
            if key in first_of:
                parent[find(i)] = find(first_of[key])
            else:
                first_of[key] = i
    out: dict[int, RootCause] = {}
    for i, part in enumerate(parts):
        root = find(i)
        if root not in out:
            out[root] = part
            continue
        into = out[root]
        into.keys.extend(part.keys)
        into.features = into.features + tuple(f for f in part.features if f not in into.features)
        into.signatures.extend(s for s in part.signatures if s not in into.signatures)
        into.apis.extend(a for a in part.apis if a not in into.apis)
        into.instances.extend(part.instances)
    return list(out.values())
