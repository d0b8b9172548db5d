"""What an ONNX node uses that an older version of its operator's schema does not have.

A frontend whose converters are versioned (TVM's ``_impl_vN``) runs a model of a newer opset with
the newest converter it has. An attribute or input that the operator gained since, set by the model
(an attribute to a value other than its default), is outside what that converter implements: its
failure is a coverage gap, not a bug (issue 11, sample 8: SpaceToDepth-28's ``mode``).

Types added by newer schema versions are deliberately not counted: a converter that lowers to a
type-generic operation (TVM's ``Cast`` to ``astype``) does implement them, and its wrong results on
them are bugs (float8 NaN decoded as a finite number, judged REAL). Counting types, as a first
version did, turned the float8 Cast/CastLike verdicts of the human ONNX corpus into gaps.
"""

from __future__ import annotations

from typing import Any

__all__ = ["newer_features"]


def newer_features(model: Any, implemented: int) -> str | None:
    """What the model's single node uses that its operator's schema as of opset ``implemented``
    lacks, when the model's own opset selects a newer schema: an attribute that older schema does
    not know, set to a value other than its default, or an input beyond its inputs. None otherwise."""
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
