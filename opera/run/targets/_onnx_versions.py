"""What an ONNX node uses that an older version of its operator's schema does not have.

A frontend whose converters are versioned (TVM's ``_impl_vN``) runs a model of a newer opset with
the newest converter it has. An attribute or input that the operator gained since, set by the model
(an attribute to a value other than its default), is outside what that converter implements: its
failure is a coverage gap, not a bug (issue 11, sample 8: SpaceToDepth-28's ``mode``).

Types added by newer schema versions are not counted against the converter's own version: a
converter that lowers to a type-generic operation (TVM's ``Cast`` to ``astype``) does implement
them, and its wrong results on them are bugs (float8 NaN decoded as a finite number, judged REAL).
Counting types that way, as a first version did, turned the float8 Cast/CastLike verdicts of the
human ONNX corpus into gaps. What is counted (``newest_version_types``) is narrower: a type that the
operator gained with the very schema version the model's opset selects (Celu-28's float16,
BitShift-28's signed integers; samples 8-11), which a frontend written before that version cannot
have implemented.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from opera.templates.onnx_template import schema_at

__all__ = [
    "newer_features",
    "newer_than",
    "newest_version_types",
    "node_gap",
    "node_views",
    "split_type_params",
    "widened_domain",
]


def node_gap(built: Any, gap_of_single_node: Callable[[Any], str | None]) -> str | None:
    """A target's ``gap_of_single_node`` for a single-op model, or for each node of a multi-node one
    (its ``node_views``), the first gap found named by its node's op type."""
    views = node_views(built.model)
    for view in views:
        gap = gap_of_single_node(dataclasses.replace(built, model=view) if len(views) > 1 else built)
        if gap is not None:
            return gap if len(views) == 1 else f"{view.graph.node[0].op_type} node: {gap}"
    return None


def node_views(model: Any) -> list[Any]:
    """The model itself when it has one node; else one view per node: a copy of the model whose
    graph holds only that node, with every value's type from shape inference, so that a check
    written for a single-op model (the schema checks here, a converter's unread attributes) sees
    each node of a multi-node model such as an exporter's (the ``paths`` rule: torch.onnx's
    ``linalg.norm`` is a ``Pow`` with an int64 exponent after a ``ReduceSum``). A view is for
    reading, not a valid model (its graph's outputs are the model's)."""
    import onnx

    if len(model.graph.node) <= 1:
        return [model]
    try:
        inferred = onnx.shape_inference.infer_shapes(model)
    except Exception:  # a model shape inference rejects still has its declared types
        inferred = model
    views = []
    for node in inferred.graph.node:
        view = onnx.ModelProto()
        view.CopyFrom(inferred)
        del view.graph.node[:]
        view.graph.node.append(node)
        views.append(view)
    return views




def _selected(model: Any) -> tuple[Any, Any] | None:
    """The model's single node and the schema its own opset selects (None: no opset, unknown op)."""
    node = model.graph.node[0]
    domain = node.domain or ""
    opset = next((e.version for e in model.opset_import if (e.domain or "") == domain), None)
    current = schema_at(node, opset) if opset is not None else None
    return None if current is None else (node, current)


def newer_features(model: Any, implemented: int) -> str | None:
    """What the model's single node uses that its operator's schema as of opset ``implemented``
    lacks, when the model's own opset selects a newer schema: an attribute that older schema does
    not know, set to a value other than its default, or an input beyond its inputs. None otherwise."""
    import onnx

    selected = _selected(model)
    older = schema_at(model.graph.node[0], implemented)
    if selected is None or older is None:
        return None
    node, current = selected
    if older.since_version >= current.since_version:
        return None
    variadic = bool(older.inputs) and older.inputs[-1].option == onnx.defs.OpSchema.FormalParameterOption.Variadic
    found = [f"input #{k}" for k, name in enumerate(node.input) if name and k >= len(older.inputs) and not variadic]
    for attr in node.attribute:
        if attr.name in older.attributes:
            continue
        formal = current.attributes.get(attr.name)
        value = onnx.helper.get_attribute_value(attr)
        default = formal.default_value if formal is not None and formal.default_value.name else None
        if default is not None and value == onnx.helper.get_attribute_value(default):
            continue  # spelled out at its default: what the older converter does anyway
        shown = value.decode(errors="replace") if isinstance(value, bytes) else value
        found.append(f"attribute {attr.name}={shown!r}")
    if not found:
        return None
    return (
        f"{', '.join(found)}: in {node.op_type}-{current.since_version}, not in "
        f"{node.op_type}-{older.since_version}, the schema the converter implements"
    )


def _type_string(elem_type: int) -> str:
    """``tensor(float16)`` for TensorProto.FLOAT16: how a schema's type constraints spell it."""
    import onnx

    return f"tensor({onnx.TensorProto.DataType.Name(elem_type).lower()})"


def _value_types(model: Any) -> dict[str, int]:
    """Element type of every tensor the single-node graph names (inputs, initializers, outputs)."""
    types: dict[str, int] = {}
    for info in [*model.graph.input, *model.graph.output, *model.graph.value_info]:
        if info.type.HasField("tensor_type"):
            types[info.name] = info.type.tensor_type.elem_type
    for init in model.graph.initializer:
        types[init.name] = init.data_type
    return types


