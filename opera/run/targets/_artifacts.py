"""Library-side artifacts the frontends consume, shared by the compiler targets.

Every failure here is the *library's* (``torch.export`` rejecting the module, the TFLite converter
failing on a Keras model, ``torch.onnx.export`` failing) and is raised as ``ArtifactError`` chained
to the original exception, so the runner records the instance as invalid for the target instead of
blaming the compiler. The templates may offer the same conversions (``torch_inputs``,
``to_tflite``, ``model_bytes``); they are used when present so there is one definition of each.
"""

from __future__ import annotations

import hashlib
import importlib
import inspect
from typing import Any

import numpy as np

from opera.run.targets import ArtifactError, fixed_cost_undone, library_step
from opera.run.targets._torch_py_impl import install_lazy_py_impl
from opera.templates import SingleOpModel

__all__ = [
    "CIA_SCAN_SOURCES",
    "aten_ops",
    "cia_scan_inputs",
    "decompose_torch",
    "install_cia_scan_cache",
    "onnx_op",
    "export_torch",
    "keras_to_tflite",
    "onnx_model",
    "torch_decomposition_failed",
    "torch_inputs",
    "torch_tensor",
    "torch_to_onnx",
]


def _template_function(module: str, name: str) -> Any:
    try:
        mod = importlib.import_module(f"opera.templates.{module}")
    except ImportError:
        return None
    return getattr(mod, name, None)


def torch_inputs(built: SingleOpModel) -> tuple[Any, ...]:
    """The runtime inputs as torch tensors, in forward order."""
    offered = _template_function("torch_template", "torch_inputs")
    if offered is not None:
        return tuple(offered(built))
    return tuple(torch_tensor(x) if isinstance(x, np.ndarray) else x for x in built.inputs)


def torch_tensor(array: np.ndarray) -> Any:
    """A numpy input as a torch tensor; bfloat16 and float8 (ml_dtypes) through their bit patterns,
    which ``torch.from_numpy`` refuses ("can't convert np.ndarray of type ml_dtypes.bfloat16")."""
    import torch

    offered = _template_function("torch_template", "numpy_to_torch")
    if offered is not None:
        return offered(array)
    return torch.from_numpy(np.asarray(array, order="C"))


def export_torch(built: SingleOpModel) -> Any:
    """``torch.export.export`` of the module on its inputs (strict=False: the default in torch 2.13)."""
    import torch

    install_cia_scan_cache()  # for the frontends' run_decompositions on this program
    install_lazy_py_impl()  # ... and the op overrides it installs and restores (_torch_py_impl)
    try:
        with library_step():
            return torch.export.export(built.model, torch_inputs(built))
    except Exception as exc:
        raise ArtifactError(f"torch.export failed: {type(exc).__name__}: {_first_line(exc)}") from exc


def decompose_torch(program: Any) -> Any:
    """torch's own ``run_decompositions()`` of an exported program (its default table: what TVM's
    ``from_exported_program`` runs before converting). A failure there is the library's lowering of
    its own program, not the frontend's: ``ArtifactError``, and the test is ``invalid`` (e.g. the
    ``take`` decomposition guarding on a data-dependent size for a 0-d index; an ``index_fill``
    decomposition emitting an ``index_put`` that torch's own kernel rejects)."""
    try:
        with library_step():
            return program.run_decompositions()
    except Exception as exc:
        raise ArtifactError(f"torch's run_decompositions failed: {type(exc).__name__}: {_first_line(exc)}") from exc


def torch_decomposition_failed(exc: BaseException) -> bool:
    """An exception raised inside torch's own decomposition code (``torch/_decomp``,
    ``torch/_refs``) while a frontend decomposed the program with its own table."""
    import traceback

    seen: set[int] = set()
    cause: BaseException | None = exc
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        for frame in traceback.extract_tb(cause.__traceback__):
            name = frame.filename.replace("\\", "/")
            if "/torch/_decomp/" in name or "/torch/_refs/" in name:
                return True
        cause = cause.__cause__ or cause.__context__
    return False


