"""ONNX template: an ``onnx_node`` instance as a one-node ``ModelProto`` (docs/design.md, Templates).

How ONNX values are held as neutral values (``opera.values``), in both directions; the recorder and
the node-test source encode with ``attribute_to_value`` / ``runtime_value``, ``build`` decodes:

==========================  ==============================================================
attribute type              neutral value
==========================  ==============================================================
``INT`` / ``FLOAT``         ``int`` / ``float``
``STRING``                  ``str`` (UTF-8); other bytes: ``ObjectSpec("onnx.AttributeProto")``
``INTS/FLOATS/STRINGS``     ``list`` of the above (an empty list: ``ObjectSpec("onnx.AttributeProto")``,
                            because its element type cannot be told from the value)
``TENSOR`` / ``TENSORS``    ``numpy.ndarray`` (exact) / list of them; a tensor numpy cannot hold
                            (string, int4, float8 fnuz, ...): ``ObjectSpec("onnx.TensorProto")``
``GRAPH`` / ``GRAPHS``      ``bytes`` of the serialized ``GraphProto`` / list of them
``SPARSE_TENSOR(S)``        ``ObjectSpec("onnx.SparseTensorProto")`` / list of them
``TYPE_PROTO(S)``           ``ObjectSpec("onnx.TypeProto")`` / list of them
==========================  ==============================================================

Each ``ObjectSpec("onnx.<Proto>")`` holds the serialized proto as its single ``bytes`` argument, so
nothing is lost. Node inputs: a tensor is a ``numpy.ndarray`` (or a ``TensorSpec``, or an
``ObjectSpec("onnx.TensorProto")`` for dtypes numpy cannot hold); a sequence is
``ObjectSpec("onnx.Sequence", ([items...],), {"elem_type": "tensor(float32)"})``; an optional is
``ObjectSpec("onnx.Optional", (item_or_None,), {"elem_type": ...})``; ``None`` is an omitted optional
input (empty name in the node). ``extra``: ``opset`` (of the node's domain), ``domain``,
``n_outputs``, optionally ``omitted_outputs`` (positions of '' outputs) and ``onnx_opset`` (the
default-domain opset when the node's domain is another one).

The opset in the instance is the one the harvested model declared. ``build`` declares the lowest
opset >= the declared one's schema version that onnxruntime accepts when the declared one is newer
than onnxruntime supports (node tests declare opset 28 for ``Abs``; the ``Abs`` schema is the same
since opset 13), so the model keeps its meaning and more consumers accept it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import numpy as np

from opera.model import OperatorInstance
from opera.outputs import flatten_outputs
from opera.templates import OptionalInputProbe, SingleOpModel, Template, register_template
from opera.values import DTYPES, ObjectSpec, TensorSpec, ValueEncodingError, dtype_name

__all__ = [
    "IR_VERSION",
    "OnnxTemplate",
    "attribute_to_value",
    "model_bytes",
    "ort_max_opset",
    "runtime_value",
    "tensor_to_value",
    "type_from_string",
    "type_to_string",
    "value_to_attribute",
]

# onnxruntime 1.31 accepts IR versions up to 13 and onnx 1.23 writes 14; 10 is what every
# consumer here (ORT, TVM, OpenVINO) accepts.
IR_VERSION = 10

TENSOR_PROTO = "onnx.TensorProto"
SPARSE_TENSOR_PROTO = "onnx.SparseTensorProto"
TYPE_PROTO = "onnx.TypeProto"
ATTRIBUTE_PROTO = "onnx.AttributeProto"
SEQUENCE = "onnx.Sequence"
OPTIONAL = "onnx.Optional"


# ---- tensors ---------------------------------------------------------------------------------
def tensor_to_value(tensor: Any) -> Any:
    """``TensorProto`` -> exact ``numpy.ndarray``, or ``ObjectSpec("onnx.TensorProto")``."""
    from onnx import numpy_helper

    try:
        arr = numpy_helper.to_array(tensor)
        dtype_name(arr.dtype)
        return np.array(arr)
    except (ValueEncodingError, TypeError, ValueError):
        return ObjectSpec(TENSOR_PROTO, (tensor.SerializeToString(),))


def _array_to_tensor(value: Any, name: str = "") -> Any:
    import onnx
    from onnx import numpy_helper

    if isinstance(value, ObjectSpec) and value.api == TENSOR_PROTO:
        tensor = onnx.TensorProto()
        tensor.ParseFromString(value.args[0])
        if name:
            tensor.name = name
        return tensor
    arr = value.materialize() if isinstance(value, TensorSpec) else np.asarray(value)
    return numpy_helper.from_array(arr, name=name)


def _proto_array(value: Any) -> Any:
    """A runtime tensor as numpy (``ObjectSpec("onnx.TensorProto")`` decoded, TensorSpec materialized)."""
    if isinstance(value, TensorSpec):
        return value.materialize()
    if isinstance(value, ObjectSpec) and value.api == TENSOR_PROTO:
        from onnx import numpy_helper

        return numpy_helper.to_array(_array_to_tensor(value))
    return np.asarray(value)


# ---- attributes ------------------------------------------------------------------------------
def _proto_spec(api: str, proto: Any) -> ObjectSpec:
    return ObjectSpec(api, (proto.SerializeToString(),))


def attribute_to_value(attr: Any) -> Any:
    """``AttributeProto`` -> neutral value (see the module docstring)."""
    from onnx import AttributeProto as A

    kind = attr.type
    if kind == A.INT:
        return int(attr.i)
    if kind == A.FLOAT:
        return float(attr.f)
    if kind == A.STRING:
        try:
            return attr.s.decode("utf-8")
        except UnicodeDecodeError:
            return _proto_spec(ATTRIBUTE_PROTO, attr)
    if kind == A.TENSOR:
        return tensor_to_value(attr.t)
    if kind == A.GRAPH:
        return attr.g.SerializeToString()
    if kind == A.SPARSE_TENSOR:
        return _proto_spec(SPARSE_TENSOR_PROTO, attr.sparse_tensor)
    if kind == A.TYPE_PROTO:
        return _proto_spec(TYPE_PROTO, attr.tp)
    repeated = {
        A.INTS: lambda: [int(i) for i in attr.ints],
        A.FLOATS: lambda: [float(f) for f in attr.floats],
        A.STRINGS: lambda: [s.decode("utf-8") for s in attr.strings],
        A.TENSORS: lambda: [tensor_to_value(t) for t in attr.tensors],
        A.GRAPHS: lambda: [g.SerializeToString() for g in attr.graphs],
        A.SPARSE_TENSORS: lambda: [_proto_spec(SPARSE_TENSOR_PROTO, t) for t in attr.sparse_tensors],
        A.TYPE_PROTOS: lambda: [_proto_spec(TYPE_PROTO, t) for t in attr.type_protos],
    }
    if kind in repeated:
        try:
            items = repeated[kind]()
        except UnicodeDecodeError:
            items = []
        if items:
            return items
    # empty lists, undecodable strings, undefined types: keep the whole attribute
    return _proto_spec(ATTRIBUTE_PROTO, attr)


def value_to_attribute(name: str, value: Any) -> Any:
    """Neutral value -> ``AttributeProto`` named ``name`` (inverse of ``attribute_to_value``)."""
    import onnx
    from onnx import AttributeProto as A
    from onnx import helper

    if isinstance(value, ObjectSpec):
        raw = value.args[0]
        if value.api == ATTRIBUTE_PROTO:
            attr = onnx.AttributeProto()
            attr.ParseFromString(raw)
            attr.name = name
            return attr
        if value.api == TENSOR_PROTO:
            return helper.make_attribute(name, _array_to_tensor(value))
        if value.api == SPARSE_TENSOR_PROTO:
            sparse = onnx.SparseTensorProto()
            sparse.ParseFromString(raw)
            return helper.make_attribute(name, sparse)
        if value.api == TYPE_PROTO:
            tp = onnx.TypeProto()
            tp.ParseFromString(raw)
            return helper.make_attribute(name, tp, attr_type=A.TYPE_PROTO)
        raise ValueError(f"attribute {name}: no ONNX encoding for {value.api}")
    if isinstance(value, bytes):
        graph = onnx.GraphProto()
        graph.ParseFromString(value)
        return helper.make_attribute(name, graph)
    if isinstance(value, (np.ndarray, TensorSpec)):
        return helper.make_attribute(name, _array_to_tensor(value))
    if isinstance(value, (list, tuple)) and value:
        first = value[0]
        if isinstance(first, bytes):
            return helper.make_attribute(name, [_parse(onnx.GraphProto, g) for g in value])
        if isinstance(first, (np.ndarray, TensorSpec)) or (
            isinstance(first, ObjectSpec) and first.api == TENSOR_PROTO
        ):
            return helper.make_attribute(name, [_array_to_tensor(t) for t in value], attr_type=A.TENSORS)
        if isinstance(first, ObjectSpec) and first.api == SPARSE_TENSOR_PROTO:
            return helper.make_attribute(name, [_parse(onnx.SparseTensorProto, s.args[0]) for s in value])
        if isinstance(first, ObjectSpec) and first.api == TYPE_PROTO:
            return helper.make_attribute(
                name, [_parse(onnx.TypeProto, t.args[0]) for t in value], attr_type=A.TYPE_PROTOS
            )
        if any(isinstance(v, float) for v in value) and all(isinstance(v, (int, float)) for v in value):
            return helper.make_attribute(name, [float(v) for v in value], attr_type=A.FLOATS)
        return helper.make_attribute(name, list(value))
    if isinstance(value, bool):
        return helper.make_attribute(name, int(value))
    return helper.make_attribute(name, value)


def _parse(cls: Any, raw: bytes) -> Any:
    proto = cls()
    proto.ParseFromString(raw)
    return proto


# ---- types of runtime values -----------------------------------------------------------------
def type_to_string(tp: Any) -> str:
    """``TypeProto`` -> ``tensor(float32)``, ``seq(tensor(int64))``, ``optional(seq(...))``."""
    from onnx import helper

    which = tp.WhichOneof("value")
    if which == "tensor_type":
        np_dtype = helper.tensor_dtype_to_np_dtype(tp.tensor_type.elem_type)
        try:
            return f"tensor({dtype_name(np_dtype)})"
        except ValueEncodingError:
            return f"tensor({helper.tensor_dtype_to_string(tp.tensor_type.elem_type).split('.')[-1]})"
    if which == "sequence_type":
        return f"seq({type_to_string(tp.sequence_type.elem_type)})"
    if which == "optional_type":
        return f"optional({type_to_string(tp.optional_type.elem_type)})"
    raise ValueError(f"unsupported ONNX type {which}")


_TYPE_RE = re.compile(r"^(tensor|seq|optional)\((.*)\)$")


def type_from_string(text: str, shape: tuple[int, ...] | None = None) -> Any:
    """Inverse of ``type_to_string``; ``shape`` applies to a top-level tensor type."""
    import onnx
    from onnx import helper

    match = _TYPE_RE.match(text.strip())
    if match is None:
        raise ValueError(f"bad ONNX type string {text!r}")
    kind, inner = match.groups()
    if kind == "tensor":
        if inner in DTYPES:
            elem = helper.np_dtype_to_tensor_dtype(DTYPES[inner])
        else:
            elem = getattr(onnx.TensorProto, inner.upper())
        return helper.make_tensor_type_proto(elem, shape)
    if kind == "seq":
        return helper.make_sequence_type_proto(type_from_string(inner))
    return helper.make_optional_type_proto(type_from_string(inner))


def runtime_value(value: Any, tp: Any = None) -> Any:
    """A runtime value from a test (numpy, numpy scalar, TensorProto, list, None) -> neutral value.

    ``tp`` is its ONNX ``TypeProto`` when known: it decides sequences and optionals.
    """
    import onnx

    which = tp.WhichOneof("value") if tp is not None else None
    if which == "optional_type":
        inner = None if value is None else runtime_value(value, tp.optional_type.elem_type)
        return ObjectSpec(OPTIONAL, (inner,), {"elem_type": type_to_string(tp.optional_type.elem_type)})
    if which == "sequence_type" or isinstance(value, list):
        elem_tp = tp.sequence_type.elem_type if which == "sequence_type" else None
        items = [runtime_value(v, elem_tp) for v in value]
        elem = type_to_string(elem_tp) if elem_tp is not None else _guess_elem_type(items)
        return ObjectSpec(SEQUENCE, (items,), {"elem_type": elem})
    if isinstance(value, onnx.TensorProto):
        return tensor_to_value(value)
    arr = np.asarray(value)
    if arr.dtype == object:
        from onnx import numpy_helper

        return ObjectSpec(TENSOR_PROTO, (numpy_helper.from_array(arr).SerializeToString(),))
    try:
        dtype_name(arr.dtype)
    except ValueEncodingError:
        from onnx import numpy_helper

        return ObjectSpec(TENSOR_PROTO, (numpy_helper.from_array(arr).SerializeToString(),))
    return np.array(arr)


def _guess_elem_type(items: list[Any]) -> str:
    if items and isinstance(items[0], np.ndarray):
        return f"tensor({dtype_name(items[0].dtype)})"
    return "tensor(float32)"


def _decode_runtime(value: Any) -> tuple[Any, Any]:
    """Neutral runtime value -> (value to feed, its ``TypeProto``)."""
    from onnx import helper

    if isinstance(value, ObjectSpec) and value.api == SEQUENCE:
        items = [_decode_runtime(v)[0] for v in value.args[0]]
        return items, helper.make_sequence_type_proto(type_from_string(value.kwargs["elem_type"]))
    if isinstance(value, ObjectSpec) and value.api == OPTIONAL:
        inner = value.args[0]
        fed = None if inner is None else _decode_runtime(inner)[0]
        return fed, helper.make_optional_type_proto(type_from_string(value.kwargs["elem_type"]))
    arr = _proto_array(value)
    elem = helper.np_dtype_to_tensor_dtype(arr.dtype) if arr.dtype != object else 8  # STRING
    if isinstance(value, ObjectSpec):  # dtypes numpy maps lossily (float8 fnuz, int4): the proto says
        tensor = _array_to_tensor(value)
        elem = tensor.data_type
    return arr, helper.make_tensor_type_proto(elem, list(arr.shape))


# ---- the opset onnxruntime accepts -----------------------------------------------------------
_ORT_MAX_OPSET: int | None = None


def ort_max_opset() -> int:
    """The newest default-domain opset this onnxruntime loads (probed once with an ``Abs`` model)."""
    global _ORT_MAX_OPSET
    if _ORT_MAX_OPSET is None:
        import onnx
        import onnxruntime as ort
        from onnx import helper

        _ORT_MAX_OPSET = 1
        for version in range(onnx.defs.onnx_opset_version(), 13, -1):
            graph = helper.make_graph(
                [helper.make_node("Abs", ["x"], ["y"])],
                "probe",
                [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1])],
                [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1])],
            )
            model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", version)])
            model.ir_version = IR_VERSION
            try:
                ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
            except Exception:
                continue
            _ORT_MAX_OPSET = version
            break
    return _ORT_MAX_OPSET


def _effective_opset(op_type: str, domain: str, declared: int) -> int:
    """The declared opset, lowered to what ORT loads when the op's schema is unchanged there."""
    if domain not in ("", "ai.onnx") or declared <= ort_max_opset():
        return declared
    import onnx

    try:
        since = onnx.defs.get_schema(op_type, declared, domain).since_version
    except Exception:
        return declared
    return max(since, ort_max_opset())


