"""PyTorch template: an ``OperatorInstance`` rebuilt as an ``nn.Module`` plus numpy inputs.

``module`` instances construct ``api(*args, **kwargs)`` under ``torch.manual_seed(seed)`` (so the
weights are reproducible) and feed it the recorded forward inputs. ``function`` instances
(``torch.add``, ``torch.nn.functional.conv2d``, ``torch.Tensor.add``, ...) become a small wrapper
module (``CallWithConstants``) that makes the recorded call; shapes, axes, dtypes, ... are
constants as in the original call. Its tensor arguments (top-level positional arguments, keyword
arguments and tensors directly inside top-level lists/tuples) are placed by ``tensor_args``:

``"constants"`` (the default): the *data* tensor (the first tensor argument: ``input``/``self`` of
    ``torch.nn.functional.conv2d(input, weight, bias)``, ``torch.Tensor.add``, the first of
    ``torch.cat``'s list) is the one graph input; every other tensor argument (a weight, bias,
    index, target, mask, running statistic, a binary operator's second operand) is a constant:
    a buffer of the wrapper module, which ``torch.export`` lifts as a ``BUFFER`` that the
    frontends bind as a constant, the way a real model holds its weights.
``"inputs"``: every tensor argument is a graph input (the form before the constants default: a
    frontend sees weights as runtime parameters, a different conversion path).

Module instances are not affected: their weights are the module's own parameters (constants
already) and their forward inputs are the model's runtime inputs by construction.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Sequence
from typing import Any

import ml_dtypes
import numpy as np
import torch
from torch import nn

from opera.model import InstanceKind, OperatorInstance
from opera.outputs import flatten_outputs as _flatten_outputs
from opera.templates import SingleOpModel, Template, keyword_default_references, register_template
from opera.values import CallableRef, DType, EnumValue, ObjectSpec, Opaque, TensorSpec

__all__ = [
    "TENSOR_ARGS",
    "CallWithConstants",
    "TorchTemplate",
    "numpy_to_torch",
    "resolve_api",
    "torch_inputs",
    "torch_to_numpy",
]

# Where a function instance's tensor arguments go (see the module docstring); the first is the default.
TENSOR_ARGS = ("constants", "inputs")

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


# torch's low-precision floats -> the ml_dtypes type of the same bits (what the targets decode their
# outputs to, so the dtype oracle compares like with like; the value oracle computes in float64)
_TORCH_BIT_VIEWS: dict[torch.dtype, tuple[torch.dtype, str]] = {
    torch.bfloat16: (torch.uint16, "bfloat16"),
    torch.float8_e4m3fn: (torch.uint8, "float8_e4m3fn"),
    torch.float8_e5m2: (torch.uint8, "float8_e5m2"),
    torch.float8_e4m3fnuz: (torch.uint8, "float8_e4m3fnuz"),
    torch.float8_e5m2fnuz: (torch.uint8, "float8_e5m2fnuz"),
}


def torch_to_numpy(tensor: torch.Tensor) -> np.ndarray:
    """A tensor's values as numpy, in the tensor's own dtype (bfloat16 and float8 as ml_dtypes:
    a bfloat16 output read back as float32 made every target that returns bfloat16 "inconsistent"
    on the dtype alone)."""
    tensor = tensor.detach()
    if tensor.layout != torch.strided:
        tensor = tensor.to_dense()
    tensor = tensor.cpu().resolve_conj().resolve_neg()
    view = _TORCH_BIT_VIEWS.get(tensor.dtype)
    if view is not None:
        bits, name = view
        return tensor.contiguous().view(bits).numpy().view(getattr(ml_dtypes, name)).copy()
    if tensor.dtype == torch.complex32:
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


class _Const:
    """Placeholder in an argument template for the wrapper's constant buffer ``name``."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"<constant {self.name}>"


