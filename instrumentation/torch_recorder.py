"""PyTorch recorder: every top-level operator call becomes an ``OperatorInstance``.

Three hooks, all removed by ``uninstall``:

* a ``TorchFunctionMode`` sees every public function and ``Tensor`` method call. The function object
  is mapped to a canonical public name through a table built once by scanning ``torch.nn.functional``,
  ``torch.linalg``, ``torch.fft``, ``torch.special``, ``torch`` and ``torch.Tensor`` (the more specific
  namespace wins: ``torch.conv2d is F.conv2d`` is recorded as ``torch.nn.functional.conv2d``). A call
  is recorded when its name is public (operator dunders such as ``__add__`` and ``__getitem__``
  included), not in a small plumbing denylist, and it returns a tensor or a tuple/list of tensors.
  In-place operators are kept: their arguments are converted *before* the call, so the recorded
  inputs are the values the operator saw.
* the ``__init__`` of every class in ``torch.nn.modules`` is wrapped to remember the constructor call
  on the object (outermost construction only: the ``Linear`` built inside
  ``TransformerEncoderLayer.__init__`` is not remembered).
* a global forward pre-hook / forward hook records (constructor, forward inputs) for top-level calls
  of remembered modules and suppresses recording of everything the forward calls.

Only top-level calls are recorded. Calls made inside a recorded function are invisible anyway
(PyTorch pops the mode while its handler runs); module forwards and constructors use the
``BaseRecorder.nested`` depth guard.

Only calls of the test are recorded, not those of the testing machinery: the caller (the first
frame outside torch's own implementation) must not be an assertion, comparison, gradient-check or
tensor-making helper of a testing library (``assertEqual`` -> ``torch.isclose``/``copy_``,
``gradcheck`` -> its perturbations, ``make_tensor``). Helpers of a suite, OpInfo's operator lambdas
and Opera's own sources are callers like the test itself.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import inspect
import pkgutil
import sys
import zlib
from types import FrameType
from typing import Any

import ml_dtypes
import numpy as np
import torch
from torch import nn
from torch.overrides import TorchFunctionMode

from opera.instrumentation import BaseRecorder, register_recorder
from opera.model import InstanceKind, OperatorInstance
from opera.values import CallableRef, DType, EnumValue, ObjectSpec, Opaque, TensorSpec

__all__ = ["TorchRecorder", "TorchValueConverter", "operator_names", "torch_module_classes"]

# Exact-value thresholds: index tensors, masks and shapes are meaningful, so integer/bool tensors
# are kept exactly up to this many elements; float/complex tensors up to a smaller size (1024 keeps
# ~96% of the OpInfo float tensors exact for ~5 MB of corpus; exact values keep domain-sensitive
# samples such as log of a negative number meaningful).
EXACT_INT_ELEMENTS = 4096
EXACT_FLOAT_ELEMENTS = 1024
# A large float tensor holding NaN/Inf is still kept exactly up to this size (the specials matter).
EXACT_NONFINITE_ELEMENTS = 4096

# Names (last component) that are plumbing, introspection or data construction, not operators.
def _words(text: str) -> list[str]:
    return text.split()


DENYLIST = frozenset(
    _words(
        """
    size dim numel item tolist stride data_ptr to cpu cuda detach detach_ contiguous requires_grad_
    numpy type element_size nelement ndimension storage untyped_storage storage_offset backward
    register_hook register_post_accumulate_grad_hook retain_grad share_memory_ pin_memory get_device
    dim_order has_names align_to refine_names rename rename_ as_subclass apply_ map_ map2_ set_
    resize_ resize_as_ record_stream new_empty new_empty_strided empty empty_like empty_strided
    empty_permuted tensor as_tensor asarray from_numpy frombuffer from_dlpack new_tensor
    sparse_coo_tensor sparse_csr_tensor sparse_csc_tensor sparse_bsr_tensor sparse_bsc_tensor
    sparse_compressed_tensor to_dlpack module_load cpu_ ipu xpu mps mtia hpu to_mkldnn
    __repr__ __format__ __len__ __bool__ __iter__ __hash__ __array__ __array_wrap__ __reduce_ex__
    __deepcopy__ __setstate__ __getstate__ __dlpack__ __dlpack_device__ __contains__ __index__
    __int__ __float__ __complex__ __long__ __nonzero__ __setitem__ __reversed__ __dir__ __sizeof__
    __init__ __new__ __init_subclass__ __subclasshook__ __torch_function__ __torch_dispatch__
    __getattribute__ __getattr__ __setattr__ __delattr__ __reduce__ __class__ __str__ __copy__
    __array_priority__ __cuda_array_interface__ __weakref__
    """
    )
)

_NAMESPACES = ("torch.nn.functional", "torch.linalg", "torch.fft", "torch.special", "torch", "torch.Tensor")

_names_cache: dict[int, str] | None = None
_keepalive: list[Any] = []


def _recordable_name(name: str) -> bool:
    if name in DENYLIST or name.startswith("is_"):
        return False
    if name.startswith("__") and name.endswith("__"):
        return True  # operator dunders (__add__, __getitem__, ...); plumbing ones are denylisted
    return not name.startswith("_")


def operator_names() -> dict[int, str]:
    """``id(function object) -> canonical public name`` for every recordable torch callable."""
    global _names_cache
    if _names_cache is not None:
        return _names_cache
    table: dict[int, str] = {}
    for namespace in _NAMESPACES:
        owner = torch.Tensor if namespace == "torch.Tensor" else importlib.import_module(namespace)
        # Plain names first: ``Tensor.__add__`` and ``Tensor.add`` may be one object.
        for attr in sorted(dir(owner), key=lambda n: (n.startswith("__"), n)):
            if not _recordable_name(attr):
                continue
            try:
                obj = getattr(owner, attr)
            except Exception:
                continue
            if isinstance(obj, type) or inspect.ismodule(obj) or not callable(obj):
                continue
            if id(obj) not in table:
                table[id(obj)] = f"{namespace}.{attr}"
                _keepalive.append(obj)  # the ids stay valid only while the objects live
    _names_cache = table
    return table


_classes_cache: dict[type, str] | None = None


def torch_module_classes() -> dict[type, str]:
    """Every ``nn.Module`` class defined under ``torch.nn.modules`` -> public name (or "" if none)."""
    global _classes_cache
    if _classes_cache is not None:
        return _classes_cache
    found: dict[type, str] = {}
    package = importlib.import_module("torch.nn.modules")
    modules = [package] + [
        importlib.import_module(f"torch.nn.modules.{info.name}") for info in pkgutil.iter_modules(package.__path__)
    ]
    for module in modules:
        for obj in vars(module).values():
            if isinstance(obj, type) and issubclass(obj, nn.Module) and obj.__module__.startswith("torch.nn.modules"):
                name = obj.__name__
                found[obj] = f"torch.nn.{name}" if getattr(nn, name, None) is obj else ""
    _classes_cache = found
    return found


_TORCH_DTYPE_NAMES: dict[torch.dtype, str] = {
    torch.bool: "bool",
    torch.int8: "int8",
    torch.int16: "int16",
    torch.int32: "int32",
    torch.int64: "int64",
    torch.uint8: "uint8",
    torch.uint16: "uint16",
    torch.uint32: "uint32",
    torch.uint64: "uint64",
    torch.float16: "float16",
    torch.bfloat16: "bfloat16",
    torch.float32: "float32",
    torch.float64: "float64",
    torch.complex64: "complex64",
    torch.complex128: "complex128",
    torch.float8_e4m3fn: "float8_e4m3fn",
    torch.float8_e5m2: "float8_e5m2",
}
# Dtypes numpy cannot hold directly: read their bits through a same-width integer view.
_BIT_VIEWS: dict[torch.dtype, tuple[torch.dtype, Any]] = {
    torch.bfloat16: (torch.int16, ml_dtypes.bfloat16),
    torch.float8_e4m3fn: (torch.int8, ml_dtypes.float8_e4m3fn),
    torch.float8_e5m2: (torch.int8, ml_dtypes.float8_e5m2),
    torch.uint16: (torch.int16, np.uint16),
    torch.uint32: (torch.int32, np.uint32),
    torch.uint64: (torch.int64, np.uint64),
}


def _qualname(obj: Any) -> str:
    return f"{type(obj).__module__}.{type(obj).__qualname__}"


class TorchValueConverter:
    """torch objects -> neutral values (``opera.values``); problems are counted via ``note``."""

    def __init__(self, names: dict[int, str], note: Any = None) -> None:
        self.names = names
        self.note = note or (lambda reason: None)

    def convert(self, value: Any) -> Any:
        if isinstance(value, torch.Tensor):
            return self.tensor(value)
        if value is None or isinstance(value, (bool, int, float, str, complex)):
            return value
        if isinstance(value, torch.Size):
            return tuple(int(d) for d in value)
        if isinstance(value, list):
            return [self.convert(v) for v in value]
        if isinstance(value, tuple):
            return tuple(self.convert(v) for v in value)
        if isinstance(value, dict):
            return {self.convert(k): self.convert(v) for k, v in value.items()}
        if isinstance(value, torch.dtype):
            return DType(str(value).removeprefix("torch."))
        if isinstance(value, (torch.memory_format, torch.layout)):
            return EnumValue(type=_qualname(value), name=str(value).removeprefix("torch."))
        if isinstance(value, torch.device):
            return str(value)
        if isinstance(value, slice):
            return slice(self.convert(value.start), self.convert(value.stop), self.convert(value.step))
        if value is Ellipsis:
            return value
        if isinstance(value, np.generic):
            return value
        if isinstance(value, np.ndarray):
            return value.copy() if value.dtype.kind in "biufc" else Opaque(_qualname(value), f"numpy dtype {value.dtype}")
        if isinstance(value, nn.Module):
            ctor = value.__dict__.get("_opera_ctor")
            if ctor is None:
                return Opaque(_qualname(value), "module whose constructor call was not recorded")
            return ObjectSpec(api=ctor[0], args=ctor[1], kwargs=ctor[2])
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            return self.dataclass_spec(value)
        if callable(value):
            return self.callable_ref(value)
        return Opaque(_qualname(value), "no neutral encoding")

    def callable_ref(self, func: Any) -> CallableRef | Opaque:
        name = self.names.get(id(func))
        if name is not None:
            return CallableRef(name)
        module, qualname = getattr(func, "__module__", None), getattr(func, "__qualname__", None)
        if module and qualname and "<" not in qualname:
            try:
                obj: Any = importlib.import_module(module)
                for part in qualname.split("."):
                    obj = getattr(obj, part)
                if obj is func:
                    return CallableRef(f"{module}.{qualname}")
            except Exception:
                pass
        return Opaque(_qualname(func), "callable not importable by name")

    def dataclass_spec(self, value: Any) -> ObjectSpec | Opaque:
        """An options dataclass (``LinearCrossEntropyOptions``) rebuilt from its init fields."""
        ref = self.callable_ref(type(value))
        if isinstance(ref, Opaque):
            return Opaque(_qualname(value), "dataclass not importable by name")
        fields = {f.name: self.convert(getattr(value, f.name)) for f in dataclasses.fields(value) if f.init}
        return ObjectSpec(api=ref.qualname, kwargs=fields)

    def tensor(self, tensor: torch.Tensor) -> Any:
        dtype_name = _TORCH_DTYPE_NAMES.get(tensor.dtype)
        kind = f"torch.Tensor[{tensor.dtype}]"
        if tensor.layout != torch.strided:
            return Opaque(kind, f"{tensor.layout} layout")
        if tensor.is_quantized or tensor.is_meta or tensor.is_nested or tensor.device.type != "cpu":
            return Opaque(kind, f"quantized/meta/nested/device {tensor.device.type} tensor")
        if dtype_name is None:
            return Opaque(kind, f"dtype {tensor.dtype} has no corpus encoding")
        array = self._numpy(tensor)
        count = array.size
        if array.dtype.kind in "biu":
            if count <= EXACT_INT_ELEMENTS:
                return array
            return TensorSpec(dtype_name, tuple(array.shape), self._seed(array), *self._range(array))
        if count <= EXACT_FLOAT_ELEMENTS:
            return array
        wide = array.astype(np.complex128 if array.dtype.kind == "c" else np.float64)
        parts = np.concatenate([wide.real.ravel(), wide.imag.ravel()]) if array.dtype.kind == "c" else wide.ravel()
        finite = np.isfinite(parts)
        if not finite.all():
            if count <= EXACT_NONFINITE_ELEMENTS:
                return array
            self.note(f"large {dtype_name} tensor with NaN/Inf stored as a value range (specials lost)")
            parts = parts[finite]
        low, high = (float(parts.min()), float(parts.max())) if parts.size else (0.0, 0.0)
        return TensorSpec(dtype_name, tuple(array.shape), self._seed(array), low, high)

    @staticmethod
    def _numpy(tensor: torch.Tensor) -> np.ndarray:
        tensor = tensor.detach()
        if tensor.is_conj():
            tensor = tensor.resolve_conj()
        if tensor.is_neg():
            tensor = tensor.resolve_neg()
        view = _BIT_VIEWS.get(tensor.dtype)
        if view is not None:
            bits, numpy_dtype = view
            return tensor.contiguous().view(bits).numpy().copy().view(numpy_dtype)
        return tensor.numpy().copy()

    @staticmethod
    def _seed(array: np.ndarray) -> int:
        return zlib.crc32(np.ascontiguousarray(array).tobytes())

    @staticmethod
    def _range(array: np.ndarray) -> tuple[float, float]:
        if array.size == 0:
            return 0.0, 0.0
        return float(array.min()), float(array.max())


# Modules of testing libraries whose torch calls are machinery, not the test (module-name prefixes).
TEST_MACHINERY = (
    "torch.testing._comparison",  # assertEqual / assert_close: isclose, copy_, __getitem__, ...
    "torch.testing._internal.common_utils",  # TestCase.assertEqual and its helpers
    "torch.testing._creation",  # make_tensor
    "torch.autograd.gradcheck",  # gradcheck / gradgradcheck
    "torch.testing._internal.common_device_type",  # device/dtype parametrization
    "unittest",
    "_pytest",
    "pytest",
    "numpy.testing",
    "hypothesis",
)


def _in(name: str, prefixes: tuple[str, ...]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def called_by_test_machinery(frame: FrameType | None) -> bool:
    """Whether the first frame above ``frame`` that is not torch's own implementation (torch's
    modules other than ``torch.testing``) belongs to a testing library's helpers."""
    while frame is not None:
        name = str(frame.f_globals.get("__name__", ""))
        if _in(name, TEST_MACHINERY):
            return True
        if not (_in(name, ("torch",)) and not _in(name, ("torch.testing",))):
            return False
        frame = frame.f_back
    return False