def torch_to_onnx(built: SingleOpModel, opset: int = 18) -> Any:
    """torch -> ONNX through the dynamo exporter (``torch.onnx.export(..., dynamo=True)``).

    The TorchScript exporter (``dynamo=False``) is deprecated in torch 2.13; the dynamo exporter is
    what users get by default now, so it is the artifact an ONNX consumer of torch models sees.
    """
    import onnx
    import torch

    args = torch_inputs(built)
    names = [f"input_{i}" for i in range(len(args))]
    try:
        with library_step():
            program = torch.onnx.export(built.model, args, dynamo=True, input_names=names, opset_version=opset, verbose=False)
        model = program.model_proto  # type: ignore[union-attr]
    except Exception as exc:
        raise ArtifactError(f"torch.onnx.export failed: {type(exc).__name__}: {_first_line(exc)}") from exc
    model.ir_version = min(model.ir_version, 10)
    onnx.checker.check_model(model)
    return model


def onnx_model(built: SingleOpModel) -> Any:
    """The ONNX ``ModelProto`` of an onnx instance (the template's model itself)."""
    return built.model


def keras_to_tflite(built: SingleOpModel) -> bytes:
    """Keras model -> TFLite flatbuffer (builtin ops only: a TVM frontend cannot run Flex ops)."""
    offered = _template_function("keras_template", "to_tflite")
    try:
        with library_step():
            if offered is not None:
                return bytes(offered(built))
            import tensorflow as tf

            converter = tf.lite.TFLiteConverter.from_keras_model(built.model)
            return bytes(converter.convert())
    except Exception as exc:
        raise ArtifactError(f"TFLite conversion failed: {type(exc).__name__}: {_first_line(exc)}") from exc


def onnx_op(built: SingleOpModel) -> tuple[str, str, int | None]:
    """(op type, domain, opset of that domain) of a single-op ONNX model."""
    node = built.model.graph.node[0]
    domain = node.domain or ""
    opset = next(
        (
            int(e.version)
            for e in built.model.opset_import
            if (e.domain or "") in (domain, domain if domain else "ai.onnx")
        ),
        None,
    )
    return node.op_type, domain, opset


def aten_ops(built: SingleOpModel) -> str | None:
    """The ATen operators of the exported program (what the torch frontends dispatch on), as a
    converter name: ``torch.add`` and ``torch.Tensor.add`` both become ``aten.add.Tensor``."""
    program = export_torch(built)
    names = sorted(
        {
            str(node.target)
            for node in program.graph.nodes
            if node.op == "call_function" and "getitem" not in str(node.target)
        }
    )
    return "+".join(names) if names else None


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0][:300] if text else ""


# ---- the composite-op scan of torch's run_decompositions, cached on its inputs ------------------
#
# ``ExportedProgram.run_decompositions`` (which TVM's ``from_exported_program`` and OpenVINO's
# ``convert_model`` call on every torch model) asks ``torch._export.utils._collect_all_valid_cia_ops``
# for the functional CompositeImplicitAutograd ops of every op namespace, once or twice per call
# (``CustomDecompTable.materialize`` and ``_split_decomp_table_to_cia_and_python_decomp``), and
# the function walks every namespace again each time (torch caches only the aten part: ops can be
# registered at any time). The cache below keeps its answer for as long as everything it reads is
# unchanged: ``cia_scan_inputs`` collects those inputs (the namespaces, their op packets, each
# overload object, which stands for its schema and tags, the overload's Python
# CompositeImplicitAutograd kernel, and whether the dispatcher has a kernel and a
# CompositeImplicitAutograd kernel for it), and a different answer would need a different input.
# It is installed only where torch's source of the scan is the one this was read from
# (``CIA_SCAN_SOURCES``: the SHA-256 of the functions involved, torch 2.13.0): any other torch keeps
# the uncached scan. tests/test_fixed_costs.py checks that the converted programs are identical with
# and without it and that a newly registered composite op is seen.