# ---- the template ----------------------------------------------------------------------------
def model_bytes(built: SingleOpModel) -> bytes:
    """The serialized ``ModelProto`` (what a frontend reading a file gets)."""
    return bytes(built.model.SerializeToString())


@register_template
class OnnxTemplate(Template):
    library = "onnx"
    reference_name = "onnxruntime (onnx.reference where onnxruntime cannot run the model)"

    def doc_url(self, api: str) -> str | None:
        """The operator's page of the ONNX specification (default domain only)."""
        op = api.split("::", 1)[-1]
        return f"https://onnx.ai/onnx/operators/onnx__{op}.html" if op.isidentifier() else None

    def build(self, inst: OperatorInstance, seed: int = 0, *, data_inputs: str = "runtime") -> SingleOpModel:
        """``data_inputs``: how compilers get integer/bool data operands, ``"runtime"`` or
        ``"constants"`` (recorded in ``details``; ``opera.run.targets._onnx_prep`` applies it)."""
        import onnx
        from onnx import helper

        if data_inputs not in ("runtime", "constants"):
            raise ValueError(f"data_inputs must be 'runtime' or 'constants', not {data_inputs!r}")
        if not inst.api.startswith("onnx::"):
            raise ValueError(f"not an ONNX operator: {inst.api}")
        op_type = inst.api[len("onnx::") :]
        domain = str(inst.extra.get("domain", "") or "")
        declared = int(inst.extra.get("opset", onnx.defs.onnx_opset_version()))
        opset = _effective_opset(op_type, domain, declared)
        n_outputs = int(inst.extra.get("n_outputs", 1))
        omitted_outputs = set(inst.extra.get("omitted_outputs", ()) or ())

        input_names: list[str] = []
        node_inputs: list[str] = []
        graph_inputs = []
        feeds: list[Any] = []
        for i, value in enumerate(inst.inputs):
            if value is None:
                node_inputs.append("")
                continue
            name = f"input_{i}"
            fed, tp = _decode_runtime(value)
            node_inputs.append(name)
            input_names.append(name)
            feeds.append(fed)
            graph_inputs.append(helper.make_value_info(name, tp))
        # drop trailing omitted inputs: '' at the end means the same and some checkers dislike it
        while node_inputs and node_inputs[-1] == "":
            node_inputs.pop()
        output_names = ["" if j in omitted_outputs else f"output_{j}" for j in range(n_outputs)]
        attributes = [value_to_attribute(k, v) for k, v in inst.kwargs.items()]
        node = helper.make_node(op_type, node_inputs, output_names, domain=domain or None)
        node.attribute.extend(attributes)
        outputs = [helper.make_empty_tensor_value_info(n) for n in output_names if n]
        graph = helper.make_graph([node], f"opera_{op_type}", graph_inputs, outputs)
        imports = [helper.make_opsetid(domain, opset)]
        if domain not in ("", "ai.onnx"):
            imports.append(
                helper.make_opsetid("", int(inst.extra.get("onnx_opset", onnx.defs.onnx_opset_version())))
            )
        model = helper.make_model(graph, opset_imports=imports, producer_name="opera")
        model.ir_version = IR_VERSION
        _check_schema(model)
        _fill_output_types(model)
        return SingleOpModel(
            instance=inst,
            model=model,
            inputs=feeds,
            input_names=input_names,
            details={"seed": seed, "opset": opset, "declared_opset": declared, "data_inputs": data_inputs},
        )

    def combine(self, parts: list[SingleOpModel]) -> SingleOpModel | None:
        """One graph holding every part's nodes, each part's names prefixed ``p<k>_`` so nothing is
        shared; graph inputs and outputs in part order. Only parts with the same opset imports and
        IR version (an operator's semantics depend on its opset); ``details["parts"]`` keeps the
        parts' instances."""
        import onnx
        from onnx import compose, helper

        if len(parts) < 2:
            return None
        first = parts[0].model
        imports = sorted((o.domain, o.version) for o in first.opset_import)
        if any(sorted((o.domain, o.version) for o in p.model.opset_import) != imports or p.model.ir_version != first.ir_version for p in parts):
            return None
        graphs = [compose.add_prefix(p.model, f"p{k}_").graph for k, p in enumerate(parts)]
        graph = helper.make_graph(
            [n for g in graphs for n in g.node],
            "combined",
            [i for g in graphs for i in g.input],
            [o for g in graphs for o in g.output],
            initializer=[t for g in graphs for t in g.initializer],
            value_info=[v for g in graphs for v in g.value_info],
        )
        model = helper.make_model(graph, opset_imports=list(first.opset_import))
        model.ir_version = first.ir_version
        onnx.checker.check_model(model)
        names = [f"p{k}_{name}" for k, p in enumerate(parts) for name in p.input_names]
        details = {"parts": [p.instance for p in parts], "data_inputs": parts[0].details.get("data_inputs", "runtime")}
        return SingleOpModel(parts[0].instance, model, [x for p in parts for x in p.inputs], names, details)

    def reference(self, built: SingleOpModel) -> list[np.ndarray]:
        """onnxruntime (CPU) first; the ONNX reference evaluator when ORT cannot load or run it.

        The ONNX specification's own Python implementation is the library's semantics, so an
        instance it runs is valid even where ORT lacks a kernel (opset 27/28 ops, float8 types, ...).
        ``built.details["reference"]`` says which one produced the outputs.
        """
        feeds = dict(zip(built.input_names, built.inputs, strict=True))
        try:
            import onnxruntime as ort

            options = ort.SessionOptions()
            options.log_severity_level = 4  # errors are reported through the exception
            session = ort.InferenceSession(
                built.model.SerializeToString(), options, providers=["CPUExecutionProvider"]
            )
            outputs = session.run(None, feeds)
            built.details["reference"] = "onnxruntime"
        except Exception as exc:
            from onnx.reference import ReferenceEvaluator

            built.details["ort_error"] = (
                f"{type(exc).__name__}: {str(exc).strip().splitlines()[0][:300] if str(exc).strip() else ''}"
            )
            _check_generated_against_onnxruntime(built.instance, str(exc), built.details["ort_error"])
            outputs = ReferenceEvaluator(built.model).run(None, feeds)
            built.details["reference"] = "onnx.reference"
        else:
            _check_generated_as_the_frontends_get_it(built, ort, options)
        flat = flatten_outputs(outputs)
        _check_output_shapes(built.model, flat)
        return flat


    def second_reference(self, built: SingleOpModel, inputs: list[np.ndarray]) -> tuple[str, list[np.ndarray]] | None:
        """The ONNX specification's own evaluator (``onnx.reference``) beside onnxruntime; none when
        onnxruntime could not run the model (the evaluator already is the reference then)."""
        if built.details.get("reference") != "onnxruntime":
            return None
        from onnx.reference import ReferenceEvaluator

        feeds = dict(zip(built.input_names, [_copy(x) for x in inputs], strict=True))
        try:
            outputs = ReferenceEvaluator(built.model).run(None, feeds)
        except Exception:  # the evaluator lacks the op or the type: no second opinion
            return None
        return "onnx.reference", flatten_outputs(outputs)


    def default_attribute_references(
        self, built: SingleOpModel, inputs: list[np.ndarray]
    ) -> Iterator[tuple[str, list[np.ndarray]]]:
        """The node with one attribute at a time removed (its schema default then applies), then
        with all of them removed together, run by the same reference; attributes without a default,
        or variants the library rejects, are skipped."""
        import onnx

        found = _node_schema(built)
        if found is None:
            return
        node, schema = found
        removable = []  # (position, attribute) set to a non-default value that has a documented default
        for k, attr in enumerate(node.attribute):
            formal = schema.attributes.get(attr.name)
            if formal is None or not formal.default_value.name:  # required, or no documented default
                continue
            if onnx.helper.get_attribute_value(attr) == onnx.helper.get_attribute_value(formal.default_value):
                continue
            removable.append((k, attr))
        # one at a time, then all together (a frontend ignoring two of them, e.g. Attention-25's
        # left_window_size and right_window_size, matches neither single variant)
        groups = [[item] for item in removable] + ([removable] if len(removable) > 1 else [])
        for group in groups:
            variant = onnx.ModelProto()
            variant.CopyFrom(built.model)
            for k, _ in sorted(group, key=lambda item: -item[0]):
                del variant.graph.node[0].attribute[k]
            for out in variant.graph.output:  # an attribute may change the shape (GRU's layout)
                if out.type.HasField("tensor_type"):
                    out.type.tensor_type.ClearField("shape")
            other = SingleOpModel(built.instance, variant, [_copy(x) for x in inputs], built.input_names, dict(built.details))
            try:
                outputs = self.reference(other)
            except Exception:
                continue
            yield ", ".join(f"{attr.name}={attribute_to_value(attr)!r}" for _, attr in group), outputs

    def optional_input_references(
        self, built: SingleOpModel, inputs: list[np.ndarray]
    ) -> Iterator[OptionalInputProbe]:
        """For each optional input the node is given at run time: its formal name, the graph input
        feeding it, the outputs with it omitted, and another value for it with the outputs for that
        value. What an omitted optional input means is the schema's (LSTM's peephole ``P``: "If not
        specified - assumed to be 0"). Computed by ``onnx.reference``, not onnxruntime: onnxruntime
        dies by a signal on some omitted inputs (22 instances of the human corpus did), which would
        kill the worker judging a compiler."""
        import onnx
        from onnx.reference import ReferenceEvaluator

        found = _node_schema(built)
        if found is None:
            return
        node, schema = found
        formal_inputs = list(schema.inputs)
        for k, name in enumerate(node.input):
            if not name or k >= len(formal_inputs) or name not in built.input_names:
                continue
            formal = formal_inputs[k]
            if formal.option != onnx.defs.OpSchema.FormalParameterOption.Optional:
                continue
            position = list(built.input_names).index(name)
            moved = _moved(inputs[position])
            if moved is None:
                continue
            variant = onnx.ModelProto()
            variant.CopyFrom(built.model)
            variant.graph.node[0].input[k] = ""  # the schema's way to leave an optional input out
            feeds = dict(zip(built.input_names, [_copy(x) for x in inputs], strict=True))
            try:
                omitted = flatten_outputs(ReferenceEvaluator(variant).run(None, feeds))
                feeds[name] = moved
                moved_outputs = flatten_outputs(ReferenceEvaluator(built.model).run(None, feeds))
            except Exception:
                continue
            yield OptionalInputProbe(formal.name, position, omitted, moved, moved_outputs)

    def older_version_shapes(self, built: SingleOpModel) -> tuple[str, list[tuple[int, ...]]] | None:
        """ONNX shape inference of the same model at the opset just before the one that introduced
        the selected schema version, when it gives other static output shapes (MaxPool-22 ignores
        "sliding windows that would start in the right padded region", MaxPool-12 keeps them:
        sample 15, a frontend with only the older converter)."""
        found = _node_schema(built)
        if found is None:
            return None
        node, schema = found
        opset = int(built.details.get("opset") or 0)
        older = schema_at(node, schema.since_version - 1)
        if older is None:
            return None
        now, before = _inferred_output_shapes(built.model, opset), _inferred_output_shapes(built.model, schema.since_version - 1)
        if now is None or before is None or now == before:
            return None
        return f"{node.op_type}-{older.since_version}", before


