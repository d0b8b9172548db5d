"""Differential oracle: compare a compiler's outputs with the library's reference (docs/design.md, Verdict).

The distance is the Chebyshev distance (max |a - b|) as in the paper, computed in float64 (exact
integer arithmetic for integer tensors). Positions where both sides hold the same non-finite value
(NaN and NaN, +Inf and +Inf) are ignored; a NaN/Inf pattern that differs is an inconsistency of
infinite distance. Thresholds come from ``opera/verdict/oracles.toml`` (or a file given with
``--oracle-config``), resolved per target and per dtype.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from opera.config import read_config
from opera.errors import OperaError
from opera.verdict.undefined import CONDITIONS, UndefinedRule

__all__ = [
    "DEFAULT_CONFIG_PATH",
    "Comparison",
    "OracleConfig",
    "Threshold",
    "chebyshev_distance",
    "compare_outputs",
    "dtypes_differ",
    "load_oracle_config",
    "nonfinite_mismatch",
]

DEFAULT_CONFIG_PATH = Path(__file__).with_name("oracles.toml")

# Floating dtypes from the least to the most precise: an op fed low-precision inputs is judged
# with the low-precision threshold even when it returns float32.
_LOW_PRECISION = ("float8_e5m2", "float8_e4m3fn", "bfloat16", "float16")


@dataclass(frozen=True)
class Threshold:
    atol: float = 1e-3
    rtol: float = 0.0
    check_dtype: bool = True

    def allowed(self, reference: np.ndarray) -> float:
        if self.rtol == 0.0:
            return self.atol
        return self.atol + self.rtol * _max_abs_finite(reference)

    def loosened(self, atol: float | None, rtol: float | None) -> Threshold:
        """The looser of this threshold and an instance's own test tolerance."""
        return Threshold(
            atol=max(self.atol, atol or 0.0), rtol=max(self.rtol, rtol or 0.0), check_dtype=self.check_dtype
        )


@dataclass(frozen=True)
class OracleConfig:
    """Thresholds resolved as default < dtype < target < target+dtype."""

    default: Threshold
    by_dtype: dict[str, dict[str, Any]]
    by_target: dict[str, dict[str, Any]]
    source: str = ""
    # APIs whose output values are random by specification (RandomUniformLike, torch.rand, ...):
    # only output count, shapes and dtypes are compared; two implementations drawing different
    # numbers (even from the same seed) is not a bug.
    random_apis: tuple[re.Pattern[str], ...] = ()
    # Where the specification leaves output values undefined ([[undefined]], opera/verdict/undefined.py).
    undefined: tuple[UndefinedRule, ...] = ()

    def is_random(self, api: str) -> bool:
        return any(p.search(api) for p in self.random_apis)

    def threshold(self, target: str | None, dtype: str) -> Threshold:
        fields: dict[str, Any] = {
            "atol": self.default.atol,
            "rtol": self.default.rtol,
            "check_dtype": self.default.check_dtype,
        }
        fields.update(self.by_dtype.get(dtype, {}))
        target_table = self.by_target.get(target or "", {})
        fields.update({k: v for k, v in target_table.items() if k != "dtype"})
        fields.update(target_table.get("dtype", {}).get(dtype, {}))
        return Threshold(float(fields["atol"]), float(fields["rtol"]), bool(fields["check_dtype"]))


_KEYS = {"atol", "rtol", "check_dtype"}


def _check_table(where: str, table: Any, allow_dtype: bool = False) -> dict[str, Any]:
    if not isinstance(table, dict):
        raise OperaError(f"oracle config: [{where}] must be a table")
    for key, value in table.items():
        if key == "dtype" and allow_dtype:
            if not isinstance(value, dict):
                raise OperaError(f"oracle config: [{where}.dtype] must be a table")
            for dtype, sub in value.items():
                _check_table(f"{where}.dtype.{dtype}", sub)
            continue
        if key not in _KEYS:
            raise OperaError(
                f"oracle config: unknown key {key!r} in [{where}] (known: {', '.join(sorted(_KEYS))})"
            )
        if key == "check_dtype":
            if not isinstance(value, bool):
                raise OperaError(f"oracle config: {where}.{key} must be true or false")
        elif not isinstance(value, int | float) or isinstance(value, bool) or value < 0:
            raise OperaError(f"oracle config: {where}.{key} must be a non-negative number")
    return table


