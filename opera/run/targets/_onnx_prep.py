"""Preparing a one-node ONNX model for a compiler's ONNX frontend (shared by tvm/ov/trt-onnx).

Frontends want shape-like inputs (``Reshape``'s shape, ``ReduceSum``'s axes, ``Pad``'s pads, ...)
as constants: TVM says "Only constant axes currently supported", TensorRT needs shape tensors at
build time. Those are the operands whose type constraint in the operator's schema is their own
(integer-only, not shared with an output or the first input), so they are turned into initializers
holding the instance's value; data operands stay runtime inputs whatever their dtype (an integer
``Add`` frozen would be folded away at conversion, its kernel never run); the few float
inputs that are operator parameters in every real model (``Resize``'s scales, ``Clip``'s bounds,
``OneHot``'s depth, ...: ``PARAMETER_INPUTS``) are frozen as well. TVM rejects all of those as
runtime values ("Type Var for scale is currently unsupported", "Only constant depth currently
supported"), and what we test is the conversion of the operator, not of a dynamic parameter.
``runtime_indices`` tells ``run`` which of ``built.inputs`` to feed, in graph-input order.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

__all__ = [
    "PARAMETER_INPUTS", "PreparedOnnx", "graph_input_names", "is_runtime_dtype", "prepare_built", "prepare_onnx"
]

# op_type -> positions of float inputs that are operator parameters, frozen like the integer ones.
PARAMETER_INPUTS: dict[str, tuple[int, ...]] = {
    "Clip": (1, 2),  # min, max
    "Resize": (1, 2),  # roi, scales
    "Upsample": (1,),  # scales
    "OneHot": (1, 2),  # depth, values
    "Pad": (2,),  # constant_value
    "Range": (0, 1, 2),  # start, limit, delta: they decide the output shape
    "NonMaxSuppression": (3, 4),  # iou_threshold, score_threshold
    "Dropout": (1, 2),  # ratio, training_mode (its type variable is the mask output's)
    "QuantizeLinear": (1,),  # y_scale
    "DequantizeLinear": (1,),  # x_scale
    "DynamicQuantizeLinear": (),
    "ConstantOfShape": (0,),
    # num_mel_bins, dft_length, sample_rate share one type variable but decide the output's shape
    "MelWeightMatrix": (0, 1, 2, 3, 4),
}


def is_runtime_dtype(dtype: np.dtype) -> bool:
    """Float (incl. float16/bfloat16) and complex inputs stay runtime inputs; the rest is frozen."""
    dtype = np.dtype(dtype)
    return dtype.kind in "fc" or dtype.name == "bfloat16"


@dataclass
class PreparedOnnx:
    model: object  # onnx.ModelProto with the frozen inputs as initializers
    runtime_names: list[str]  # graph inputs left, in order
    runtime_indices: list[int]  # positions of those inputs in ``built.inputs``
    runtime_shapes: dict[str, tuple[int, ...]]  # the instance's shape of each runtime input

    def select(self, inputs: list[np.ndarray]) -> list[np.ndarray]:
        return [np.asarray(inputs[i]) for i in self.runtime_indices]


def graph_input_names(model: object) -> list[str]:
    """Graph inputs that are not initializers, in order (what ``built.inputs`` are fed to)."""
    graph = model.graph  # type: ignore[attr-defined]
    inits = {init.name for init in graph.initializer}
    return [vi.name for vi in graph.input if vi.name not in inits]


def prepare_onnx(
    model: object, inputs: list[np.ndarray], input_names: list[str] | None = None, *, freeze_data: bool = False
) -> PreparedOnnx:
    """Copy ``model`` with its parameter inputs (and non-float inputs it cannot tell apart) turned
    into initializers; ``freeze_data``: integer and bool data operands too (the older form, where a
    frontend may fold the operator away: ``opera run --onnx-data-inputs constants``).

    ``inputs[i]`` feeds ``input_names[i]`` (default: the graph inputs in order). This is Opera's
    input preparation, not the frontend: whatever fails here is a ``HarnessError``.
    """
    from opera.run.targets import harness_step

    with harness_step("prepare the ONNX model's inputs"):
        return _prepare_onnx(model, inputs, input_names, freeze_data)


def prepare_built(built: object) -> PreparedOnnx:
    """``prepare_onnx`` of a built single-op model, in the form the run asked for
    (``built.details["data_inputs"]``, set by the ONNX template)."""
    details = getattr(built, "details", {}) or {}
    if details.get("data_inputs") == "all-runtime":  # a whole model's inputs (a torch.onnx export): none frozen
        names = list(built.input_names or graph_input_names(built.model))  # type: ignore[attr-defined]
        shapes = {n: tuple(np.shape(x)) for n, x in zip(names, built.inputs, strict=True)}  # type: ignore[attr-defined]
        return PreparedOnnx(built.model, names, list(range(len(names))), shapes)  # type: ignore[attr-defined]
    return prepare_onnx(
        built.model,  # type: ignore[attr-defined]
        built.inputs,  # type: ignore[attr-defined]
        built.input_names or None,  # type: ignore[attr-defined]
        freeze_data=details.get("data_inputs") == "constants",
    )


def _prepare_onnx(
    model: object, inputs: list[np.ndarray], input_names: list[str] | None, freeze_data: bool
) -> PreparedOnnx:
    import onnx
    from onnx import numpy_helper

    names = list(input_names) if input_names else graph_input_names(model)
    if len(names) != len(inputs):
        raise ValueError(f"{len(inputs)} inputs for graph inputs {names}")
    prepared = onnx.ModelProto()
    prepared.CopyFrom(model)
    graph = prepared.graph
    parameters = set()
    for node in graph.node:
        for pos in PARAMETER_INPUTS.get(node.op_type, ()):
            if pos < len(node.input) and node.input[pos]:
                parameters.add(node.input[pos])
    data = set() if freeze_data else _data_inputs(prepared)
    frozen: dict[str, np.ndarray] = {}
    sequences: dict[str, list[np.ndarray]] = {}
    optionals: dict[str, object] = {}
    optional_typed = {vi.name for vi in graph.input if vi.type.WhichOneof("value") == "optional_type"}
    for name, value in zip(names, inputs, strict=True):
        if name in optional_typed:  # an optional (maybe empty) tensor or sequence
            optionals[name] = value
            continue
        if isinstance(value, (list, tuple)):  # a sequence-typed input (SequenceInsert, ...)
            sequences[name] = [np.asarray(v) for v in value]
            continue
        arr = np.asarray(value)
        if name in parameters or not (is_runtime_dtype(arr.dtype) or (name in data and arr.dtype.kind in "biu")):
            frozen[name] = arr
    if sequences:
        _freeze_sequences(graph, sequences)
    if optionals:
        _freeze_optionals(graph, optionals)
    if frozen:
        kept = [vi for vi in graph.input if vi.name not in frozen]
        del graph.input[:]
        graph.input.extend(kept)
        for name, arr in frozen.items():
            graph.initializer.append(numpy_helper.from_array(arr, name=name))
    constant = set(frozen) | set(sequences) | set(optionals)
    runtime_names = [n for n in names if n not in constant]
    runtime_indices = [i for i, n in enumerate(names) if n not in constant]
    shapes = {names[i]: tuple(np.shape(inputs[i])) for i in runtime_indices}
    return PreparedOnnx(prepared, runtime_names, runtime_indices, shapes)


def _data_inputs(model: object) -> set[str]:
    """Graph inputs that feed a node's *data* operand, as opposed to a parameter operand.

    From the operator's schema: an operand typed by a type variable that an output shares (``Add``'s
    A and B, ``BitShift``'s X and Y, ``Where``'s X and Y), or the type variable of the first operand
    when another operand shares it (``Equal``'s A and B, ``And``'s A and B, ``ConvInteger``'s x and
    x_zero_point). A parameter has a concrete type or a variable of its own (``Reshape``'s shape,
    ``Gather``'s indices, ``TopK``'s K, ``Slice``'s starts, ``Where``'s condition, a window's size).
    Integer and bool data stay runtime inputs: frozen, the frontend folds the operator away at
    conversion and its kernel never runs (issue 11: no real bug hidden by the harness)."""
    import onnx

    graph = model.graph  # type: ignore[attr-defined]
    inputs = {vi.name for vi in graph.input}
    versions = {(e.domain or ""): int(e.version) for e in model.opset_import}  # type: ignore[attr-defined]
    data: set[str] = set()
    for node in graph.node:
        domain = node.domain or ""
        try:
            schema = onnx.defs.get_schema(node.op_type, versions.get(domain, versions.get("", 1)), domain)
        except Exception:
            continue  # no schema (a custom domain): its inputs are frozen as before
        formals = list(schema.inputs)
        variables = {c.type_param_str for c in schema.type_constraints}
        if not formals:
            continue
        typed = [formals[min(pos, len(formals) - 1)].type_str for pos in range(len(node.input))]
        shared = {f.type_str for f in schema.outputs} & variables
        first = typed[0] if typed else ""
        if first in variables and typed.count(first) > 1:
            shared.add(first)
        for name, type_str in zip(node.input, typed, strict=True):
            if name in inputs and type_str in shared:
                data.add(name)
    return data


def _freeze_sequences(graph: object, sequences: dict[str, list[np.ndarray]]) -> None:
    """Sequence-typed graph inputs become constants built by a ``SequenceConstruct`` node.

    Frontends take tensors, not sequences, as graph inputs (and ``np.asarray`` of a ragged list
    fails), so the sequence is built inside the graph from initializers holding its elements; an
    empty one comes from ``SequenceEmpty`` with the declared element type.
    """
    from onnx import helper, numpy_helper

    g = graph  # onnx.GraphProto
    declared = {vi.name: vi for vi in g.input}  # type: ignore[attr-defined]
    builders = []
    for name, elements in sequences.items():
        if elements:
            element_names = [f"{name}__opera_element{k}" for k in range(len(elements))]
            for element_name, element in zip(element_names, elements, strict=True):
                g.initializer.append(numpy_helper.from_array(element, name=element_name))  # type: ignore[attr-defined]
            builders.append(helper.make_node("SequenceConstruct", element_names, [name]))
        else:
            elem_type = declared[name].type.sequence_type.elem_type.tensor_type.elem_type
            builders.append(helper.make_node("SequenceEmpty", [], [name], dtype=elem_type))
    _inputs_to_nodes(g, set(sequences), builders)


def _freeze_optionals(graph: object, optionals: dict[str, object]) -> None:
    """Optional-typed graph inputs become constants built by an ``Optional`` node.

    An empty optional (``None``) is ``Optional()`` with the declared element type; a present one
    wraps an initializer (a tensor) or a ``SequenceConstruct`` (a sequence). Frontends take tensors
    as graph inputs, and ``numpy_helper.from_array(None)`` is no model at all.
    """
    from onnx import helper, numpy_helper

    g = graph  # onnx.GraphProto
    declared = {vi.name: vi for vi in g.input}  # type: ignore[attr-defined]
    builders = []
    for name, value in optionals.items():
        elem_type = declared[name].type.optional_type.elem_type
        if value is None:
            builders.append(helper.make_node("Optional", [], [name], type=elem_type))
            continue
        inner = f"{name}__opera_value"
        if isinstance(value, (list, tuple)):
            element_names = [f"{inner}{k}" for k in range(len(value))]
            for element_name, element in zip(element_names, value, strict=True):
                g.initializer.append(numpy_helper.from_array(np.asarray(element), name=element_name))  # type: ignore[attr-defined]
            if element_names:
                builders.append(helper.make_node("SequenceConstruct", element_names, [inner]))
            else:
                seq_elem = elem_type.sequence_type.elem_type.tensor_type.elem_type
                builders.append(helper.make_node("SequenceEmpty", [], [inner], dtype=seq_elem))
        else:
            g.initializer.append(numpy_helper.from_array(np.asarray(value), name=inner))  # type: ignore[attr-defined]
        builders.append(helper.make_node("Optional", [inner], [name]))
    _inputs_to_nodes(g, set(optionals), builders)


def _inputs_to_nodes(graph: object, names: set[str], builders: Sequence[object]) -> None:
    """Drop the graph inputs ``names`` and put the nodes that now produce them first."""
    g = graph  # onnx.GraphProto
    kept = [vi for vi in g.input if vi.name not in names]  # type: ignore[attr-defined]
    del g.input[:]  # type: ignore[attr-defined]
    g.input.extend(kept)  # type: ignore[attr-defined]
    nodes = [*builders, *g.node]  # type: ignore[attr-defined]
    del g.node[:]  # type: ignore[attr-defined]
    g.node.extend(nodes)  # type: ignore[attr-defined]
