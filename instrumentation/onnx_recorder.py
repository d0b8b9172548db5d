"""Recording hooks for ONNX: every node of every model built with ``onnx.helper`` (docs/design.md, Harvest).

``onnx.helper.make_node``, ``make_graph`` and ``make_model`` are replaced, in every loaded module
that binds them (``from onnx.helper import make_node`` included), by wrappers; ``uninstall`` puts
the originals back wherever a wrapper is still bound.

What is emitted, and when: one instance per node of the top-level graph of each model a test made
(``make_model``, also through ``make_model_gen_version``), with input types from
``onnx.shape_inference.infer_shapes``, *as the model was consumed*: tests change a model after
making it (``model.opset_import[0].version = 10``, ``model.ir_version = 8``) or convert it with an
explicit opset (``from_onnx(model, opset=10)``), so what is recorded is what a consumer received
(``MODEL_CONSUMERS``: the checker, ``onnx.save``, an onnxruntime or ``onnx.reference`` session, a
compiler's converter), taken when it received it, with the input values a session was run on
(and, for a graph of several nodes, every inner node's real input values from ``onnx.reference``).
A model no consumer received is recorded as it is when its test ends. A model received inside
``pytest.raises`` / ``assertRaises`` (the test expects the consumer to reject it) is recorded as
invalid with the reason, like a torch call made there. A graph made with ``make_graph`` and never wrapped into a
model is emitted when the recorder is uninstalled, unless it is the body of a node of a recorded
graph (``If``/``Loop``/``Scan`` bodies are recorded as the parent node's GRAPH attribute; emitting
them again would count their nodes twice). ``make_node`` alone emits nothing: a node only has input
types inside a graph; it is wrapped so that nothing it builds internally is recorded.

Input values: the values a session was run on, then initializers and ``Constant`` outputs feeding a
node, are exact numpy values (a float initializer of more than ``MAX_EXACT_FLOAT_ELEMENTS`` values,
i.e. real model weights, becomes a ``TensorSpec`` over its value range); any other float or data
tensor becomes a ``TensorSpec`` with the inferred dtype and shape and a seed of its own (two inputs of
one shape do not get the same values). Nothing is invented: a tensor with an unknown dimension, a
parameter operand (``Reshape``'s shape, ``Slice``'s starts, ...) with no recorded value, an input
whose type inference cannot tell, or a sequence/optional without a value, is ``Opaque`` (the
instance is kept but marked not migratable, with the reason).
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import sys
import warnings
import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from opera.instrumentation import EXPECTED_ERROR, BaseRecorder, register_recorder
from opera.model import InstanceKind, OperatorInstance, Source
from opera.run.targets._onnx_prep import PARAMETER_INPUTS
from opera.templates.onnx_template import attribute_to_value, runtime_value, tensor_to_value
from opera.values import Opaque, TensorSpec, ValueEncodingError, dtype_name

__all__ = ["MODEL_CONSUMERS", "OnnxRecorder", "node_instances", "recorded_values"]

_HOOKED = ("make_node", "make_graph", "make_model")
MAX_EXACT_FLOAT_ELEMENTS = 1 << 16  # larger float initializers are kept as TensorSpec
_MAX_ORPHAN_BYTES = 16 << 20  # a larger stand-alone graph is not kept for emission at uninstall

# Functions that receive a finished model: (module, attribute, keyword naming the opset the
# consumer reads the model at, or None). A module that is not installed is skipped; one imported
# after the recorder was installed (a compiler imported by a test module) is patched when pytest
# has collected the tests (``OnnxRecorder.patch_consumers``).
MODEL_CONSUMERS: tuple[tuple[str, str, str | None], ...] = (
    ("onnx.checker", "check_model", None),
    ("onnx", "save_model", None),
    ("onnx", "save", None),
    ("tvm.relax.frontend.onnx", "from_onnx", "opset"),
    ("openvino", "convert_model", None),
)


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


def _spec_from_type(tp: Any, seed: int = 0) -> Any:
    """A value with no data: ``TensorSpec`` from its tensor type (drawn with ``seed``), ``Opaque``
    for anything else, and for a tensor with a dimension the type does not know (inventing one
    makes an instance the test never had)."""
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
    if None in dims:
        shown = ", ".join("?" if d is None else str(d) for d in dims)
        return Opaque("onnx.value", f"a {name} tensor of shape [{shown}]: the test's dimensions are not known")
    return TensorSpec(dtype=name, shape=dims, seed=seed)


def _parameter_positions(node: Any, opset: int) -> set[int]:
    """Positions of ``node``'s *parameter* operands (shape, axes, starts, indices, K, ...): those
    typed by a concrete type or a type variable of their own (see
    ``opera.run.targets._onnx_prep._data_inputs``). Integer and bool ones, and the float operands
    that ``PARAMETER_INPUTS`` names (a quantization scale, Clip's bounds, Resize's scales: a type
    variable of its own does not tell a float parameter from a float data operand such as
    GridSample's grid), get no invented value (random numbers in [-1, 1]: a negative quantization
    scale): without a recorded value the instance is opaque."""
    import onnx

    try:
        schema = onnx.defs.get_schema(node.op_type, opset, node.domain or "")
    except Exception:
        return set()
    formals = list(schema.inputs)
    if not formals:
        return set()
    variables = {c.type_param_str for c in schema.type_constraints}
    typed = [formals[min(pos, len(formals) - 1)].type_str for pos in range(len(node.input))]
    shared = {f.type_str for f in schema.outputs} & variables
    first = typed[0] if typed else ""
    if first in variables and typed.count(first) > 1:
        shared.add(first)
    return {pos for pos, type_str in enumerate(typed) if type_str not in shared}


def recorded_values(model: Any, feeds: Mapping[str, Any], intermediate: bool) -> dict[str, Any]:
    """Neutral values of a model's graph inputs from the arrays a test fed it (``feeds``: name ->
    array) and, with ``intermediate``, of every inner value, computed exactly by ``onnx.reference``
    (a node cut from a graph keeps the input its producer really gave it)."""
    import onnx


    types = {vi.name: vi.type for vi in model.graph.input}
    values = {name: runtime_value(value, types.get(name)) for name, value in feeds.items() if name in types}
    if not intermediate or not feeds:
        return values
    from onnx.reference import ReferenceEvaluator

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        results = ReferenceEvaluator(model).run(None, dict(feeds), intermediate=True)
    inferred = onnx.shape_inference.infer_shapes(model, strict_mode=False).graph
    types.update({vi.name: vi.type for vi in [*inferred.value_info, *inferred.output] if vi.type.WhichOneof("value")})
    for name, value in results.items():  # type: ignore[union-attr]
        if name and name not in values and value is not None:
            values[name] = runtime_value(value, types.get(name))
    return values


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
        opset = opsets.get(domain, default_opset if domain == "" else 1)
        parameters = _parameter_positions(node, opset)
        float_parameters = set(PARAMETER_INPUTS.get(node.op_type, ()))
        for pos, name in enumerate(node.input):
            if not name:
                inputs.append(None)
            elif name in known:
                inputs.append(known[name])
            else:
                spec = _spec_from_type(types.get(name), seed=zlib.crc32(f"{source.test}|{index}|{name}".encode()))
                if isinstance(spec, TensorSpec) and (
                    pos in float_parameters or (pos in parameters and spec.dtype.startswith(("int", "uint", "bool")))
                ):
                    spec = Opaque("onnx.value", f"parameter operand {pos} ({name}) of {node.op_type} has no value recorded in the test")
                inputs.append(spec)
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


@dataclass
class _Received:
    """A model as a consumer received it (serialized then), and what its sessions were fed."""

    raw: bytes
    source: Source
    expected_error: bool = False
    feeds: dict[str, Any] | None = None


@dataclass
class _Made:
    """A model a test made, until its test ends (consumers may still change or receive it)."""

    model: Any
    source: Source
    expected_error: bool
    received: bool = False
    digests: set[str] = field(default_factory=set)  # of what consumers received of it


@register_recorder
class OnnxRecorder(BaseRecorder):
    library = "onnx"

    def __init__(self, sink: Callable[[OperatorInstance], None] | None = None) -> None:
        super().__init__(sink)
        self._patched: list[tuple[Any, str, Any]] = []  # (module or class, attribute name, original)
        # graphs made by make_graph and not (yet) part of a recorded model, by content digest;
        # a graph that becomes part of a model (itself or as a node's body) is dropped from here,
        # so memory holds only graphs still unaccounted for
        self._orphan_graphs: dict[str, tuple[bytes, Source]] = {}
        self._made: list[_Made] = []  # this test's models
        self._received: dict[str, _Received] = {}  # digest -> what a consumer received
        self._sessions: dict[int, str] = {}  # id(session) -> digest of its model

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
        self._patch_everywhere(originals, wrappers)
        self.test_modules_loaded()
        self._patch_sessions()

    def _patch_everywhere(self, originals: Mapping[str, Any], wrappers: Mapping[str, Any]) -> None:
        """Bind ``wrappers[name]`` wherever a loaded module binds ``originals[name]``."""
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

    def test_modules_loaded(self) -> None:
        originals: dict[str, Any] = {}
        wrappers: dict[str, Any] = {}
        for module_name, attr, opset_keyword in MODEL_CONSUMERS:
            module = sys.modules.get(module_name)
            if module is None and module_name.split(".")[0] == "onnx":
                module = importlib.import_module(module_name)
            original = getattr(module, attr, None) if module is not None else None
            if original is None or getattr(original, "__opera_wrapped__", None) is not None:
                continue  # not installed, not imported by any test, or patched already
            key = f"{module_name}.{attr}"
            originals[key] = original
            wrappers[key] = self._wrap_consumer(original, opset_keyword)
        if originals:
            self._patch_everywhere(originals, wrappers)

    def _patch_sessions(self) -> None:
        """onnxruntime and onnx.reference sessions: the model they load, the inputs they run on."""
        for module_name, class_name in (("onnxruntime", "InferenceSession"), ("onnx.reference", "ReferenceEvaluator")):
            try:
                cls = getattr(importlib.import_module(module_name), class_name)
            except Exception:
                continue
            init, run = cls.__init__, cls.run
            cls.__init__ = self._wrap_session_init(init)
            cls.run = self._wrap_session_run(run)
            self._patched += [(cls, "__init__", init), (cls, "run", run)]

    def _uninstall(self) -> None:
        for owner, attr, original in reversed(self._patched):
            if getattr(getattr(owner, attr, None), "__opera_wrapped__", None) is original:
                setattr(owner, attr, original)
        self._patched.clear()
        self.flush()
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
                    try:
                        self._mark_recorded(model.graph)
                        self._made.append(_Made(model, self.source, self.expecting_error()))
                    except Exception as exc:  # recording must never break the suite
                        self.note_error(f"make_model: {type(exc).__name__}: {str(exc)[:80]}")
            return model

        wrapper.__opera_wrapped__ = original  # type: ignore[attr-defined]
        return wrapper

    def _wrap_consumer(self, original: Callable[..., Any], opset_keyword: str | None) -> Callable[..., Any]:
        @functools.wraps(original)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if self.recording and args:
                opset = kwargs.get(opset_keyword) if opset_keyword else None
                self._receive(args[0], opset)
            with self.nested():
                return original(*args, **kwargs)

        wrapper.__opera_wrapped__ = original  # type: ignore[attr-defined]
        return wrapper

    def _wrap_session_init(self, original: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(original)
        def wrapper(session: Any, *args: Any, **kwargs: Any) -> Any:
            digest = self._receive(args[0] if args else kwargs.get("path_or_bytes", kwargs.get("proto")), None) if self.recording else None
            with self.nested():
                original(session, *args, **kwargs)
            if digest is not None:
                self._sessions[id(session)] = digest

        wrapper.__opera_wrapped__ = original  # type: ignore[attr-defined]
        return wrapper

    def _wrap_session_run(self, original: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(original)
        def wrapper(session: Any, *args: Any, **kwargs: Any) -> Any:
            digest = self._sessions.get(id(session))
            feeds = args[1] if len(args) > 1 else kwargs.get("input_feed", kwargs.get("feed_inputs"))
            received = self._received.get(digest) if digest is not None else None
            if received is not None and received.feeds is None and isinstance(feeds, Mapping):
                try:
                    received.feeds = {str(k): np.array(v, copy=True) for k, v in feeds.items()}
                except Exception as exc:  # a feed that is not an array (a sequence, ...)
                    self.note_error(f"session feeds: {type(exc).__name__}")
            with self.nested():
                return original(session, *args, **kwargs)

        wrapper.__opera_wrapped__ = original  # type: ignore[attr-defined]
        return wrapper

    # ---- what consumers received ----------------------------------------------------------------
    def _receive(self, model: Any, opset: Any) -> str | None:
        """Remember ``model`` (a ModelProto, its bytes or a file path) as received now, at
        ``opset`` when the consumer was told one; returns its digest (None: not a model)."""
        import onnx

        try:
            if isinstance(model, onnx.ModelProto):
                received = onnx.ModelProto()
                received.CopyFrom(model)
            elif isinstance(model, (bytes, bytearray)):
                received = onnx.ModelProto.FromString(bytes(model))
            elif isinstance(model, str) and model.endswith(".onnx"):
                received = onnx.load(model)
            else:
                return None
            as_made = _digest(received.SerializeToString())
            if isinstance(opset, int):
                for entry in received.opset_import:
                    if entry.domain in ("", "ai.onnx"):
                        entry.version = opset
            raw = received.SerializeToString()
        except Exception as exc:  # recording must never break the suite
            self.note_error(f"model consumer: {type(exc).__name__}: {str(exc)[:80]}")
            return None
        digest = _digest(raw)
        made = next((m for m in self._made if m.model is model), None)
        if made is None:  # bytes or a file: the model they serialize, as it is now
            made = next((m for m in self._made if _digest(m.model.SerializeToString()) == as_made), None)
        if made is None:
            return None  # a model no test made here (a file shipped with the suite): not recorded
        made.received = True
        entry = self._received.setdefault(digest, _Received(raw, made.source))
        entry.expected_error = entry.expected_error or self.expecting_error() or made.expected_error
        return digest

    def flush(self) -> None:
        """Emit the test's models: each distinct model its consumers received, with the values a
        session ran it on; a model nothing received, as it is now."""
        import onnx

        received, made = list(self._received.values()), self._made
        self._received, self._made, self._sessions = {}, [], {}
        with self.nested():  # onnx.reference computing inner values is not a test's session
            for entry in received:
                model = onnx.ModelProto.FromString(entry.raw)
                self._record_model(model, entry.source, entry.expected_error, entry.feeds)
            for m in made:
                if not m.received:
                    self._record_model(m.model, m.source, m.expected_error, None)

    # ---- emitting -----------------------------------------------------------------------------
    def _record_model(
        self, model: Any, source: Source, expected_error: bool = False, feeds: Mapping[str, Any] | None = None
    ) -> None:
        try:
            values = recorded_values(model, feeds or {}, intermediate=len(model.graph.node) > 1)
        except Exception as exc:  # the reference cannot run it: graph inputs only
            self.note_error(f"inner values: {type(exc).__name__}: {str(exc)[:80]}")
            values = recorded_values(model, feeds or {}, intermediate=False)
        try:
            for inst in node_instances(model, source, self.library_version(), values):
                self.emit(inst.with_verdict(False, EXPECTED_ERROR) if expected_error else inst)
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
