"""PyTorch harvest sources that ship inside the torch wheel: the OpInfo and ModuleInfo databases.

Both call the real operator on each sample under the recorder, so what is recorded is the public
API the sample exercises (an OpInfo whose ``op`` is a lambda records the torch calls the lambda
makes), with the recorder's top-level rule deciding what counts. Sample *generation* runs with
recording paused (OpInfo) or discarded (ModuleInfo: its constructor arguments may be modules built
while generating, e.g. the layer handed to ``TransformerEncoder``, whose constructors must be
remembered), so ``make_tensor``'s own ``torch.rand`` calls are not instances.

Samples are generated lazily, one OpInfo at a time, and every OpInfo/ModuleInfo starts from
``torch.manual_seed(0)`` so a harvest is reproducible (same tensors, same instance ids).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator
from typing import Any

from opera.instrumentation import BaseRecorder, HarvestOptions, harvest_source
from opera.model import OperatorInstance, Source

__all__ = ["iter_opinfo_calls", "moduleinfo_source", "opinfo_source"]

# Dtype preference when an OpInfo does not support float32 on CPU.
_FALLBACK_DTYPES = ("float32", "int64", "bool", "complex64")
# OpInfos also harvested with int64 samples (integer semantics differ: division, shifts, ...).
HARVEST_INT64_SAMPLES = True


def _sample_dtypes(op: Any) -> list[Any]:
    import torch

    supported = op.supported_dtypes("cpu")
    chosen = [getattr(torch, name) for name in _FALLBACK_DTYPES if getattr(torch, name) in supported][:1]
    if HARVEST_INT64_SAMPLES and chosen and chosen[0] != torch.int64 and torch.int64 in supported:
        chosen.append(torch.int64)
    return chosen


def iter_opinfo_calls(
    recorder: BaseRecorder | None = None,
    *,
    first_ops: int | None = None,
    dtypes: Callable[[Any], list[Any]] | None = None,
    method_variants: bool = True,
) -> Iterator[tuple[str, int, Callable[[], Any]]]:
    """``(test label, sample index, call)`` for every CPU sample of ``op_db`` (function and method
    variants). Samples are generated with ``recorder`` paused; ``call()`` runs the operator."""
    import contextlib

    import torch
    from torch.testing._internal.common_methods_invocations import op_db

    pause = recorder.paused if recorder is not None else contextlib.nullcontext
    for op in op_db[:first_ops]:
        label = f"{op.name}.{op.variant_test_name}" if op.variant_test_name else op.name
        variants = [op.op] + ([op.method_variant] if method_variants and op.method_variant is not None else [])
        for dtype in (dtypes or _sample_dtypes)(op):
            test = label if dtype == torch.float32 else f"{label}@{str(dtype).removeprefix('torch.')}"
            with pause():
                torch.manual_seed(0)
                try:
                    samples = iter(op.sample_inputs("cpu", dtype, requires_grad=False))
                except Exception:
                    continue
            index = 0
            while True:
                with pause():
                    try:
                        sample = next(samples)
                    except StopIteration:
                        break
                    except Exception:
                        break  # a generator that raises cannot be resumed
                for variant in variants:
                    yield test, index, _bind(variant, sample)
                index += 1


def _bind(func: Callable[..., Any], sample: Any) -> Callable[[], Any]:
    return lambda: func(sample.input, *sample.args, **sample.kwargs)


@harvest_source("torch", "opinfo", default=True)
def opinfo_source(recorder: BaseRecorder, options: HarvestOptions) -> Iterator[OperatorInstance]:
    """OpInfo samples (op_db, CPU, float32 + int64): function and Tensor-method variants."""
    recorded: list[OperatorInstance] = []
    recorder.sink = recorded.append
    count = 0
    recorder.install()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for test, index, call in iter_opinfo_calls(recorder):
                recorder.source = Source(suite="opinfo", test=test, sample=index)
                try:
                    call()
                except Exception as exc:
                    recorder.note_error(f"opinfo sample raised {type(exc).__name__}")
                for inst in recorded:
                    yield inst
                    count += 1
                    if options.limit is not None and count >= options.limit:
                        return
                recorded.clear()
    finally:
        recorder.uninstall()


@harvest_source("torch", "moduleinfo", default=True)
def moduleinfo_source(recorder: BaseRecorder, options: HarvestOptions) -> Iterator[OperatorInstance]:
    """ModuleInfo samples (module_db, CPU float32): constructor + forward input of each."""
    import torch
    from torch.testing._internal.common_modules import module_db

    recorded: list[OperatorInstance] = []
    discard: Callable[[OperatorInstance], None] = lambda inst: None  # noqa: E731
    count = 0
    recorder.install()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for info in module_db:
                recorder.sink = discard  # generation: remember constructors, drop the calls
                torch.manual_seed(0)
                try:
                    module_inputs = info.module_inputs_func(
                        info, device="cpu", dtype=torch.float32, requires_grad=False, training=False
                    )
                except Exception as exc:
                    recorder.note_error(f"moduleinfo inputs raised {type(exc).__name__}")
                    continue
                recorder.sink = recorded.append
                for index, module_input in enumerate(module_inputs):
                    if module_input.forward_input is None:
                        continue
                    recorder.source = Source(suite="moduleinfo", test=info.module_cls.__name__, sample=index)
                    ctor, fwd = module_input.constructor_input, module_input.forward_input
                    try:
                        torch.manual_seed(0)
                        module = info.module_cls(*ctor.args, **ctor.kwargs)
                        with recorder.paused():
                            module.train(False)
                        module(*fwd.args, **fwd.kwargs)
                    except Exception as exc:
                        recorder.note_error(f"moduleinfo sample raised {type(exc).__name__}")
                    for inst in recorded:
                        yield inst
                        count += 1
                        if options.limit is not None and count >= options.limit:
                            return
                    recorded.clear()
    finally:
        recorder.uninstall()
