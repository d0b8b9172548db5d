"""Recording hooks for ONNX: every node of every model built with ``onnx.helper`` (docs/design.md, Harvest).

``onnx.helper.make_node``, ``make_graph`` and ``make_model`` are replaced, in every loaded module
that binds them (``from onnx.helper import make_node`` included), by wrappers; ``uninstall`` puts
the originals back wherever a wrapper is still bound.

What is emitted, and when: one instance per node of the top-level graph when a *model* is made
(``make_model``, also through ``make_model_gen_version``), with input types from
``onnx.shape_inference.infer_shapes``. A graph made with ``make_graph`` and never wrapped into a
model is emitted when the recorder is uninstalled, unless it is the body of a node of a recorded
graph (``If``/``Loop``/``Scan`` bodies are recorded as the parent node's GRAPH attribute; emitting
them again would count their nodes twice). ``make_node`` alone emits nothing: a node only has input
types inside a graph; it is wrapped so that nothing it builds internally is recorded.

Input values: initializers and ``Constant`` outputs feeding a node are exact numpy values (a float
initializer of more than ``MAX_EXACT_FLOAT_ELEMENTS`` values, i.e. real model weights, becomes a
``TensorSpec`` over its value range); any other tensor becomes a ``TensorSpec`` with the inferred
dtype and shape (unknown dimensions ``None``); an input whose type inference cannot tell, or a
sequence/optional without a value, is ``Opaque`` (the instance is kept but marked not migratable).
"""

from __future__ import annotations

import functools
import hashlib
import sys
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import numpy as np

from opera.instrumentation import BaseRecorder, register_recorder
from opera.model import InstanceKind, OperatorInstance, Source
from opera.templates.onnx_template import attribute_to_value, runtime_value, tensor_to_value
from opera.values import Opaque, TensorSpec, ValueEncodingError, dtype_name

__all__ = ["OnnxRecorder", "node_instances"]

_HOOKED = ("make_node", "make_graph", "make_model")
MAX_EXACT_FLOAT_ELEMENTS = 1 << 16  # larger float initializers are kept as TensorSpec
_MAX_ORPHAN_BYTES = 16 << 20  # a larger stand-alone graph is not kept for emission at uninstall


def _digest(raw: bytes) -> str:
    return hashlib.blake2b(raw, digest_size=16).hexdigest()


def _opsets(model: Any) -> dict[str, int]:
    found = {("" if o.domain == "ai.onnx" else o.domain): int(o.version) for o in model.opset_import}
    return found


def _constant_value(node: Any) -> Any:
    """The value a ``Constant`` node produces, as a neutral value (None when it has no literal)."""
    for attr in node.attribute:
        if attr.name == "value":
            return tensor_to_value(attr.t)
        if attr.name in ("value_float", "value_int", "value_floats", "value_ints"):
            import numpy as np

            dtype = np.float32 if "float" in attr.name else np.int64
            return np.array(attribute_to_value(attr), dtype=dtype)
    return None


def _weight_value(tensor: Any) -> Any:
    """An initializer's value: exact, except a large float tensor becomes a ``TensorSpec`` over its
    value range (the weights of a real model would bloat the corpus and mean little exactly)."""
    value = tensor_to_value(tensor)
    if isinstance(value, np.ndarray) and value.dtype.kind == "f" and value.size > MAX_EXACT_FLOAT_ELEMENTS:
        finite = value[np.isfinite(value)].astype(np.float64)
        low, high = (float(finite.min()), float(finite.max())) if finite.size else (-1.0, 1.0)
        return TensorSpec(dtype=dtype_name(value.dtype), shape=tuple(value.shape), low=low, high=high)
    return value