def _node_schema(built: SingleOpModel) -> tuple[Any, Any] | None:
    """The model's single node and its operator's schema at the instance's opset (None: unknown)."""
    import onnx

    node = built.model.graph.node[0]
    try:
        return node, onnx.defs.get_schema(node.op_type, int(built.details.get("opset") or 0), node.domain or "")
    except Exception:
        return None


def _moved(value: Any) -> np.ndarray | None:
    """Another value of an optional numeric input (inside a threshold's [0, 1] when it was there)."""
    arr = np.asarray(value)
    if arr.size == 0:
        return None
    if arr.dtype.kind == "f":
        return (arr * 0.5 + 0.1).astype(arr.dtype)
    if arr.dtype.kind in "iu":
        return (arr + 1).astype(arr.dtype)
    if arr.dtype.kind == "b":
        return ~arr
    return None


def _copy(value: Any) -> Any:
    return value.copy() if isinstance(value, np.ndarray) else value


def _check_schema(model: Any) -> None:
    """Refuse a model that breaks its operator's schema: an input of a type the operator's type
    constraints do not allow (Gelu on int8, Sqrt on uint8), inconsistent types of one type variable,
    an attribute out of its range. onnxruntime then has no kernel and ``onnx.reference`` would
    compute something anyway, so without this check such an instance passes as valid and every
    frontend that rightly rejects it looks like a crash (no instance of the human-written corpus
    fails this check; 272 of 1,947 generated mutants did)."""
    import onnx

    try:
        onnx.shape_inference.infer_shapes(model, check_type=True, strict_mode=True)
    except onnx.shape_inference.InferenceError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ValueError(f"the model breaks the operator's schema: {first}") from None


