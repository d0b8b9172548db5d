"""Related operators whose parameter values can be borrowed (DeepREL's relational APIs, simplified).

Two operators of one library are related when their leaf names normalize to the same key:
``torch.nn.Conv2d`` / ``torch.nn.functional.conv2d``, ``torch.nn.ReLU`` / ``torch.relu`` /
``torch.Tensor.relu``, ``torch.nn.CrossEntropyLoss`` / ``torch.nn.functional.cross_entropy``,
``keras.layers.Softmax`` / ``keras.ops.softmax``. An operator left without a partner by the exact
key is matched once more with a trailing dimensionality (``2d``, ``3D``) dropped, which pairs
``keras.layers.Conv2D`` with ``keras.ops.conv`` and ``torch.nn.BatchNorm2d`` with
``torch.nn.functional.batch_norm``.

Parameters correspond by name (``kw:stride`` <-> ``kw:stride``), and a module's first forward
input corresponds to a function's first positional argument (``in0`` <-> ``arg0``): the tensor an
operator is applied to.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable

__all__ = ["corresponding_parameters", "related_operators"]

_DIMS = re.compile(r"[123]d$")


def _leaf(api: str) -> str:
    return api.rsplit("::", 1)[-1].rsplit(".", 1)[-1]


def _key(api: str) -> str:
    key = _leaf(api).lower().replace("_", "")
    return key[: -len("loss")] if key.endswith("loss") and len(key) > 4 else key


def related_operators(apis: Iterable[str]) -> dict[str, list[str]]:
    """operator -> the other operators of the same library it is related to (sorted)."""
    names = sorted(set(apis))
    groups: dict[tuple[str, str], list[str]] = defaultdict(list)
    for api in names:
        groups[(api.split(".", 1)[0].split("::", 1)[0], _key(api))].append(api)
    related: dict[str, list[str]] = {}
    for members in groups.values():
        for api in members:
            others = [m for m in members if m != api]
            if others:
                related[api] = others
    loose: dict[tuple[str, str], list[str]] = defaultdict(list)
    for (library, key), members in groups.items():
        loose[(library, _DIMS.sub("", key))].extend(members)
    for members in loose.values():
        for api in members:
            if api not in related:
                others = [m for m in members if m != api]
                if others:
                    related[api] = sorted(others)
    return related


def corresponding_parameters(name: str) -> tuple[str, ...]:
    """Names the same parameter may have in a related operator (itself first)."""
    if name == "in0":
        return ("in0", "arg0")
    if name == "arg0":
        return ("arg0", "in0")
    return (name,)
