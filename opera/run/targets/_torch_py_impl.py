"""torch's ``OperatorBase.py_impl`` without evaluating its annotations on every call.

``ExportedProgram.run_decompositions`` (TVM's ``from_exported_program`` and OpenVINO's
``convert_model`` run it on every torch model) overrides the CompositeImplicitAutograd kernels of
about a thousand ops and restores them afterwards (``_override_composite_implicit_decomp``): about
11,500 calls of ``py_impl`` per decomposition, whatever the program. ``torch/_ops.py`` does not
postpone annotations, so each call builds ``Callable[_P, _T]`` twice (``collections.abc``'s
generic alias, which nothing caches) for the annotations of the decorator it returns: about 0.05 s
of a 0.12 s decomposition of one ReLU, and the same on every alone tvm-torch and ov-torch test
(measured in docs/results.md, "Annotations torch evaluated 23,000 times a test").

``install_lazy_py_impl`` replaces the method with the same source compiled with postponed
annotations (``from __future__ import annotations``, PEP 563) in the same module globals: the same
statements in the same order, only the annotations stay strings. It is installed only where the
source is the one this was read from (``PY_IMPL_SOURCE``, the SHA-256 of the method's source, torch
2.13.0); any other torch keeps its own. ``OPERA_FIXED_COSTS_UNDO=py-impl-annotations`` leaves it out
(benchmarks only). tests/test_fixed_costs.py checks that TVM and OpenVINO convert the same programs
with and without it.
"""

from __future__ import annotations
import __future__

import hashlib
import inspect
from typing import Any

from opera.run.targets import fixed_cost_undone

__all__ = ["PY_IMPL_SOURCE", "install_lazy_py_impl", "py_impl_source_hash"]

PY_IMPL_SOURCE = "8173bd205b783783cda935e5b6590b730162bf3224538ae039576a75fc40ec0b"
_STATE: dict[str, Any] = {}


def py_impl_source_hash() -> str:
    """SHA-256 of the source of torch's ``OperatorBase.py_impl`` as loaded."""
    import torch._ops

    return hashlib.sha256(inspect.getsource(torch._ops.OperatorBase.py_impl).encode()).hexdigest()


def install_lazy_py_impl() -> bool:
    """Install the method once per process; False where it does not apply (another torch, or the
    benchmarks' ``OPERA_FIXED_COSTS_UNDO`` names ``py-impl-annotations``)."""
    if "installed" in _STATE:
        return bool(_STATE["installed"])
    if fixed_cost_undone("py-impl-annotations"):
        return False
    try:
        import torch._ops

        stock = torch._ops.OperatorBase.py_impl
        applies = py_impl_source_hash() == PY_IMPL_SOURCE
        if applies:
            _STATE["stock"] = stock
            torch._ops.OperatorBase.py_impl = lazy_py_impl(stock)  # type: ignore[method-assign]
    except Exception:  # another torch: names moved, source unreadable
        applies = False
    _STATE["installed"] = applies
    return applies


def lazy_py_impl(stock: Any) -> Any:
    """``stock`` (a function of ``torch._ops``) compiled again from its source with postponed
    annotations, in its module's globals."""
    import torch._ops

    lines, first = inspect.getsourcelines(stock)
    owner = stock.__qualname__.rsplit(".", 1)[0]
    # in a class of the owner's name, at the lines and columns it has in torch's file: a traceback
    # through it reads exactly as one through the stock method (file, line, carets, names)
    source = "\n" * (first - 2) + f"class {owner}:\n" + "".join(lines)
    flags = __future__.annotations.compiler_flag
    code = compile(source, inspect.getsourcefile(stock) or "<py_impl>", "exec", flags=flags, dont_inherit=True)
    namespace: dict[str, Any] = {}
    exec(code, vars(torch._ops), namespace)  # noqa: S102 - torch's own source, hash-checked above
    function = vars(namespace[owner])[stock.__name__]
    function.__module__ = stock.__module__
    return function