# onnxruntime's words for what it does not implement (an opset newer than it knows, a kernel or a
# type it lacks, an attribute value it leaves out): there the specification's own evaluator is the
# reference. Any other refusal is onnxruntime validating the model or its inputs.
_ORT_LACKS = re.compile(
    r"ValidateOpsetForDomain|NOT_IMPLEMENTED|can't be converted to MLDataType|is not currently registered or supported"
    r"|is not a registered function/op|not supported"
)


def _check_generated_against_onnxruntime(inst: Any, text: str, ort_error: str) -> None:
    """Refuse a generated mutant that onnxruntime rejects for a reason other than a missing feature
    ("Starts and ends shape mismatch", "boxes must be a 3D tensor", an invalid pooling attribute).
    onnx.reference computes almost anything, so without this the mutant passes as valid and every
    frontend that rightly rejects it looks like a crash (judged on the whole-corpus run: a Slice with
    3 starts and no ends, a NonMaxSuppression with rank-6 boxes). Human-written tests keep the
    fallback: their authors wrote them against the specification."""
    from opera.model import Origin

    if inst.source.origin is not Origin.TOOL or _ORT_LACKS.search(text):  # the whole message, not its first line
        return
    raise ValueError(f"onnxruntime rejects this generated instance (not a missing feature): {ort_error}")