def _returns_tensors(result: Any) -> bool:
    """A tensor, or a (nested) tuple/list of tensors and Nones holding at least one tensor."""
    if isinstance(result, torch.Tensor):
        return True
    if isinstance(result, (tuple, list)) and result:
        seen = False
        for item in result:
            if item is None:
                continue
            if not _returns_tensors(item):
                return False
            seen = True
        return seen
    return False


class _RecordingMode(TorchFunctionMode):
    def __init__(self, recorder: TorchRecorder) -> None:
        super().__init__()
        self.recorder = recorder

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        rec = self.recorder
        name = rec.names.get(id(func))
        if name is None or not rec.recording or called_by_test_machinery(sys._getframe(1)):
            return func(*args, **kwargs)
        with rec.nested():
            try:
                # Before the call: an in-place operator (add_, relu(inplace=True)) mutates its inputs.
                call_args = tuple(rec.converter.convert(a) for a in args)
                call_kwargs = {k: rec.converter.convert(v) for k, v in kwargs.items() if k != "out"}
            except Exception as exc:
                rec.note_error(f"{name}: argument conversion failed: {type(exc).__name__}")
                call_args = None
            result = func(*args, **kwargs)
            if call_args is not None and _returns_tensors(result):
                rec.emit(
                    OperatorInstance(
                        library="torch",
                        api=name,
                        kind=InstanceKind.FUNCTION,
                        args=call_args,
                        kwargs=call_kwargs,
                        library_version=torch.__version__,
                        source=rec.source,
                    )
                )
        return result