def _fill(template: Any, inputs: Sequence[torch.Tensor], module: nn.Module | None = None) -> Any:
    """``template`` with the forward ``inputs`` and ``module``'s constant buffers put in."""
    if isinstance(template, _Slot):
        return inputs[template.index]
    if isinstance(template, _Const):
        assert module is not None
        return getattr(module, template.name)
    if isinstance(template, list):
        return [_fill(t, inputs, module) for t in template]
    if isinstance(template, tuple):
        return tuple(_fill(t, inputs, module) for t in template)
    return template


class Independent(nn.Module):
    """Several single-operator modules side by side: ``forward(*all inputs)`` feeds each part its own
    inputs (``counts[k]`` of them, in order) and returns every part's result in a tuple. Nothing is
    shared between parts, so a compiler sees independent sub-computations (``Template.combine``)."""

    def __init__(self, parts: list[nn.Module], counts: list[int]) -> None:
        super().__init__()
        self.parts = nn.ModuleList(parts)
        self.counts = tuple(counts)

    def forward(self, *inputs: torch.Tensor) -> tuple[Any, ...]:
        out = []
        start = 0
        for part, count in zip(self.parts, self.counts, strict=True):
            out.append(part(*inputs[start : start + count]))
            start += count
        return tuple(out)


class CallWithConstants(nn.Module):
    """``forward(*tensors)`` = ``target(*args, **kwargs)`` with the tensors put back in their slots.

    ``target`` is a torch function (``torch.add``, ``torch.Tensor.add``) or a submodule; the
    argument templates hold constants, ``_Slot`` placeholders (forward inputs) and ``_Const``
    placeholders: tensors held as the module's buffers (``constants``, name -> tensor), so that
    ``torch.export`` lifts them as buffers (constants to the frontends) and ``.to(device)``
    moves them.
    """

    def __init__(
        self,
        target: Any,
        args_template: tuple[Any, ...],
        kwargs_template: dict[str, Any],
        api: str,
        constants: dict[str, torch.Tensor] | None = None,
    ) -> None:
        super().__init__()
        # A function is kept inside a tuple: torch 2.11's Dynamo cannot call a method descriptor
        # (torch.Tensor.argmax) read straight from a module attribute ("does not know how to trace
        # method `_function`": every torch.Tensor method an `unsupported` there), and from a
        # container it can. A submodule stays an attribute, so that it is registered.
        self._function: tuple[Any, ...] = ()
        if isinstance(target, nn.Module):
            self.op = target
        else:
            self._function = (target,)
        self._args_template = args_template
        self._kwargs_template = kwargs_template
        self.api = api
        self.constant_names: tuple[str, ...] = tuple(constants or ())
        for name, tensor in (constants or {}).items():
            self.register_buffer(name, tensor)

    def forward(self, *inputs: torch.Tensor) -> Any:
        target = self._function[0] if self._function else self.op
        args = _fill(self._args_template, inputs, self)
        kwargs = {k: _fill(v, inputs, self) for k, v in self._kwargs_template.items()}
        return target(*args, **kwargs)

    @property
    def function(self) -> Any:
        """The torch function called, or None where the target is a submodule (``op``)."""
        return self._function[0] if self._function else None

    def extra_repr(self) -> str:
        if self.constant_names:
            return f"api={self.api}, constants={', '.join(self.constant_names)}"
        return f"api={self.api}"

    def constants(self) -> dict[str, torch.Tensor]:
        """The constant tensors by buffer name."""
        return {name: getattr(self, name) for name in self.constant_names}

    def call_spec(self) -> dict[str, Any]:
        """The call as plain data, for a script that has torch but not Opera: ``target`` is the
        submodule, or ``{"__opera_api__": api}`` for a function (torch functions do not all pickle:
        ``torch.unique`` is a local closure); each input slot in ``args``/``kwargs`` is
        ``{"__opera_input__": k}``, each constant ``{"__opera_constant__": name}`` with its tensor
        in ``constants`` (the script registers them as buffers: ``.to(device)`` moves them)."""

        def plain(value: Any) -> Any:
            if isinstance(value, _Slot):
                return {"__opera_input__": value.index}
            if isinstance(value, _Const):
                return {"__opera_constant__": value.name}
            if isinstance(value, list):
                return [plain(v) for v in value]
            if isinstance(value, tuple):
                return tuple(plain(v) for v in value)
            return value

        return {
            "target": {"__opera_api__": self.api} if self._function else self.op,
            "args": plain(self._args_template),
            "kwargs": {k: plain(v) for k, v in self._kwargs_template.items()},
            "constants": {name: tensor.detach().clone() for name, tensor in self.constants().items()},
        }