def _check_generated_as_the_frontends_get_it(built: SingleOpModel, ort: Any, options: Any) -> None:
    """Refuse a generated mutant that onnxruntime runs with every input fed at run time but rejects
    once its parameter inputs are constants, the model every ONNX frontend gets
    (``opera.run.targets._onnx_prep``): onnxruntime checks an input the schema calls a scalar or a
    1-D list only when it is a constant. Judged UNDEFINED on the whole-corpus run: HammingWindow's
    ``size`` as int32[1], CenterCropPad's ``shape`` as a 0-d tensor, NonMaxSuppression's
    ``max_output_boxes_per_class`` of rank 6; every frontend rightly refused them. Recorded as
    ``built.details["library_rejects"]``, not raised: the test is ``invalid`` after the domain
    check, which says more where it applies (a Pad whose axes repeat: "Behavior is undefined")."""
    from opera.model import Origin

    if built.instance.source.origin is not Origin.TOOL:
        return
    from opera.run.targets._onnx_prep import prepare_built

    try:
        prepared = prepare_built(built)
    except Exception:  # Opera's own preparation failing is the target's harness error, not the library's word
        return
    if len(prepared.runtime_names) == len(built.inputs):
        return  # nothing frozen: the same model
    try:
        model_bytes = prepared.model.SerializeToString()  # type: ignore[attr-defined]
        session = ort.InferenceSession(model_bytes, options, providers=["CPUExecutionProvider"])
        session.run(None, dict(zip(prepared.runtime_names, prepared.select(built.inputs), strict=True)))
    except Exception as exc:
        if _ORT_LACKS.search(str(exc)):
            return
        text = str(exc).strip().splitlines()
        built.details["library_rejects"] = (
            "onnxruntime rejects this generated instance once its parameter inputs are constants, as the "
            f"frontends get them: {type(exc).__name__}: {text[0][:300] if text else ''}"
        )


