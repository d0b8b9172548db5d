"""Keras 3 recorder: ``keras.layers`` constructions + calls (``module``) and ``keras.ops`` calls (``function``).

What is patched while installed, and restored by ``uninstall``:

- ``__init__`` of every public class in ``keras.layers``: a top-level construction of a layer whose
  type is exactly that public class remembers ``(api, args, kwargs)`` in the recorder (keyed by the
  layer's id, dropped when the layer is garbage-collected; never an attribute of the layer).
  Layers built inside another layer's ``__init__``/``build``/``call`` are not remembered; neither are
  layers that Keras builds itself (``from_config`` during a serialization round trip), nor
  user-defined subclasses (their ``call`` is not the public layer's).
- ``Layer.__call__`` (once, on the base class): a top-level call of a remembered layer emits a
  ``module`` instance: ``inputs`` are the positional call arguments, keyword arguments of the call
  (``training``, ``mask``, ``initial_state``, an attention layer's ``value``...) go to
  ``extra["call_kwargs"]`` (a dict, omitted when empty). Nothing inside the call is recorded.
- every public function of ``keras.ops`` (and ``keras.ops.image``/``linalg``/``nn``/``numpy``):
  the function object is replaced in *every* module of ``sys.modules`` that binds it, so
  ``from keras.src.ops import nn as knn``, ``from keras.ops import softmax`` and ``ops.softmax``
  all reach the wrapper. An op called by another op or by a layer is not recorded.

"Top level" means two things: the recorder is not already inside a recorded call (the
``BaseRecorder.nested`` guard), and the caller is test code rather than Keras internals (a loss
inside ``model.fit`` calling ``ops.mean`` is not a test's call). The caller test looks at the
calling frame's module: ``keras.*`` modules count as internal unless they end in ``_test``; for
layers ``keras.src.testing`` (``run_layer_test``) also counts as test code.

Calls are emitted after they return: a call the library rejects (``pytest.raises``) is not kept.

Value conversion: numpy arrays, TensorFlow tensors/variables and ``keras.Variable`` become exact
arrays when int/bool with <= 4096 elements or any other dtype with <= 64 elements, else a
``TensorSpec`` (seed = CRC32 of the data, value range = finite min/max). Symbolic tensors
(``KerasTensor``, graph-mode ``tf.Tensor``) become a ``TensorSpec`` keeping ``None`` dimensions.
Keras objects passed as arguments become ``ObjectSpec``: a remembered layer from its recorded
constructor call, anything else exported by Keras (initializers, regularizers, constraints, dtype
policies, internally built layers) from ``get_config()``. Functions become ``CallableRef`` under
their public Keras name when there is one, else their importable module path; lambdas and local
functions become ``Opaque``.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import os
import sys
import weakref
import zlib
from collections.abc import Callable
from types import FrameType, ModuleType
from typing import Any

import numpy as np

from opera.instrumentation import BaseRecorder, register_recorder
from opera.model import InstanceKind, OperatorInstance
from opera.values import DTYPES, CallableRef, DType, ObjectSpec, Opaque, TensorSpec, dtype_name

os.environ.setdefault("KERAS_BACKEND", "tensorflow")

__all__ = ["KerasRecorder", "to_neutral"]

EXACT_INT_ELEMENTS = 4096
EXACT_FLOAT_ELEMENTS = 64
# (api, args, kwargs) of a remembered layer, by id(layer); the entry goes when the layer dies.
Ctor = tuple[str, tuple[Any, ...], dict[str, Any]]
_OPS_NAMESPACES = ("keras.ops", "keras.ops.image", "keras.ops.linalg", "keras.ops.nn", "keras.ops.numpy")
# Public namespaces searched for the exported name of a Keras object's class.
_OBJECT_NAMESPACES = (
    "keras.layers",
    "keras.initializers",
    "keras.regularizers",
    "keras.constraints",
    "keras.dtype_policies",
    "keras.losses",
    "keras.metrics",
    "keras.optimizers",
    "keras.optimizers.schedules",
    "keras.quantizers",
    "keras",
)
_CALLABLE_NAMESPACES = (
    "keras.activations",
    "keras.ops",
    "keras.losses",
    "keras.initializers",
    "keras.random",
)
_SKIPPED_LAYER_CLASSES = {"Layer", "InputLayer", "Input"}
# keras.ops utilities that are no tensor operators (conversions, introspection, autodiff helpers):
# tests call them to check results, and no compiler frontend has anything to convert for them.
_SKIPPED_OPS = {"convert_to_numpy", "convert_to_tensor", "is_tensor", "dtype", "shape", "custom_gradient"}


def _is_internal_module(name: str, allow_testing: bool) -> bool:
    if not (name == "keras" or name.startswith("keras.")):
        return False
    if name.endswith("_test"):
        return False
    return not (allow_testing and name.startswith("keras.src.testing"))


class _Converter:
    """Library value -> neutral value (see the module docstring for the rules)."""

    def __init__(self, ops_api_of: dict[int, str], ctors: dict[int, Ctor] | None = None) -> None:
        import keras

        self.keras = keras
        self.ctors = ctors if ctors is not None else {}
        self.ops_api_of = ops_api_of  # id(original or wrapper op) -> "keras.ops.x"
        self._public_class_names: dict[type, str] = {}
        self._public_callable_names: dict[int, str] = {}
        for ns_name in _OBJECT_NAMESPACES:
            ns = importlib.import_module(ns_name)
            for attr, obj in vars(ns).items():
                if inspect.isclass(obj) and not attr.startswith("_"):
                    self._public_class_names.setdefault(obj, f"{ns_name}.{attr}")
        for ns_name in _CALLABLE_NAMESPACES:
            ns = importlib.import_module(ns_name)
            for attr, obj in vars(ns).items():
                if inspect.isfunction(obj) and not attr.startswith("_"):
                    self._public_callable_names.setdefault(id(obj), f"{ns_name}.{attr}")
        try:
            import tensorflow as tf

            self._tf: Any = tf
        except ImportError:  # another backend: no TF tensors to convert
            self._tf = None

    def __call__(self, value: Any) -> Any:
        keras = self.keras
        if value is None or isinstance(value, (bool, int, float, complex, str, bytes, np.generic)):
            return value
        if value is Ellipsis or isinstance(value, slice):
            return value
        if isinstance(value, np.ndarray):
            return _array_value(value)
        if isinstance(value, keras.KerasTensor):  # a seed of its own: two inputs never share values
            return _symbolic_spec(value.dtype, value.shape, zlib.crc32(str(value.name).encode()))
        if isinstance(value, (list, tuple)):
            converted = [self(v) for v in value]
            return converted if isinstance(value, list) else tuple(converted)
        if isinstance(value, dict):
            return {k: self(v) for k, v in value.items()}
        if isinstance(value, keras.Variable):
            return _array_value(np.asarray(value.numpy()))
        tf = self._tf
        if tf is not None:
            if isinstance(value, (tf.Tensor, tf.Variable)):
                try:
                    return _array_value(np.asarray(value.numpy()))
                except Exception:  # a graph tensor inside tf.function: shape and dtype only
                    shape = value.shape
                    dims = tuple(shape.as_list()) if shape.rank is not None else ()
                    return _symbolic_spec(value.dtype.name, dims)
            if isinstance(value, tf.DType):
                return DType(value.name)
        if isinstance(value, np.dtype) or (inspect.isclass(value) and issubclass(value, np.generic)):
            return DType(np.dtype(value).name)
        remembered = self.ctors.get(id(value)) if isinstance(value, keras.layers.Layer) else None
        if remembered is not None:
            api, args, kwargs = remembered
            return ObjectSpec(api, args, kwargs)
        public_class = self._public_class_names.get(type(value))
        if public_class is not None and hasattr(value, "get_config"):
            try:
                config = value.get_config()
            except Exception as exc:
                return Opaque(public_class, f"get_config failed: {type(exc).__name__}")
            return ObjectSpec(public_class, (), {str(k): self(v) for k, v in config.items()})
        if callable(value):
            return self._callable(value)
        return Opaque(f"{type(value).__module__}.{type(value).__qualname__}", "no neutral encoding")

    def _callable(self, func: Any) -> CallableRef | Opaque:
        name = self.ops_api_of.get(id(func)) or self._public_callable_names.get(id(func))
        if name is not None:
            return CallableRef(name)
        module = getattr(func, "__module__", None)
        qualname = getattr(func, "__qualname__", None)
        if module and qualname and "<" not in qualname:
            target: Any = sys.modules.get(module)
            for part in qualname.split("."):
                target = getattr(target, part, None)
            if target is func:
                return CallableRef(f"{module}.{qualname}")
        return Opaque(
            f"{type(func).__module__}.{type(func).__qualname__}",
            f"callable {qualname or func!r} is not importable",
        )


def _array_value(array: np.ndarray) -> np.ndarray | TensorSpec | Opaque:
    if array.dtype.name not in DTYPES and array.dtype.name != "bool":
        return Opaque(f"numpy.ndarray[{array.dtype}]", "dtype has no corpus encoding")
    exact_limit = EXACT_INT_ELEMENTS if array.dtype.kind in "biu" else EXACT_FLOAT_ELEMENTS
    if array.size <= exact_limit:
        return np.array(array, copy=True)
    data = np.ascontiguousarray(array)
    seed = zlib.crc32(data.tobytes()[: 1 << 16] + repr(array.shape).encode())
    finite = data[np.isfinite(data)] if data.dtype.kind in "fc" else data
    if data.dtype.kind == "c":
        finite = np.concatenate([finite.real, finite.imag])
    if finite.size == 0:
        low, high = -1.0, 1.0
    else:
        low, high = float(np.min(finite).astype(np.float64)), float(np.max(finite).astype(np.float64))
    return TensorSpec(dtype=dtype_name(array.dtype), shape=tuple(array.shape), seed=seed, low=low, high=high)


def _symbolic_spec(dtype: Any, shape: Any, seed: int = 0) -> TensorSpec | Opaque:
    name = str(getattr(dtype, "name", dtype))
    if name not in DTYPES:
        return Opaque(f"symbolic tensor[{name}]", "dtype has no corpus encoding")
    dims = tuple(None if d is None else int(d) for d in shape)
    if name == "bool" or name.startswith(("int", "uint")):
        return TensorSpec(dtype=name, shape=dims, seed=seed, low=0.0, high=2.0)
    return TensorSpec(dtype=name, shape=dims, seed=seed, low=-1.0, high=1.0)


@register_recorder
class KerasRecorder(BaseRecorder):
    library = "keras"

    def __init__(self, sink: Callable[[OperatorInstance], None] | None = None) -> None:
        super().__init__(sink)
        self._patched_inits: list[tuple[type, Any]] = []  # (class, original __init__ or None = inherited)
        self._original_layer_call: Any = None
        self._op_originals: dict[int, Any] = {}  # id(wrapper) -> original function
        self._op_wrappers: dict[int, Any] = {}  # id(original) -> wrapper
        self._module_patches: list[tuple[ModuleType, str, Any]] = []  # (module, attr, original)
        self._convert: _Converter | None = None
        self._ctors: dict[int, Ctor] = {}

    @functools.cache  # noqa: B019 - one recorder per harvest
    def library_version(self) -> str:
        import keras

        return str(keras.__version__)

    # ---- install / uninstall ------------------------------------------------------------------
    def _install(self) -> None:
        import keras

        ops_api_of = self._install_ops()
        self._convert = _Converter(ops_api_of, self._ctors)
        public_layers: dict[type, str] = {}  # aliases (Convolution2D = Conv2D): the class's own name wins
        for attr, cls in sorted(vars(keras.layers).items()):
            if attr.startswith("_") or attr in _SKIPPED_LAYER_CLASSES or not inspect.isclass(cls):
                continue
            if issubclass(cls, keras.layers.Layer) and (cls not in public_layers or attr == cls.__name__):
                public_layers[cls] = attr
        # Parents first, so an inherited __init__ resolves to the parent's wrapper's signature.
        for cls, attr in sorted(public_layers.items(), key=lambda item: (len(item[0].__mro__), item[1])):
            original = cls.__dict__.get("__init__")
            cls.__init__ = self._wrap_init(cls, f"keras.layers.{attr}", original)  # type: ignore[misc]
            self._patched_inits.append((cls, original))
        layer_base = keras.layers.Layer
        self._original_layer_call = layer_base.__dict__["__call__"]
        layer_base.__call__ = self._wrap_layer_call(self._original_layer_call)

    def _uninstall(self) -> None:
        import keras

        for cls, original in reversed(self._patched_inits):
            if original is None:
                del cls.__init__
            else:
                cls.__init__ = original
        self._patched_inits.clear()
        if self._original_layer_call is not None:
            keras.layers.Layer.__call__ = self._original_layer_call
            self._original_layer_call = None
        for module, attr, original in reversed(self._module_patches):
            setattr(module, attr, original)
        self._module_patches.clear()
        # Modules imported while recording may have bound a wrapper: give them the original too.
        for module in list(sys.modules.values()):
            namespace = getattr(module, "__dict__", None)
            if not isinstance(namespace, dict):
                continue
            for attr, value in list(namespace.items()):
                original = self._op_originals.get(id(value))
                if original is not None and value is self._op_wrappers.get(id(original)):
                    setattr(module, attr, original)
        self._op_originals.clear()
        self._op_wrappers.clear()

    # ---- keras.ops ----------------------------------------------------------------------------
    def _install_ops(self) -> dict[int, str]:
        api_of: dict[int, str] = {}
        originals: dict[int, Any] = {}
        for ns_name in _OPS_NAMESPACES:
            ns = importlib.import_module(ns_name)
            for attr, func in sorted(vars(ns).items()):
                if (
                    attr.startswith("_")
                    or attr in _SKIPPED_OPS
                    or not inspect.isfunction(func)
                    or id(func) in api_of
                ):
                    continue
                api_of[id(func)] = f"{ns_name}.{attr}"
                originals[id(func)] = func
        for key, func in originals.items():
            wrapper = self._wrap_op(func, api_of[key])
            self._op_wrappers[key] = wrapper
            self._op_originals[id(wrapper)] = func
        for module in list(sys.modules.values()):
            namespace = getattr(module, "__dict__", None)
            if not isinstance(namespace, dict):
                continue
            for attr, value in list(namespace.items()):
                wrapper = self._op_wrappers.get(id(value))
                if wrapper is not None and originals[id(value)] is value:
                    setattr(module, attr, wrapper)
                    self._module_patches.append((module, attr, value))
        return {**api_of, **{id(w): api_of[k] for k, w in self._op_wrappers.items()}}

    def _wrap_op(self, func: Any, api: str) -> Any:
        recorder = self

        @functools.wraps(func)
        def recorded_op(*args: Any, **kwargs: Any) -> Any:
            if not recorder.recording or _is_internal_module(
                _caller_module(sys._getframe(1)), allow_testing=False
            ):
                with recorder.nested():
                    return func(*args, **kwargs)
            with recorder.nested():
                neutral = recorder._to_neutral((args, kwargs), api)
                result = func(*args, **kwargs)
            if neutral is not None:
                recorder.emit(recorder._instance(api, InstanceKind.FUNCTION, neutral[0], neutral[1], (), {}))
            return result

        return recorded_op

    # ---- keras.layers -------------------------------------------------------------------------
    def _wrap_init(self, cls: type, api: str, original: Any) -> Any:
        recorder = self

        resolved_init = original if original is not None else cls.__init__  # type: ignore[misc]  # inherited

        def recorded_init(self: Any, *args: Any, **kwargs: Any) -> None:
            layer = self
            top_level = (
                recorder.recording
                and type(layer) is cls
                and not _is_internal_module(_caller_module(sys._getframe(1)), allow_testing=True)
            )
            with recorder.nested():
                neutral = recorder._to_neutral((args, kwargs), api) if top_level else None
                if original is not None:
                    original(layer, *args, **kwargs)
                else:
                    super(cls, layer).__init__(*args, **kwargs)  # type: ignore[arg-type]
            if neutral is not None:
                recorder._remember(layer, (api, tuple(neutral[0]), dict(neutral[1])))

        # Operation.__new__ builds the auto-config from inspect.signature/getfullargspec of
        # cls.__init__: both honour __signature__, so the wrapper must look exactly like the
        # original (no __wrapped__: getfullargspec would not follow it and the two would disagree).
        recorded_init.__signature__ = inspect.signature(resolved_init)  # type: ignore[attr-defined]
        recorded_init.__name__ = "__init__"
        recorded_init.__qualname__ = f"{cls.__qualname__}.__init__"
        recorded_init.__doc__ = resolved_init.__doc__
        return recorded_init

    def _wrap_layer_call(self, original_call: Any) -> Any:
        recorder = self

        @functools.wraps(original_call)
        def recorded_call(layer: Any, *args: Any, **kwargs: Any) -> Any:
            remembered = recorder._ctors.get(id(layer))
            if remembered is None or not recorder.recording:
                with recorder.nested():
                    return original_call(layer, *args, **kwargs)
            frame: FrameType | None = sys._getframe(1)
            while (
                frame is not None
                and frame.f_code.co_name == "__call__"
                and frame.f_locals.get("self") is layer
            ):
                frame = frame.f_back  # a subclass's own __call__ (DataLayer) delegating to Layer.__call__
            api, ctor_args, ctor_kwargs = remembered
            with recorder.nested():
                internal = frame is None or _is_internal_module(_caller_module(frame), allow_testing=True)
                neutral = None if internal else recorder._to_neutral((args, kwargs), api)
                result = original_call(layer, *args, **kwargs)
            if neutral is not None:
                call_args, call_kwargs = neutral
                extra = {"call_kwargs": call_kwargs} if call_kwargs else {}
                recorder.emit(
                    recorder._instance(
                        api, InstanceKind.MODULE, ctor_args, ctor_kwargs, tuple(call_args), extra
                    )
                )
            return result

        return recorded_call

    # ---- helpers ------------------------------------------------------------------------------
    def _remember(self, layer: Any, ctor: Ctor) -> None:
        """Keep the constructor call outside the layer: an attribute on it would show in ``dir()``,
        and Keras's serialization round-trip test compares ``dir()`` of a layer and its copy."""
        key = id(layer)
        self._ctors[key] = ctor
        weakref.finalize(layer, self._ctors.pop, key, None)

    def _to_neutral(
        self, call: tuple[tuple[Any, ...], dict[str, Any]], api: str
    ) -> tuple[list[Any], dict[str, Any]] | None:
        assert self._convert is not None
        try:
            args, kwargs = call
            return [self._convert(a) for a in args], {str(k): self._convert(v) for k, v in kwargs.items()}
        except Exception as exc:  # never break the suite under test
            self.note_error(f"{api}: {type(exc).__name__}: {str(exc)[:80]}")
            return None

    def _instance(
        self,
        api: str,
        kind: InstanceKind,
        args: Any,
        kwargs: dict[str, Any],
        inputs: tuple[Any, ...],
        extra: dict[str, Any],
    ) -> OperatorInstance:
        return OperatorInstance(
            library="keras",
            api=api,
            kind=kind,
            args=tuple(args),
            kwargs=dict(kwargs),
            inputs=inputs,
            extra=extra,
            library_version=self.library_version(),
            source=self.source,
        )


def _caller_module(frame: FrameType | None) -> str:
    if frame is None:
        return ""
    return str(frame.f_globals.get("__name__", ""))


def to_neutral(value: Any) -> Any:
    """Convert one Keras/TF/numpy value the way the recorder does (for templates and tests)."""
    return _Converter({})(value)