def newest_version_types(model: Any, implemented: int) -> str | None:
    """An element type the model's single node uses that its operator's schema gained with the very
    version the model's opset selects (the version before it does not allow it for that input or
    output), when the converter implements an older version (``implemented``), e.g.
    ``tensor(int32) of X came with BitShift-28``. None otherwise."""
    import onnx

    selected = _selected(model)
    if selected is None:
        return None
    node, current = selected
    before = schema_at(node, current.since_version - 1)
    if before is None or implemented >= current.since_version:  # no earlier version: a new operator
        return None
    allowed_now = {c.type_param_str: set(c.allowed_type_strs) for c in current.type_constraints}
    allowed_before = {c.type_param_str: set(c.allowed_type_strs) for c in before.type_constraints}
    types = _value_types(model)

    def formal(params: Any, k: int) -> Any:
        if k < len(params):
            return params[k]
        last = params[-1] if params else None
        variadic = last is not None and last.option == onnx.defs.OpSchema.FormalParameterOption.Variadic
        return last if variadic else None

    new = []
    for names, params_now in ((node.input, current.inputs), (node.output, current.outputs)):
        for k, name in enumerate(names):
            param = formal(params_now, k) if name else None
            if param is None or name not in types or param.type_str not in allowed_now:
                continue
            spelled = _type_string(types[name])
            if spelled in allowed_now[param.type_str] and spelled not in allowed_before.get(param.type_str, {spelled}):
                new.append(f"{spelled} of {param.name}")
    if not new:
        return None
    return (
        f"{', '.join(sorted(set(new)))} came with {node.op_type}-{current.since_version} "
        f"({node.op_type}-{before.since_version} does not allow it)"
    )


def split_type_params(model: Any, implemented: int) -> str | None:
    """Inputs that the converter's schema version ties to one type parameter and the model's own
    version gives each its own, fed different types: e.g. Pow-7's base and exponent are both ``T``,
    Pow-12 made the exponent ``T1``, so Pow(int32, float32) is valid at opset 15 while a converter
    of Pow-7 has no path for two types (TVM: "Binary operators must have the same datatype").
    None otherwise."""
    selected = _selected(model)
    older = schema_at(model.graph.node[0], implemented)
    if selected is None or older is None:
        return None
    node, current = selected
    if older.since_version >= current.since_version:
        return None
    types = _value_types(model)
    fed = [(k, name) for k, name in enumerate(node.input) if name and name in types]
    for a, (i, name_i) in enumerate(fed):
        for j, name_j in fed[a + 1 :]:
            if i >= len(older.inputs) or j >= len(older.inputs) or i >= len(current.inputs) or j >= len(current.inputs):
                continue
            tied_then = older.inputs[i].type_str == older.inputs[j].type_str
            split_now = current.inputs[i].type_str != current.inputs[j].type_str
            if tied_then and split_now and types[name_i] != types[name_j]:
                return (
                    f"{current.inputs[i].name} {_type_string(types[name_i])} with {current.inputs[j].name} "
                    f"{_type_string(types[name_j])}: {node.op_type}-{current.since_version} types them apart "
                    f"({current.inputs[i].type_str}, {current.inputs[j].type_str}), {node.op_type}-"
                    f"{older.since_version} ties them ({older.inputs[i].type_str})"
                )
    return None


def _float_mod(node: Any, types: dict[str, int]) -> bool:
    import onnx

    fmod = next((onnx.helper.get_attribute_value(a) for a in node.attribute if a.name == "fmod"), 0)
    floats = {onnx.TensorProto.FLOAT, onnx.TensorProto.DOUBLE, onnx.TensorProto.FLOAT16, onnx.TensorProto.BFLOAT16}
    return fmod == 0 and any(types.get(name) in floats for name in node.input)


# What a schema version newly defines that its types do not show, because the earlier version's
# text excluded it (operator, version) -> (the condition on the node, what it is, the earlier words).
_WIDENED = {
    ("Mod", 28): (
        _float_mod,
        "floating-point inputs with fmod=0",
        "Mod-13: 'If the fmod attribute is set to 0, T is constrained to integer data types'",
    ),
}


def widened_domain(model: Any, implemented: int) -> str | None:
    """What the model's single node uses that the operator's schema version selected by its opset
    newly defines, the earlier version's text having excluded it (``_WIDENED``: Mod-28's float
    inputs with fmod=0, samples 10 and 11), when the converter implements an older version."""
    selected = _selected(model)
    if selected is None:
        return None
    node, current = selected
    rule = _WIDENED.get((node.op_type, current.since_version))
    if rule is None or implemented >= current.since_version:
        return None
    condition, what, earlier = rule
    if not condition(node, _value_types(model)):
        return None
    return f"{what}: defined since {node.op_type}-{current.since_version} ({earlier})"


def newer_than(model: Any, implemented: int) -> str | None:
    """What the model's single node uses that a converter implementing the schema as of opset
    ``implemented`` cannot: a newer attribute or input, a type the selected version added, type
    parameters it split, a domain it widened (the first of these found), or None."""
    return (
        newer_features(model, implemented)
        or newest_version_types(model, implemented)
        or split_type_params(model, implemented)
        or widened_domain(model, implemented)
    )