def _check_output_shapes(model: Any, outputs: list[np.ndarray]) -> None:
    """Refuse an instance whose reference output has another shape than the one the operator's
    shape inference gives it (where that is fully static): the inputs break the operator's shape
    rules in a way neither the schema check nor the reference notices. PRelu's ``slope`` must be
    "unidirectional broadcastable to X"; given a slope of more dimensions, onnxruntime broadcasts
    both ways while the declared output keeps X's shape, and every frontend that follows the
    declared shape would look wrong (0 of the human-written ONNX corpus, 18 of the 1,432 generated
    mutants that build: training ops fed mismatched shapes, windows past the input, ...)."""
    for k, (declared, actual) in enumerate(zip(model.graph.output, outputs, strict=False)):
        if not declared.type.HasField("tensor_type"):
            return  # a sequence/optional output: the flat outputs no longer line up with the graph's
        tensor = declared.type.tensor_type
        if not tensor.HasField("shape"):
            continue
        dims = tuple(d.dim_value if d.HasField("dim_value") else None for d in tensor.shape.dim)
        if None in dims:
            continue
        shape = tuple(np.shape(actual))
        if shape != dims:
            raise ValueError(
                f"the reference's output {k} has shape {list(shape)} where the operator's shape inference "
                f"gives {list(dims)}: the inputs break the operator's shape rules"
            )


