"""PyTorch template: an ``OperatorInstance`` rebuilt as an ``nn.Module`` plus numpy inputs.

``module`` instances construct ``api(*args, **kwargs)`` under ``torch.manual_seed(seed)`` (so the
weights are reproducible) and feed it the recorded forward inputs. ``function`` instances
(``torch.add``, ``torch.nn.functional.gelu``, ``torch.Tensor.add``, ...) become a small wrapper
module whose ``forward`` takes the call's tensor arguments (top-level positional arguments, keyword
arguments and tensors directly inside top-level lists/tuples) as inputs and passes every other
argument as a constant. That keeps the tensors as graph inputs for ``torch.export`` and the
compilers behind it, while shapes, axes, dtypes, ... stay constants as in the original call.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from typing import Any

import ml_dtypes
import numpy as np
import torch
from torch import nn

from opera.model import InstanceKind, OperatorInstance
from opera.templates import SingleOpModel, Template
from opera.values import CallableRef, DType, EnumValue, ObjectSpec, Opaque, TensorSpec

__all__ = ["TorchTemplate", "numpy_to_torch", "resolve_api", "torch_inputs", "torch_to_numpy"]

# numpy dtypes torch cannot take through ``from_numpy``: stored as same-width integer bits.
_BIT_VIEWS: dict[np.dtype, tuple[Any, torch.dtype]] = {
    np.dtype(ml_dtypes.bfloat16): (np.uint16, torch.bfloat16),
    np.dtype(ml_dtypes.float8_e4m3fn): (np.uint8, torch.float8_e4m3fn),
    np.dtype(ml_dtypes.float8_e5m2): (np.uint8, torch.float8_e5m2),
}

_resolved: dict[str, Any] = {}


def resolve_api(name: str) -> Any:
    """``"torch.nn.functional.gelu"`` -> the object: import the longest module prefix, getattr the rest."""
    cached = _resolved.get(name)
    if cached is not None:
        return cached
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj: Any = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attr in parts[cut:]:
            obj = getattr(obj, attr)
        _resolved[name] = obj
        return obj
    raise ImportError(f"cannot resolve {name!r}")


def numpy_to_torch(array: np.ndarray) -> torch.Tensor:
    """A fresh (copied) tensor holding ``array``; bfloat16/float8 go through their bit patterns."""
    array = np.array(array, order="C", copy=True)
    view = _BIT_VIEWS.get(array.dtype)
    if view is not None:
        bits, torch_dtype = view
        return torch.from_numpy(array.view(bits)).view(torch_dtype)
    return torch.from_numpy(array)


def torch_to_numpy(tensor: torch.Tensor) -> np.ndarray:
    """A tensor's values as numpy (bfloat16/float8 as float32: numpy cannot compute in them)."""
    tensor = tensor.detach()
    if tensor.layout != torch.strided:
        tensor = tensor.to_dense()
    tensor = tensor.cpu().resolve_conj().resolve_neg()
    if tensor.dtype in (torch.bfloat16, torch.float8_e4m3fn, torch.float8_e5m2, torch.float8_e4m3fnuz, torch.float8_e5m2fnuz):
        tensor = tensor.float()
    elif tensor.dtype == torch.complex32:
        tensor = tensor.to(torch.complex64)
    return tensor.numpy().copy()


def _to_torch(value: Any) -> Any:
    """Neutral value -> the torch object the call expects (recursively)."""
    if isinstance(value, np.ndarray):
        return numpy_to_torch(value)
    if isinstance(value, TensorSpec):
        return numpy_to_torch(value.materialize())
    if isinstance(value, DType):
        dtype = getattr(torch, value.name, None)
        if not isinstance(dtype, torch.dtype):
            raise ValueError(f"torch has no dtype {value.name!r}")
        return dtype
    if isinstance(value, EnumValue):
        return getattr(torch, value.name)
    if isinstance(value, CallableRef):
        return resolve_api(value.qualname)
    if isinstance(value, ObjectSpec):
        cls = resolve_api(value.api)
        return cls(*[_to_torch(a) for a in value.args], **{k: _to_torch(v) for k, v in value.kwargs.items()})
    if isinstance(value, Opaque):
        raise ValueError(f"opaque value ({value.type}: {value.reason}) cannot be rebuilt")
    if isinstance(value, list):
        return [_to_torch(v) for v in value]
    if isinstance(value, tuple):
        return tuple(_to_torch(v) for v in value)
    if isinstance(value, dict):
        return {k: _to_torch(v) for k, v in value.items()}
    return value


def _is_tensor_value(value: Any) -> bool:
    return isinstance(value, (np.ndarray, TensorSpec))


class _Slot:
    """Placeholder in an argument template for forward input number ``index``."""

    __slots__ = ("index",)

    def __init__(self, index: int) -> None:
        self.index = index

    def __repr__(self) -> str:
        return f"<input {self.index}>"


def _fill(template: Any, inputs: Sequence[torch.Tensor]) -> Any:
    if isinstance(template, _Slot):
        return inputs[template.index]
    if isinstance(template, list):
        return [_fill(t, inputs) for t in template]
    if isinstance(template, tuple):
        return tuple(_fill(t, inputs) for t in template)
    return template


