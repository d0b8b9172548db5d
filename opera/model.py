"""The operator instance: one usage of one operator, as harvested (docs/design.md, Operator instances)."""

from __future__ import annotations

import functools
import hashlib
import json
from dataclasses import dataclass, field, replace
from enum import Enum
from typing import Any

from opera.values import contains_opaque, decode_value, encode_value

__all__ = ["SCHEMA_VERSION", "InstanceKind", "OperatorInstance", "Origin", "Source", "Tolerance", "canonical_json"]

# Bump when the line format changes incompatibly; readers refuse newer versions.
SCHEMA_VERSION = 1



@functools.lru_cache(maxsize=1)
def known_libraries() -> tuple[str, ...]:
    """The source libraries Opera can build models of: one per template (``opera.templates``,
    found by file name, nothing imported). A new library is a template + a recorder, no table."""
    from opera.templates import TEMPLATES

    return tuple(TEMPLATES.names())


class InstanceKind(str, Enum):  # noqa: UP042 (str() must stay the value in f-strings on 3.11)
    MODULE = "module"  # constructed with args/kwargs, then called with inputs
    FUNCTION = "function"  # called as api(*args, **kwargs); tensors live in args/kwargs
    ONNX_NODE = "onnx_node"  # a node with attributes kwargs, fed inputs


class Origin(str, Enum):  # noqa: UP042
    HUMAN = "human"  # written by library developers (test suites, OpInfo samples)
    TOOL = "tool"  # produced by a generator / fuzzer


@dataclass(frozen=True)
class Source:
    """Where an instance came from: ``suite`` (opinfo, moduleinfo, keras-tests, onnx-node-tests,
    pytest), ``test`` (file::test or OpInfo name + variant), ``sample`` (index inside that test)."""

    suite: str
    test: str = ""
    sample: int | None = None
    origin: Origin = Origin.HUMAN
    generator: str | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"suite": self.suite, "test": self.test, "origin": self.origin.value}
        if self.sample is not None:
            out["sample"] = self.sample
        if self.generator is not None:
            out["generator"] = self.generator
        return out

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> Source:
        return cls(
            suite=str(obj["suite"]),
            test=str(obj.get("test", "")),
            sample=obj.get("sample"),
            origin=Origin(obj.get("origin", "human")),
            generator=obj.get("generator"),
        )


@dataclass(frozen=True)
class Tolerance:
    atol: float | None = None
    rtol: float | None = None


def canonical_json(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


@dataclass(frozen=True)
class OperatorInstance:
    """One call of one operator with concrete parameters.

    ``args``/``kwargs``/``inputs`` hold neutral values (see ``opera.values``). For ``module``
    instances they are constructor parameters and the forward inputs; for ``function`` instances
    every call argument, tensors included, is in ``args``/``kwargs`` and ``inputs`` is empty; for
    ``onnx_node`` instances ``kwargs`` are the node attributes and ``inputs`` the input tensors
    (``None`` for an omitted optional input). ``extra`` holds library details the template needs
    and which are part of the identity (ONNX: ``opset``, ``domain``, ``n_outputs``).
    """

    library: str
    api: str
    kind: InstanceKind
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)
    inputs: tuple[Any, ...] = ()
    extra: dict[str, Any] = field(default_factory=dict)
    library_version: str = ""
    source: Source = field(default_factory=lambda: Source(suite="unknown"))
    tolerance: Tolerance | None = None
    # Validity gate verdict: None = not checked, True = the library runs it, False = it does not.
    valid: bool | None = None
    invalid_reason: str | None = None
    # Output signature seen when the instance was harvested or validated, e.g. ["float32[2,3]"].
    outputs: tuple[str, ...] | None = None

    # ---- identity -------------------------------------------------------------------------
    def identity_json(self) -> dict[str, Any]:
        return {
            "library": self.library,
            "api": self.api,
            "args": [encode_value(a) for a in self.args],
            "kwargs": {k: encode_value(v) for k, v in self.kwargs.items()},
            "inputs": [encode_value(v) for v in self.inputs],
            "extra": {k: encode_value(v) for k, v in self.extra.items()},
        }

    @property
    def id(self) -> str:
        """Content hash of (library, api, args, kwargs, inputs, extra): stable across runs."""
        cached = self.__dict__.get("_id")
        if cached is None:
            digest = hashlib.sha256(canonical_json(self.identity_json()).encode()).hexdigest()
            cached = digest[:20]
            object.__setattr__(self, "_id", cached)
        return cached

    @property
    def migratable(self) -> bool:
        """False when some parameter could not be recorded in a rebuildable form."""
        return self.opaque_reason is None

    @property
    def opaque_reason(self) -> str | None:
        for value in (*self.args, *self.kwargs.values(), *self.inputs, *self.extra.values()):
            found = contains_opaque(value)
            if found is not None:
                return f"{found.type}: {found.reason}"
        return None

    def with_verdict(self, valid: bool, reason: str | None = None, outputs: tuple[str, ...] | None = None) -> OperatorInstance:
        new = replace(self, valid=valid, invalid_reason=reason, outputs=outputs if outputs is not None else self.outputs)
        return new

    # ---- (de)serialization ----------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        out = {"id": self.id, **self.identity_json()}
        out["kind"] = self.kind.value
        out["library_version"] = self.library_version
        out["source"] = self.source.to_json()
        if self.tolerance is not None:
            out["tolerance"] = {"atol": self.tolerance.atol, "rtol": self.tolerance.rtol}
        if self.valid is not None:
            out["valid"] = self.valid
        if self.invalid_reason is not None:
            out["invalid_reason"] = self.invalid_reason
        if not self.migratable:
            out["migratable"] = False
        if self.outputs is not None:
            out["outputs"] = list(self.outputs)
        return out

    def to_line(self) -> str:
        return canonical_json(self.to_json())

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> OperatorInstance:
        library = obj["library"]
        if library not in known_libraries():
            raise ValueError(f"unknown library {library!r}")
        tol = obj.get("tolerance")
        inst = cls(
            library=library,
            api=str(obj["api"]),
            kind=InstanceKind(obj["kind"]),
            args=tuple(decode_value(a) for a in obj.get("args", [])),
            kwargs={str(k): decode_value(v) for k, v in obj.get("kwargs", {}).items()},
            inputs=tuple(decode_value(v) for v in obj.get("inputs", [])),
            extra={str(k): decode_value(v) for k, v in obj.get("extra", {}).items()},
            library_version=str(obj.get("library_version", "")),
            source=Source.from_json(obj["source"]) if "source" in obj else Source(suite="unknown"),
            tolerance=Tolerance(tol.get("atol"), tol.get("rtol")) if tol else None,
            valid=obj.get("valid"),
            invalid_reason=obj.get("invalid_reason"),
            outputs=tuple(obj["outputs"]) if obj.get("outputs") is not None else None,
        )
        stored_id = obj.get("id")
        if stored_id is not None and stored_id != inst.id:
            raise ValueError(f"id {stored_id} does not match the content (expected {inst.id})")
        return inst