def _fill_output_types(model: Any) -> None:
    """Give the graph outputs the types shape inference finds (left empty where it finds none)."""
    import onnx

    try:
        inferred = onnx.shape_inference.infer_shapes(model, strict_mode=False)
    except Exception:
        return
    known = {vi.name: vi for vi in [*inferred.graph.value_info, *inferred.graph.output]}
    for out in model.graph.output:
        found = known.get(out.name)
        if found is not None and found.type.WhichOneof("value") is not None:
            out.type.CopyFrom(found.type)


def schema_at(node: Any, opset: int) -> Any:
    """The node's operator schema as of ``opset`` (None: the operator did not exist yet, or is unknown)."""
    import onnx

    if opset < 1:
        return None
    try:
        return onnx.defs.get_schema(node.op_type, opset, node.domain or "")
    except Exception:
        return None


def _inferred_output_shapes(model: Any, opset: int) -> list[tuple[int, ...]] | None:
    """The output shapes ONNX shape inference gives ``model`` re-declared at ``opset`` (its declared
    output shapes cleared), None where one is not fully static or inference fails."""
    import onnx

    variant = onnx.ModelProto()
    variant.CopyFrom(model)
    domain = variant.graph.node[0].domain or ""
    for entry in variant.opset_import:
        if (entry.domain or "") == domain:
            entry.version = opset
    for out in variant.graph.output:
        if not out.type.HasField("tensor_type"):
            return None
        out.type.tensor_type.ClearField("shape")
    try:
        inferred = onnx.shape_inference.infer_shapes(variant, strict_mode=True, data_prop=True)
    except Exception:
        return None
    shapes = []
    for out in inferred.graph.output:
        tensor = out.type.tensor_type
        if not tensor.HasField("shape") or not all(d.HasField("dim_value") for d in tensor.shape.dim):
            return None
        shapes.append(tuple(int(d.dim_value) for d in tensor.shape.dim))
    return shapes