class CallWithConstants(nn.Module):
    """``forward(*tensors)`` = ``target(*args, **kwargs)`` with the tensors put back in their slots.

    ``target`` is a torch function (``torch.add``, ``torch.Tensor.add``) or a submodule; the
    argument templates hold constants and ``_Slot`` placeholders.
    """

    def __init__(self, target: Any, args_template: tuple[Any, ...], kwargs_template: dict[str, Any], api: str) -> None:
        super().__init__()
        if isinstance(target, nn.Module):
            self.op = target
            self._function = None
        else:
            self._function = target
        self._args_template = args_template
        self._kwargs_template = kwargs_template
        self.api = api

    def forward(self, *inputs: torch.Tensor) -> Any:
        target = self.op if self._function is None else self._function
        args = _fill(self._args_template, inputs)
        kwargs = {k: _fill(v, inputs) for k, v in self._kwargs_template.items()}
        return target(*args, **kwargs)

    def extra_repr(self) -> str:
        return f"api={self.api}"

    def call_spec(self) -> dict[str, Any]:
        """The call as plain data, for a script that has torch but not Opera: ``target`` is the
        submodule, or ``{"__opera_api__": api}`` for a function (torch functions do not all pickle:
        ``torch.unique`` is a local closure); each input slot in ``args``/``kwargs`` is
        ``{"__opera_input__": k}``."""

        def plain(value: Any) -> Any:
            if isinstance(value, _Slot):
                return {"__opera_input__": value.index}
            if isinstance(value, list):
                return [plain(v) for v in value]
            if isinstance(value, tuple):
                return tuple(plain(v) for v in value)
            return value

        return {
            "target": self.op if self._function is None else {"__opera_api__": self.api},
            "args": plain(self._args_template),
            "kwargs": {k: plain(v) for k, v in self._kwargs_template.items()},
        }


def _split_tensors(
    args: Sequence[Any], kwargs: dict[str, Any], inputs: list[np.ndarray]
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """Replace top-level tensors (and tensors directly inside top-level lists/tuples) by slots.

    The tensors are appended to ``inputs`` (as numpy) in forward order; everything else is turned
    into its torch constant.
    """

    def take(value: Any) -> Any:
        if _is_tensor_value(value):
            inputs.append(value.materialize() if isinstance(value, TensorSpec) else np.asarray(value))
            return _Slot(len(inputs) - 1)
        return _to_torch(value)

    def top(value: Any) -> Any:
        if isinstance(value, list):
            return [take(v) for v in value]
        if isinstance(value, tuple):
            return tuple(take(v) for v in value)
        return take(value)

    args_template = tuple(top(a) for a in args)
    kwargs_template = {k: top(v) for k, v in kwargs.items()}
    return args_template, kwargs_template


class TorchTemplate(Template):
    library = "torch"

    def build(self, inst: OperatorInstance, seed: int = 0) -> SingleOpModel:
        target = resolve_api(inst.api)
        inputs: list[np.ndarray] = []
        if inst.kind == InstanceKind.MODULE:
            torch.manual_seed(seed)
            module = target(*[_to_torch(a) for a in inst.args], **{k: _to_torch(v) for k, v in inst.kwargs.items()})
            if not isinstance(module, nn.Module):
                raise TypeError(f"{inst.api} did not construct an nn.Module")
            module.eval()
            forward_kwargs = inst.extra.get("forward_kwargs") or {}
            if all(_is_tensor_value(x) for x in inst.inputs) and not forward_kwargs:
                model: nn.Module = module
                inputs = [x.materialize() if isinstance(x, TensorSpec) else np.asarray(x) for x in inst.inputs]
            else:
                args_template, kwargs_template = _split_tensors(inst.inputs, dict(forward_kwargs), inputs)
                model = CallWithConstants(module, args_template, kwargs_template, inst.api).eval()
        elif inst.kind == InstanceKind.FUNCTION:
            if isinstance(target, type) and issubclass(target, nn.Module):
                raise TypeError(f"{inst.api} is a module class, not a function")
            args_template, kwargs_template = _split_tensors(inst.args, dict(inst.kwargs), inputs)
            model = CallWithConstants(target, args_template, kwargs_template, inst.api).eval()
        else:
            raise ValueError(f"the torch template cannot build {inst.kind.value!r} instances")
        return SingleOpModel(
            instance=inst,
            model=model,
            inputs=inputs,
            input_names=[f"input_{i}" for i in range(len(inputs))],
            details={"seed": seed},
        )

    def reference(self, built: SingleOpModel) -> list[np.ndarray]:
        with torch.no_grad():
            result = built.model(*torch_inputs(built))
        return flatten_outputs(result)


def torch_inputs(built: SingleOpModel) -> tuple[torch.Tensor, ...]:
    """Fresh torch tensors for ``built.inputs`` (copies: in-place operators must not touch them)."""
    return tuple(numpy_to_torch(np.asarray(x)) for x in built.inputs)


def flatten_outputs(result: Any) -> list[np.ndarray]:
    """Tensor / tuple / list / ``torch.return_types`` / dict / scalar -> list of numpy arrays."""
    out: list[np.ndarray] = []

    def walk(value: Any) -> None:
        if isinstance(value, torch.Tensor):
            out.append(torch_to_numpy(value))
        elif isinstance(value, (tuple, list)):
            for item in value:
                walk(item)
        elif isinstance(value, dict):
            for item in value.values():
                walk(item)
        elif isinstance(value, (bool, int, float, complex, np.generic)):
            out.append(np.asarray(value))
        elif isinstance(value, np.ndarray):
            out.append(value)
        elif value is None:
            return
        else:
            raise TypeError(f"cannot compare an output of type {type(value).__qualname__}")

    walk(result)
    return out
