"""What an ONNX node uses that an older version of its operator's schema does not have.

A frontend whose converters are versioned (TVM's ``_impl_vN``) runs a model of a newer opset with
the newest converter it has. Where the operator's schema changed since, a model using what the
change added (BitShift-28's signed integer types, Celu-28's float16, an attribute introduced later)
is outside what that converter implements: its failure is a coverage gap, not a bug (issue 11,
sample 8). What it uses that is unchanged (BitShift on uint32) stays judged as usual.
"""

from __future__ import annotations

from typing import Any

__all__ = ["newer_features"]


def _elem_types(model: Any) -> dict[str, int]:
    """Tensor element type of every named value the graph declares."""
    types: dict[str, int] = {}
    for info in (*model.graph.input, *model.graph.value_info, *model.graph.output):
        if info.type.HasField("tensor_type") and info.type.tensor_type.elem_type:
            types[info.name] = info.type.tensor_type.elem_type
    for init in model.graph.initializer:
        types[init.name] = init.data_type
    return types


def _allowed(schema: Any, position: int) -> set[str] | None:
    """The type strings (``tensor(float)``) the schema allows at input ``position``; None when
    it says nothing (no such input, or a type that is not a constraint variable)."""
    import onnx

    formals = list(schema.inputs)
    if not formals:
        return None
    if position >= len(formals):
        last = formals[-1]
        if last.option != onnx.defs.OpSchema.FormalParameterOption.Variadic:
            return None
        formal = last
    else:
        formal = formals[position]
    for constraint in schema.type_constraints:
        if constraint.type_param_str == formal.type_str:
            return set(constraint.allowed_type_strs)
    return {formal.type_str} if formal.type_str.startswith("tensor(") else None


def newer_features(model: Any, implemented: int) -> str | None:
    """What the model's single node uses that its operator's schema as of opset ``implemented``
    lacks, when the model's own opset selects a newer schema: an input type outside that older
    schema's constraints, an attribute it does not know, an input beyond its inputs. None otherwise."""
    import onnx

    node = model.graph.node[0]
    domain = node.domain or ""
    opset = next((e.version for e in model.opset_import if (e.domain or "") == domain), None)
    if opset is None:
        return None
    try:
        current = onnx.defs.get_schema(node.op_type, int(opset), domain)
        older = onnx.defs.get_schema(node.op_type, int(implemented), domain)
    except Exception:
        return None
    if older.since_version >= current.since_version:
        return None
    older_name = f"{node.op_type}-{older.since_version}"
    newer_name = f"{node.op_type}-{current.since_version}"
    found: list[str] = []
    types = _elem_types(model)
    for k, name in enumerate(node.input):
        if not name:
            continue
        if k >= len(older.inputs) and (
            not older.inputs or older.inputs[-1].option != onnx.defs.OpSchema.FormalParameterOption.Variadic
        ):
            found.append(f"input #{k}")
            continue
        allowed = _allowed(older, k)
        elem = types.get(name)
        if allowed is None or elem is None:
            continue
        type_str = f"tensor({onnx.TensorProto.DataType.Name(elem).lower()})"
        if type_str not in allowed:
            found.append(f"input #{k} of type {type_str}")
    found += [f"attribute {attr.name}" for attr in node.attribute if attr.name not in older.attributes]
    if not found:
        return None
    return f"{', '.join(found)}: in {newer_name}, not in {older_name}, the schema the converter implements"