def _spec_from_type(tp: Any) -> Any:
    """A value with no data: ``TensorSpec`` from its tensor type, ``Opaque`` for anything else."""
    from onnx import helper

    which = tp.WhichOneof("value") if tp is not None else None
    if which != "tensor_type":
        return Opaque("onnx.value", f"no value and {'no inferred type' if which is None else which} ")
    tensor_type = tp.tensor_type
    try:
        name = dtype_name(helper.tensor_dtype_to_np_dtype(tensor_type.elem_type))
    except (ValueEncodingError, KeyError, TypeError):
        return Opaque("onnx.value", f"tensor element type {tensor_type.elem_type} has no corpus encoding")
    if not tensor_type.HasField("shape"):
        return Opaque("onnx.value", "tensor of unknown rank")
    dims = tuple(int(d.dim_value) if d.HasField("dim_value") else None for d in tensor_type.shape.dim)
    return TensorSpec(dtype=name, shape=dims)


def node_instances(
    model: Any,
    source: Source,
    library_version: str,
    values: Mapping[str, Any] | None = None,
    tolerance: Any = None,
) -> list[OperatorInstance]:
    """One ``onnx_node`` instance per node of ``model``'s graph.

    ``values`` maps value names to neutral runtime values (a test's real inputs); names not in it
    get initializer/``Constant`` values, then ``TensorSpec``s from shape inference.
    """
    import onnx

    try:
        inferred = onnx.shape_inference.infer_shapes(model, strict_mode=False)
    except Exception:
        inferred = model
    graph = inferred.graph
    types: dict[str, Any] = {}
    for vi in [*graph.input, *graph.value_info, *graph.output]:
        if vi.type.WhichOneof("value") is not None:
            types.setdefault(vi.name, vi.type)
    known: dict[str, Any] = {init.name: _weight_value(init) for init in graph.initializer}
    for node in graph.node:
        if node.op_type == "Constant" and node.domain in ("", "ai.onnx") and node.output:
            value = _constant_value(node)
            if value is not None:
                known[node.output[0]] = value
    known.update(values or {})
    opsets = _opsets(model)
    default_opset = opsets.get("", onnx.defs.onnx_opset_version())
    out = []
    for index, node in enumerate(graph.node):
        domain = "" if node.domain == "ai.onnx" else node.domain
        inputs: list[Any] = []
        for name in node.input:
            if not name:
                inputs.append(None)
            elif name in known:
                inputs.append(known[name])
            else:
                inputs.append(_spec_from_type(types.get(name)))
        while inputs and inputs[-1] is None:
            inputs.pop()
        extra: dict[str, Any] = {
            "opset": opsets.get(domain, default_opset if domain == "" else 1),
            "domain": domain,
            "n_outputs": len(node.output),
        }
        omitted = [j for j, name in enumerate(node.output) if not name]
        if omitted:
            extra["omitted_outputs"] = omitted
        if domain:
            extra["onnx_opset"] = default_opset
        kwargs = {attr.name: attribute_to_value(attr) for attr in node.attribute if not attr.ref_attr_name}
        out.append(
            OperatorInstance(
                library="onnx",
                api=f"onnx::{node.op_type}",
                kind=InstanceKind.ONNX_NODE,
                kwargs=kwargs,
                inputs=tuple(inputs),
                extra=extra,
                library_version=library_version,
                source=Source(
                    source.suite,
                    source.test,
                    index if source.sample is None else source.sample,
                    source.origin,
                ),
                tolerance=tolerance,
            )
        )
    return out


def test_values(model: Any, inputs: Iterable[Any]) -> dict[str, Any]:
    """A test's input values keyed by the model's graph-input names, as neutral values."""
    graph_inputs = [
        vi for vi in model.graph.input if vi.name not in {i.name for i in model.graph.initializer}
    ]
    return {vi.name: runtime_value(value, vi.type) for vi, value in zip(graph_inputs, inputs, strict=False)}