CIA_SCAN_SOURCES = "f7bee0ee020d9e28d0baef2235cbcaa3266d6623405c0018d8c2b76d85db5bca"
_CIA_CACHE: dict[str, Any] = {}


def _cia_scan_functions() -> list[Any]:
    import torch._decomp
    import torch._export.utils as utils

    return [
        utils._collect_all_valid_cia_ops,
        utils._collect_all_valid_cia_ops_for_namespace,
        utils._collect_all_valid_cia_ops_for_aten_namespace,
        utils._materialize_cpp_cia_ops,
        utils._is_preservable_cia_op,
        utils._check_valid_to_preserve,
        utils._is_cia_op,
        torch._decomp._should_decompose_because_unsafe_op,
    ]


def cia_scan_sources() -> str:
    """SHA-256 of the source of the functions the scan runs (``CIA_SCAN_SOURCES`` when cacheable)."""
    return hashlib.sha256("".join(inspect.getsource(f) for f in _cia_scan_functions()).encode()).hexdigest()


def cia_scan_inputs() -> tuple[Any, ...]:
    """Everything ``_collect_all_valid_cia_ops`` reads that can change in a process (see above),
    after the same C++ op materialization it starts with. The aten namespace is left out: torch
    caches its part for the process itself."""
    import torch
    from torch._export.utils import _materialize_cpp_cia_ops
    from torch._subclasses.functional_tensor import FunctionalTensor

    cia = torch._C.DispatchKey.CompositeImplicitAutograd
    _materialize_cpp_cia_ops()
    seen: list[Any] = [id(FunctionalTensor.metadata_fns), FunctionalTensor.metadata_fns]
    for name in list(torch.ops._dir):
        if name == "aten":
            continue
        namespace = getattr(torch.ops, name, None)
        seen.append((name, type(namespace)))
        if not isinstance(namespace, torch._ops._OpNamespace):
            continue
        for op_name in list(namespace):
            packet = getattr(namespace, op_name)
            seen.append(packet)
            for overload in packet.op_overloads():
                qualified = overload.name()
                has_kernel = torch._C._dispatch_has_kernel(qualified)
                seen.append(
                    (
                        overload,
                        cia in overload.py_kernels,
                        has_kernel,
                        has_kernel and torch._C._dispatch_has_kernel_for_dispatch_key(qualified, cia),
                    )
                )
    return tuple(seen)


def _cached_cia_scan() -> Any:
    from torch._export.utils import _collect_all_valid_cia_ops

    inputs = cia_scan_inputs()
    if _CIA_CACHE.get("inputs") == inputs:
        return _CIA_CACHE["ops"]
    ops = _collect_all_valid_cia_ops()
    _CIA_CACHE.pop("inputs", None)
    if cia_scan_inputs() == inputs:  # kept only when the scan itself changed none of its inputs
        _CIA_CACHE["ops"], _CIA_CACHE["inputs"] = ops, inputs
    return ops


def install_cia_scan_cache() -> bool:
    """Let run_decompositions use the cached scan (once per process); False where it does not apply:
    another torch, or ``OPERA_FIXED_COSTS_UNDO`` names ``cia-scan-cache`` (benchmarks only)."""
    if "installed" in _CIA_CACHE:
        return bool(_CIA_CACHE["installed"])
    if fixed_cost_undone("cia-scan-cache"):
        return False
    try:
        import torch.export.decomp_utils as decomp_utils
        import torch.export.exported_program as exported_program
        from torch._export.utils import _collect_all_valid_cia_ops

        applies = (
            cia_scan_sources() == CIA_SCAN_SOURCES
            and exported_program._collect_all_valid_cia_ops is _collect_all_valid_cia_ops
            and decomp_utils._collect_all_valid_cia_ops is _collect_all_valid_cia_ops
        )
    except Exception:  # another torch: names moved, sources unreadable
        applies = False
    if applies:
        exported_program._collect_all_valid_cia_ops = _cached_cia_scan
        decomp_utils._collect_all_valid_cia_ops = _cached_cia_scan
    _CIA_CACHE["installed"] = applies
    return applies