@register_recorder
class TorchRecorder(BaseRecorder):
    """Records top-level torch function, Tensor-method and ``torch.nn`` module calls."""

    library = "torch"

    def __init__(self, sink: Any = None) -> None:
        super().__init__(sink)
        self.names = operator_names()
        self.converter = TorchValueConverter(self.names, self.note_error)
        self._mode: _RecordingMode | None = None
        self._patched_inits: dict[type, Any] = {}
        self._hook_handles: list[Any] = []

    def library_version(self) -> str:
        return torch.__version__

    # ---- install / uninstall ------------------------------------------------------------------
    def _install(self) -> None:
        classes = torch_module_classes()
        for cls in classes:
            original = cls.__dict__.get("__init__")
            if original is None:
                continue
            self._patched_inits[cls] = original
            cls.__init__ = self._wrap_init(original, classes)  # type: ignore[misc]
        self._hook_handles = [
            nn.modules.module.register_module_forward_pre_hook(self._forward_pre_hook),
            nn.modules.module.register_module_forward_hook(self._forward_hook, with_kwargs=True, always_call=True),
        ]
        self._mode = _RecordingMode(self)
        self._mode.__enter__()

    def _uninstall(self) -> None:
        if self._mode is not None:
            self._mode.__exit__(None, None, None)
            self._mode = None
        for handle in self._hook_handles:
            handle.remove()
            # torch's handle forgets this table (register_module_forward_hook passes only the
            # always-called one as extra_dict): remove the entry ourselves.
            nn.modules.module._global_forward_hooks_with_kwargs.pop(handle.id, None)
        self._hook_handles = []
        for cls, original in self._patched_inits.items():
            cls.__init__ = original  # type: ignore[misc]
        self._patched_inits = {}
        self._local.modules = []

    # ---- module constructors ------------------------------------------------------------------
    def _wrap_init(self, original: Any, classes: dict[type, str]) -> Any:
        recorder = self

        @functools.wraps(original)
        def __init__(module: nn.Module, *args: Any, **kwargs: Any) -> None:
            # Constructors are remembered whenever they are outermost, even while recording is
            # paused: a module built while a sample is generated (the distance function handed to
            # triplet_margin_with_distance_loss) must still become an ObjectSpec.
            outer = getattr(recorder._local, "ctor_depth", 0)
            if not recorder.installed or outer:
                original(module, *args, **kwargs)
                return
            recorder._local.ctor_depth = 1
            try:
                with recorder.nested():  # nothing a constructor calls is a top-level call
                    original(module, *args, **kwargs)
            finally:
                recorder._local.ctor_depth = 0
            with recorder.nested():
                api = classes.get(type(module), "")
                if not api:
                    return  # a user subclass: its forward is not a torch operator
                try:
                    ctor_args = tuple(recorder.converter.convert(a) for a in args)
                    ctor_kwargs = {k: recorder.converter.convert(v) for k, v in kwargs.items()}
                except Exception as exc:
                    recorder.note_error(f"{api} constructor: argument conversion failed: {type(exc).__name__}")
                    return
                module.__dict__["_opera_ctor"] = (api, ctor_args, ctor_kwargs)

        return __init__

    # ---- module calls -------------------------------------------------------------------------
    def _module_stack(self) -> list[Any]:
        stack = getattr(self._local, "modules", None)
        if stack is None:
            stack = self._local.modules = []
        return stack

    def _forward_pre_hook(self, module: nn.Module, args: tuple[Any, ...]) -> None:
        if not self.recording:
            return
        ctor = module.__dict__.get("_opera_ctor")
        if ctor is None:
            return  # a user module (its torch calls are top level) or one built before install
        with self.nested():
            try:
                inputs = tuple(self.converter.convert(a) for a in args)
            except Exception as exc:
                self.note_error(f"{ctor[0]} forward: input conversion failed: {type(exc).__name__}")
                inputs = None
        self._module_stack().append((module, ctor, inputs))
        self._local.depth = self.depth + 1  # everything the forward calls is internal

    def _forward_hook(self, module: nn.Module, args: tuple[Any, ...], *rest: Any) -> None:
        stack = self._module_stack()
        if not stack or stack[-1][0] is not module:
            return
        _, ctor, inputs = stack.pop()
        self._local.depth -= 1
        if len(rest) != 2 or inputs is None or not self.installed:
            return  # with_kwargs hooks get (kwargs, result); the exception path passes only result
        forward_kwargs, _result = rest
        with self.nested():
            try:
                extra = {"forward_kwargs": {k: self.converter.convert(v) for k, v in forward_kwargs.items()}}
            except Exception as exc:
                self.note_error(f"{ctor[0]} forward: keyword conversion failed: {type(exc).__name__}")
                return
            api, ctor_args, ctor_kwargs = ctor
            self.emit(
                OperatorInstance(
                    library="torch",
                    api=api,
                    kind=InstanceKind.MODULE,
                    args=ctor_args,
                    kwargs=ctor_kwargs,
                    inputs=inputs,
                    extra=extra if forward_kwargs else {},
                    library_version=torch.__version__,
                    source=self.source,
                )
            )