# Keyword names under which a call passes its data tensor when it passes it by keyword.
_DATA_KEYWORDS = ("input", "self")


def _split_tensors(
    args: Sequence[Any],
    kwargs: dict[str, Any],
    inputs: list[np.ndarray],
    constants: dict[str, torch.Tensor] | None = None,
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """Replace top-level tensors (and tensors directly inside top-level lists/tuples) by placeholders.

    Without ``constants`` (the "inputs" form) every tensor becomes a forward input: appended to
    ``inputs`` (as numpy) in forward order, a ``_Slot`` in the template. With ``constants`` (the
    "constants" form) only the data tensor does (``_data_tensor``); the others are added to
    ``constants`` under a name saying where they were (``arg1``, ``kw_weight``, ``arg0_1``) and are
    ``_Const`` placeholders. Everything else is turned into its torch constant.
    """
    data = _data_tensor(args, kwargs) if constants is not None else None

    def take(value: Any, where: tuple[Any, ...], name: str) -> Any:
        if not _is_tensor_value(value):
            return _to_torch(value)
        array = value.materialize() if isinstance(value, TensorSpec) else np.asarray(value)
        if constants is None or where == data:
            inputs.append(array)
            return _Slot(len(inputs) - 1)
        constants[name] = _canonical(numpy_to_torch(array))
        return _Const(name)

    def top(value: Any, where: tuple[Any, ...], name: str) -> Any:
        if isinstance(value, list):
            return [take(v, (*where, j), f"{name}_{j}") for j, v in enumerate(value)]
        if isinstance(value, tuple):
            return tuple(take(v, (*where, j), f"{name}_{j}") for j, v in enumerate(value))
        return take(value, where, name)

    args_template = tuple(top(a, (i,), f"arg{i}") for i, a in enumerate(args))
    kwargs_template = {k: top(v, (k,), _buffer_name(k)) for k, v in kwargs.items()}
    return args_template, kwargs_template


def _canonical(tensor: torch.Tensor) -> torch.Tensor:
    """``tensor`` with the row-major strides a tensor made by torch has: ``torch.from_numpy`` of a
    zero-size array gives strides of 0 (``(0, 0, 0)``), which TVM's runtime then rejects for the
    bound constant ("expected to be compact array") while ``torch.zeros(0, 10, 3)`` has
    ``(30, 3, 1)``; a model's weights come from torch, not from numpy."""
    if tensor.is_contiguous() and tensor.numel() > 0:
        return tensor
    return torch.empty(tensor.shape, dtype=tensor.dtype).copy_(tensor)


def _buffer_name(keyword: str) -> str:
    """A keyword as a buffer name that cannot clash with the positional ones or the module's own
    attributes (``op``, ``api``, ``training``, ...)."""
    name = "".join(c if c.isalnum() or c == "_" else "_" for c in keyword)
    return f"kw_{name}"


def _data_tensor(args: Sequence[Any], kwargs: dict[str, Any]) -> tuple[Any, ...] | None:
    """Where the call's data tensor is: ``(i,)`` / ``(i, j)`` for a positional argument (or an item
    of a top-level list), ``(keyword,)`` / ``(keyword, j)`` for a keyword argument.

    The rule: the first tensor among the positional arguments (a torch function's first tensor
    parameter is its data: ``input``/``self``; ``torch.cat``'s first list item; ``torch.einsum``'s
    first operand after the equation); when the call passes no tensor positionally, the tensor
    under ``input``/``self``, else the first keyword tensor. None: the call has no tensor.
    """

    def tensors(value: Any, where: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        if isinstance(value, (list, tuple)):
            return [(*where, j) for j, v in enumerate(value) if _is_tensor_value(v)]
        return [where] if _is_tensor_value(value) else []

    for i, value in enumerate(args):
        found = tensors(value, (i,))
        if found:
            return found[0]
    keyword = [k for k in kwargs if k in _DATA_KEYWORDS] + [k for k in kwargs if k not in _DATA_KEYWORDS]
    for k in keyword:
        found = tensors(kwargs[k], (k,))
        if found:
            return found[0]
    return None


@register_template
class TorchTemplate(Template):
    library = "torch"
    reference_name = "PyTorch eager"

    def doc_url(self, api: str) -> str | None:
        return f"https://docs.pytorch.org/docs/stable/generated/{api}.html" if api.startswith("torch.") else None

    def build(
        self, inst: OperatorInstance, seed: int = 0, *, tensor_args: str = TENSOR_ARGS[0]
    ) -> SingleOpModel:
        """``tensor_args``: where a function instance's tensor arguments go, ``"constants"`` (the
        data tensor is the graph input, the others constants) or ``"inputs"`` (all graph inputs)."""
        if tensor_args not in TENSOR_ARGS:
            raise ValueError(f"tensor_args must be one of {', '.join(TENSOR_ARGS)}, not {tensor_args!r}")
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
            constants: dict[str, torch.Tensor] | None = {} if tensor_args == "constants" else None
            args_template, kwargs_template = _split_tensors(inst.args, dict(inst.kwargs), inputs, constants)
            model = CallWithConstants(target, args_template, kwargs_template, inst.api, constants).eval()
        else:
            raise ValueError(f"the torch template cannot build {inst.kind.value!r} instances")
        return SingleOpModel(
            instance=inst,
            model=model,
            inputs=inputs,
            input_names=[f"input_{i}" for i in range(len(inputs))],
            details={"seed": seed, "tensor_args": tensor_args},
        )

    def combine(self, parts: list[SingleOpModel]) -> SingleOpModel | None:
        """An ``Independent`` module of the parts (tensor inputs only); the instance is the first
        part's (only for naming: a batch's verdicts are the parts' own)."""
        if len(parts) < 2 or not all(all(isinstance(x, np.ndarray) for x in p.inputs) for p in parts):
            return None
        model = Independent([p.model for p in parts], [len(p.inputs) for p in parts])
        return SingleOpModel(parts[0].instance, model, [x for p in parts for x in p.inputs], details={"combined": len(parts)})

    def reference(self, built: SingleOpModel) -> list[np.ndarray]:
        model = built.model
        constants = model.constants() if isinstance(model, CallWithConstants) else {}
        saved = {name: tensor.clone() for name, tensor in constants.items()}
        state = torch.random.get_rng_state()
        with torch.no_grad():
            try:
                return flatten_outputs(model(*torch_inputs(built)))
            finally:
                # whether the run drew from torch's generator, whatever the API's name says (the
                # dropout of a training-mode multi_head_attention_forward): a batch cannot keep
                # such a part's draws what they are alone (opera/run/batch.py)
                built.details["draws_random"] = not torch.equal(state, torch.random.get_rng_state())
                # an operator that writes into a constant (batch_norm's running statistics in
                # training mode) must leave it as built: the second reference run and the
                # compilers start from the same values
                for name, tensor in saved.items():
                    setattr(model, name, tensor)


    def lowered_reference(self, built: SingleOpModel, inputs: list[np.ndarray]) -> tuple[str, list[np.ndarray]] | None:
        """The exported program after torch's ``run_decompositions`` (what TVM's and OpenVINO's
        torch frontends convert), run eagerly by torch; None when it cannot be made or run."""
        from opera.run.targets._artifacts import export_torch

        try:
            module = export_torch(built).run_decompositions().module()
            tensors = tuple(numpy_to_torch(np.asarray(x)) for x in inputs)
            with torch.no_grad():
                return "torch's decomposition (run_decompositions)", flatten_outputs(module(*tensors))
        except Exception:
            return None

    def draws_random(self, built: SingleOpModel) -> str | None:
        """The ATen operators of the exported model tagged ``nondeterministic_seeded`` (torch's own
        mark for operators that consume the random generator: ``fractional_max_pool3d`` draws its
        offsets with ``aten.rand``), or None."""
        from opera.run.targets._artifacts import export_torch

        try:
            program = export_torch(built)
        except Exception:
            return None
        seeded = sorted(
            {
                str(node.target)
                for node in program.graph.nodes
                if node.op == "call_function" and torch.Tag.nondeterministic_seeded in getattr(node.target, "tags", ())
            }
        )
        return f"it draws random numbers inside ({', '.join(seeded)})" if seeded else None

    def default_attribute_references(
        self, built: SingleOpModel, inputs: list[np.ndarray]
    ) -> Iterator[tuple[str, list[np.ndarray]]]:
        """The call with one plain keyword argument at a time left out, then the ones that matter
        together (``keyword_default_references``): ``torch.add``'s ``alpha`` on TVM,
        ``embedding_bag``'s ``padding_idx`` on OpenVINO."""
        if built.instance.kind not in (InstanceKind.FUNCTION, InstanceKind.MODULE):
            return iter(())
        seed = int(built.details.get("seed", 0))
        tensor_args = str(built.details.get("tensor_args", TENSOR_ARGS[0]))
        return keyword_default_references(
            self, built, inputs, lambda variant: self.build(variant, seed, tensor_args=tensor_args)
        )

    def second_reference(self, built: SingleOpModel, inputs: list[np.ndarray]) -> tuple[str, list[np.ndarray]] | None:
        """The same model in float64 (what PyTorch asks of fuzzer reports before calling a
        float32 difference a bug): float inputs, parameters and buffers promoted, run eagerly.
        None when nothing is floating point or the float64 run fails."""
        import copy

        floating = [np.asarray(x).dtype.kind == "f" or np.asarray(x).dtype.name == "bfloat16" for x in inputs]
        model = built.model
        has_float_state = any(t.is_floating_point() for t in [*model.parameters(), *model.buffers()])
        if not any(floating) and not has_float_state:
            return None
        try:
            model64 = copy.deepcopy(model).to(torch.float64)
            tensors = tuple(
                numpy_to_torch(np.asarray(x)).to(torch.float64) if f else numpy_to_torch(np.asarray(x))
                for x, f in zip(inputs, floating, strict=True)
            )
            with torch.no_grad():
                return "torch float64", flatten_outputs(model64(*tensors))
        except Exception:
            return None


def torch_inputs(built: SingleOpModel) -> tuple[torch.Tensor, ...]:
    """Fresh torch tensors for ``built.inputs`` (copies: in-place operators must not touch them)."""
    return tuple(numpy_to_torch(np.asarray(x)) for x in built.inputs)


def _comparable(value: Any) -> np.ndarray:
    """One output leaf of a torch call as numpy; anything else cannot be compared."""
    if isinstance(value, torch.Tensor):
        return torch_to_numpy(value)
    if isinstance(value, (bool, int, float, complex, np.generic, np.ndarray)):
        return np.asarray(value)
    raise TypeError(f"cannot compare an output of type {type(value).__qualname__}")


def flatten_outputs(result: Any) -> list[np.ndarray]:
    """Tensor / tuple / list / ``torch.return_types`` / dict / scalar -> list of numpy arrays."""
    return _flatten_outputs(result, to_numpy=_comparable)