@register_recorder
class OnnxRecorder(BaseRecorder):
    library = "onnx"

    def __init__(self, sink: Callable[[OperatorInstance], None] | None = None) -> None:
        super().__init__(sink)
        self._patched: list[tuple[Any, str, Any]] = []  # (module, attribute name, original)
        # graphs made by make_graph and not (yet) part of a recorded model, by content digest;
        # a graph that becomes part of a model (itself or as a node's body) is dropped from here,
        # so memory holds only graphs still unaccounted for
        self._orphan_graphs: dict[str, tuple[bytes, Source]] = {}

    def library_version(self) -> str:
        import onnx

        return str(onnx.__version__)

    # ---- patching -----------------------------------------------------------------------------
    def _install(self) -> None:
        import onnx.helper

        originals = {name: getattr(onnx.helper, name) for name in _HOOKED}
        wrappers = {
            "make_node": self._wrap_quiet(originals["make_node"]),
            "make_graph": self._wrap_graph(originals["make_graph"]),
            "make_model": self._wrap_model(originals["make_model"]),
        }
        by_id = {id(fn): name for name, fn in originals.items()}
        for module in list(sys.modules.values()):
            try:
                namespace = vars(module)
            except TypeError:
                continue
            for attr, value in list(namespace.items()):
                name = by_id.get(id(value))
                if name is not None and value is originals[name]:
                    setattr(module, attr, wrappers[name])
                    self._patched.append((module, attr, value))

    def _uninstall(self) -> None:
        for module, attr, original in reversed(self._patched):
            if getattr(getattr(module, attr, None), "__opera_wrapped__", None) is original:
                setattr(module, attr, original)
        self._patched.clear()
        self._emit_orphan_graphs()

    def _wrap_quiet(self, original: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(original)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with self.nested():
                return original(*args, **kwargs)

        wrapper.__opera_wrapped__ = original  # type: ignore[attr-defined]
        return wrapper

    def _wrap_graph(self, original: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(original)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            top = self.recording
            with self.nested():
                graph = original(*args, **kwargs)
                if top:
                    try:
                        raw = graph.SerializeToString()
                        if len(raw) <= _MAX_ORPHAN_BYTES:
                            self._orphan_graphs.setdefault(_digest(raw), (raw, self.source))
                    except Exception as exc:  # recording must never break the suite
                        self.note_error(f"make_graph: {type(exc).__name__}")
            return graph

        wrapper.__opera_wrapped__ = original  # type: ignore[attr-defined]
        return wrapper

    def _wrap_model(self, original: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(original)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            top = self.recording
            with self.nested():
                model = original(*args, **kwargs)
                if top:
                    self._record_model(model, self.source)
            return model

        wrapper.__opera_wrapped__ = original  # type: ignore[attr-defined]
        return wrapper

    # ---- emitting -----------------------------------------------------------------------------
    def _record_model(self, model: Any, source: Source) -> None:
        try:
            self._mark_recorded(model.graph)
            for inst in node_instances(model, source, self.library_version()):
                self.emit(inst)
        except Exception as exc:  # recording must never break the suite
            self.note_error(f"make_model: {type(exc).__name__}: {str(exc)[:80]}")

    def _mark_recorded(self, graph: Any) -> None:
        from onnx import AttributeProto

        self._orphan_graphs.pop(_digest(graph.SerializeToString()), None)
        for node in graph.node:
            for attr in node.attribute:
                if attr.type == AttributeProto.GRAPH:
                    self._mark_recorded(attr.g)
                elif attr.type == AttributeProto.GRAPHS:
                    for sub in attr.graphs:
                        self._mark_recorded(sub)

    def _emit_orphan_graphs(self) -> None:
        """Graphs never wrapped into a model, nor bodies of a recorded node: one model each."""
        import onnx
        from onnx import helper

        make_model = getattr(helper.make_model, "__opera_wrapped__", helper.make_model)
        # bodies of orphan graphs are not orphans either
        for raw, _ in list(self._orphan_graphs.values()):
            graph = onnx.GraphProto.FromString(raw)
            for node in graph.node:
                for attr in node.attribute:
                    bodies = [attr.g] if attr.type == onnx.AttributeProto.GRAPH else list(attr.graphs)
                    for body in bodies:
                        self._mark_recorded(body)
        orphans = list(self._orphan_graphs.values())
        self._orphan_graphs.clear()
        for raw, source in orphans:
            try:
                model = make_model(onnx.GraphProto.FromString(raw))
            except Exception as exc:
                self.note_error(f"make_graph: {type(exc).__name__}")
                continue
            self._record_model(model, source)