def _merge_tables(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """``over`` on top of ``base``, per dtype inside ``dtype``."""
    merged = {**base, **{k: v for k, v in over.items() if k != "dtype"}}
    dtypes = {k: dict(v) for k, v in base.get("dtype", {}).items()}
    for dtype, table in over.get("dtype", {}).items():
        dtypes[dtype] = {**dtypes.get(dtype, {}), **table}
    if dtypes:
        merged["dtype"] = dtypes
    return merged


def _declared_tolerances() -> dict[str, dict[str, Any]]:
    """Each registered target's own ``tolerances`` (declared on its class), checked as a TOML table."""
    from opera.run.targets import target_classes

    out: dict[str, dict[str, Any]] = {}
    for cls in target_classes():
        if cls.tolerances:
            table = {k: (dict(v) if isinstance(v, dict) else v) for k, v in cls.tolerances.items()}
            out[cls.name] = _check_table(f"target {cls.name} (its tolerances)", table, allow_dtype=True)
    return out


def load_oracle_config(path: str | Path | None = None) -> OracleConfig:
    config_path, data = read_config(
        path, DEFAULT_CONFIG_PATH, "oracle config", {"default", "dtype", "target", "random", "undefined"}
    )
    default = _check_table("default", data.get("default", {}))
    by_dtype = {k: _check_table(f"dtype.{k}", v) for k, v in data.get("dtype", {}).items()}
    by_target = _declared_tolerances()
    for name, table in data.get("target", {}).items():
        by_target[name] = _merge_tables(by_target.get(name, {}), _check_table(f"target.{name}", table, allow_dtype=True))
    random_table = data.get("random", {})
    if not isinstance(random_table, dict) or set(random_table) - {"apis"}:
        raise OperaError(f"oracle config {config_path}: [random] holds only `apis = [...]`")
    random_apis = []
    for text in random_table.get("apis", []):
        try:
            random_apis.append(re.compile(str(text)))
        except re.error as exc:
            raise OperaError(
                f"oracle config {config_path}: bad pattern in [random]: {text!r} ({exc})"
            ) from None
    base = Threshold()
    undefined = _undefined_rules(config_path, data.get("undefined", []))
    return OracleConfig(
        default=Threshold(
            float(default.get("atol", base.atol)),
            float(default.get("rtol", base.rtol)),
            bool(default.get("check_dtype", base.check_dtype)),
        ),
        by_dtype=by_dtype,
        by_target=by_target,
        source=str(config_path),
        random_apis=tuple(random_apis),
        undefined=undefined,
    )


def _undefined_rules(config_path: Path, tables: Any) -> tuple[UndefinedRule, ...]:
    """``[[undefined]]`` tables: ``apis`` (regexes), ``when`` (a condition), ``reason`` (the spec's
    words), and the condition's own options (``input``, ``inputs``, ``outputs``, ``kwarg``, ``range``,
    ``ranks``, ``attribute``, ``values``); ``domain``, ``library`` and ``opsets`` for any rule."""
    if not isinstance(tables, list):
        raise OperaError(f"oracle config {config_path}: write undefined rules as [[undefined]] tables")
    rules = []
    for k, table in enumerate(tables):
        where = f"oracle config {config_path}: [[undefined]] number {k + 1}"
        if not isinstance(table, dict):
            raise OperaError(f"{where} must be a table")
        when = table.get("when")
        if when not in CONDITIONS:
            raise OperaError(f"{where}: when = {when!r}; known: {', '.join(sorted(CONDITIONS))}")
        reason = table.get("reason")
        if not isinstance(reason, str) or not reason.strip():
            raise OperaError(f"{where}: a reason (the specification's words) is required")
        apis = table.get("apis")
        if not isinstance(apis, list) or not apis:
            raise OperaError(f"{where}: apis = [regex, ...] is required")
        try:
            patterns = tuple(re.compile(str(a)) for a in apis)
        except re.error as exc:
            raise OperaError(f"{where}: bad pattern ({exc})") from None
        for flag in ("domain", "library"):
            if not isinstance(table.get(flag, False), bool):
                raise OperaError(f"{where}: {flag} = true or false")
        if table.get("domain") and table.get("library"):
            raise OperaError(f"{where}: domain and library exclude each other")
        opsets = table.get("opsets")
        if opsets is not None and not (
            isinstance(opsets, list) and len(opsets) == 2 and all(isinstance(v, int) for v in opsets)
        ):
            raise OperaError(f"{where}: opsets = [first, last] (two integers)")
        for key in ("only_if", "unless"):  # {argument = [values, ...]}
            value = table.get(key, {})
            if not isinstance(value, dict) or not all(isinstance(v, list) for v in value.values()):
                raise OperaError(f"{where}: {key} = {{argument = [values, ...]}}, not {value!r}")
        positions = table.get("positions", {})
        if not isinstance(positions, dict) or not all(isinstance(v, int) and not isinstance(v, bool) for v in positions.values()):
            raise OperaError(f"{where}: positions = {{argument = index}}, not {positions!r}")
        options = {key: value for key, value in table.items() if key not in ("apis", "when", "reason")}
        rules.append(UndefinedRule(patterns, str(when), reason.strip(), options))
    return tuple(rules)


# ---- distances ------------------------------------------------------------------------------


def _as_comparable(x: Any) -> np.ndarray:
    """float16/bfloat16/float8 -> float64 so that arithmetic is exact enough and ml_dtypes-safe."""
    arr = np.asarray(x)
    if arr.dtype.kind == "V" or arr.dtype.name in _LOW_PRECISION:
        return arr.astype(np.float64)
    if arr.dtype.kind == "b":
        return arr.astype(np.int64)
    return arr


def _max_abs_finite(x: np.ndarray) -> float:
    arr = _as_comparable(x)
    if arr.size == 0:
        return 0.0
    if arr.dtype.kind in "fc":
        mags = np.abs(arr[np.isfinite(arr)])
        return float(mags.max()) if mags.size else 0.0
    return float(np.abs(arr.astype(np.float64)).max())


def nonfinite_mismatch(reference: Any, actual: Any) -> str | None:
    """Describe how the NaN/+Inf/-Inf positions differ, or None when they match."""
    a, b = _as_comparable(reference), _as_comparable(actual)
    if a.dtype.kind not in "fc" and b.dtype.kind not in "fc":
        return None  # integers and booleans have no NaN/Inf
    if a.dtype.kind in "OUSV" or b.dtype.kind in "OUSV":
        return None  # strings/objects are compared by equality
    a = a.astype(np.complex128) if a.dtype.kind == "c" or b.dtype.kind == "c" else a.astype(np.float64)
    b = b.astype(a.dtype)
    for part, name in (
        ((np.real, ""), (np.imag, " (imaginary part)")) if a.dtype.kind == "c" else ((lambda z: z, ""),)
    ):
        pa, pb = part(a), part(b)
        nan_a, nan_b = np.isnan(pa), np.isnan(pb)
        if not np.array_equal(nan_a, nan_b):
            return (
                f"NaN positions differ{name}: reference {int(nan_a.sum())} NaN, actual {int(nan_b.sum())} NaN"
            )
        for sign, label in ((1, "+Inf"), (-1, "-Inf")):
            inf_a, inf_b = pa == sign * np.inf, pb == sign * np.inf
            if not np.array_equal(inf_a, inf_b):
                return (
                    f"{label} positions differ{name}: reference {int(inf_a.sum())}, actual {int(inf_b.sum())}"
                )
    return None


def dtypes_differ(reference: Any, actual: Any) -> bool:
    """Whether two outputs have different element types. Strings: numpy holds them as object or
    fixed-width unicode/bytes arrays depending on who produced them; the type is "string" either way."""
    a, b = np.asarray(reference).dtype, np.asarray(actual).dtype
    if a.kind in "OUS" and b.kind in "OUS":
        return False
    return bool(a != b)


def chebyshev_distance(reference: Any, actual: Any) -> float:
    """max |reference - actual| over the elements; 0.0 for empty tensors.

    Shapes must be equal (broadcasting would hide a shape bug). Matching NaN/Inf positions are
    ignored; a differing NaN/Inf pattern gives ``inf``. Integers are compared exactly (Python
    ints on the differing elements, so int64/uint64 extremes do not overflow); bool as 0/1;
    complex by the modulus of the difference.
    """
    a, b = _as_comparable(reference), _as_comparable(actual)
    if a.shape != b.shape:
        raise ValueError(f"shapes differ: {a.shape} vs {b.shape}")
    if a.size == 0:
        return 0.0
    if a.dtype.kind in "OUS" or b.dtype.kind in "OUS":  # strings/objects: equal or not
        return 0.0 if np.array_equal(a, b) else math.inf
    if a.dtype.kind in "iu" and b.dtype.kind in "iu":
        differs = a != b
        if not differs.any():
            return 0.0
        return float(
            max(abs(int(x) - int(y)) for x, y in zip(a[differs].tolist(), b[differs].tolist(), strict=True))
        )
    if nonfinite_mismatch(a, b) is not None:
        return math.inf
    kind = np.complex128 if (a.dtype.kind == "c" or b.dtype.kind == "c") else np.float64
    fa, fb = a.astype(kind), b.astype(kind)
    finite = np.isfinite(fa) & np.isfinite(fb)  # the rest are matching NaN/Inf positions
    if not finite.any():
        return 0.0
    return float(np.abs(fa[finite] - fb[finite]).max())


# ---- the oracle -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Comparison:
    """The verdict of comparing two output lists; ``distance`` is the max over the outputs."""

    consistent: bool
    distance: float | None
    reason: str = ""  # why not consistent: "output 0: shape (2,) vs (3,)", "output 1: distance 0.5 > 0.001"


def _dtype_name(x: np.ndarray) -> str:
    return np.asarray(x).dtype.name


def _judging_dtype(reference: np.ndarray, input_dtypes: Sequence[str]) -> str:
    out = _dtype_name(reference)
    if out in _LOW_PRECISION:
        return out
    lowered = [d for d in _LOW_PRECISION if d in input_dtypes]
    if lowered and np.asarray(reference).dtype.kind in "fc":
        return lowered[0]
    return out


def compare_outputs(
    reference: Sequence[Any],
    actual: Sequence[Any],
    config: OracleConfig,
    *,
    target: str | None = None,
    input_dtypes: Sequence[str] = (),
    tolerance: tuple[float | None, float | None] | None = None,
    compare_values: bool = True,
) -> Comparison:
    """Compare every output; the distance is recorded even when the comparison passes.

    ``compare_values=False`` (random operators): count, shapes and dtypes only.
    """
    if len(reference) != len(actual):
        return Comparison(
            False, math.inf, f"output count differs: reference {len(reference)}, actual {len(actual)}"
        )
    worst: float = 0.0
    failures: list[str] = []
    for index, (ref_value, act_value) in enumerate(zip(reference, actual, strict=True)):
        ref, act = np.asarray(ref_value), np.asarray(act_value)
        threshold = config.threshold(target, _judging_dtype(ref, input_dtypes))
        if tolerance is not None and (ref.dtype.kind in "fcV" or ref.dtype.name in _LOW_PRECISION):
            # a library test's float tolerance (rtol especially) must not let integers drift
            threshold = threshold.loosened(*tolerance)
        if ref.shape != act.shape:
            worst = math.inf
            failures.append(f"output {index}: shape {ref.shape} vs {act.shape}")
            continue
        if threshold.check_dtype and dtypes_differ(ref, act):
            failures.append(f"output {index}: dtype {ref.dtype} vs {act.dtype}")
        pattern = nonfinite_mismatch(ref, act) if compare_values else None
        if pattern is not None:
            worst = math.inf
            failures.append(f"output {index}: {pattern}")
            continue
        try:
            distance = chebyshev_distance(ref, act)
        except (TypeError, ValueError) as exc:  # e.g. a string or object output
            worst = math.inf
            failures.append(f"output {index}: not comparable ({exc})")
            continue
        worst = max(worst, distance)
        allowed = threshold.allowed(ref)
        if compare_values and distance > allowed:
            failures.append(f"output {index}: distance {distance:.6g} > {allowed:.3g} ({ref.dtype})")
    return Comparison(not failures, worst, "; ".join(failures))
