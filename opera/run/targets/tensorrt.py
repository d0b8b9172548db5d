"""TensorRT targets: ``trt-onnx`` and ``trt-torch`` (TensorRT 10+ Python API, CUDA only).

Both go through TensorRT's ONNX parser (``trt.OnnxParser``): ``trt-torch`` first exports the module
with ``torch.onnx.export(..., dynamo=True)`` (the TorchScript exporter is deprecated in torch 2.13).
The engine is built with ``builder.build_serialized_network`` and run with the name-based tensor
API of TensorRT 10 (``num_io_tensors``, ``set_input_shape``, ``set_tensor_address``,
``execute_async_v3``); device memory comes from torch CUDA tensors, so no pycuda/cuda-python is
needed. The 8.x binding API (``get_binding_*``, ``execute_v2``) is gone in 10 and is not used.

TensorRT is not installable on the machines of this project: ``availability()``
says why, and ``opera targets`` lists the targets as unavailable.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from opera.run.targets import Target, register_target
from opera.run.targets._artifacts import aten_ops, torch_to_onnx
from opera.run.targets._onnx_prep import PreparedOnnx, prepare_built, prepare_onnx
from opera.templates import SingleOpModel

__all__ = ["TensorRTError", "TrtOnnxTarget", "TrtTorchTarget", "WORKSPACE_BYTES"]

WORKSPACE_BYTES = 1 << 30


class TensorRTError(RuntimeError):
    """TensorRT reported a failure through a return value (parser errors, a None engine)."""


@dataclass
class TrtNetwork:
    plan: bytes  # the serialized engine: built in ``convert`` since parsing needs the builder
    prepared: PreparedOnnx


@dataclass
class TrtEngine:
    engine: Any
    context: Any
    prepared: PreparedOnnx


_logger: Any = None


def _trt_logger() -> Any:
    global _logger
    if _logger is None:
        import tensorrt as trt

        _logger = trt.Logger(trt.Logger.WARNING)
    return _logger


class _TrtTarget(Target):
    compiler = "tensorrt"
    issue_tracker = "https://github.com/NVIDIA/TensorRT/issues"
    needs_gpu = True
    frontend_paths = ("tensorrt", "onnx_tensorrt")
    native_frontend = True

    def availability(self) -> str | None:
        """TensorRT, torch (device memory is allocated through torch.cuda), the source library,
        and a CUDA device."""
        reason = super().availability()
        if reason is not None:
            return reason
        import torch

        return None if torch.cuda.is_available() else "no CUDA device"

    # --- convert: ONNX -> TensorRT network -> serialized engine ------------------------------
    def _build(self, onnx_model: Any, prepared: PreparedOnnx) -> TrtNetwork:
        import tensorrt as trt

        logger = _trt_logger()
        builder = trt.Builder(logger)
        network = builder.create_network(0)  # explicit batch is the only mode in TensorRT 10
        parser = trt.OnnxParser(network, logger)
        if not parser.parse(prepared.model.SerializeToString()):  # type: ignore[attr-defined]
            errors = [str(parser.get_error(i)) for i in range(parser.num_errors)]
            raise TensorRTError("ONNX parser: " + "; ".join(errors or ["parse failed with no error recorded"]))
        config = builder.create_builder_config()
        config.set_memory_pool_limit(trt.MemoryPoolType.WORKSPACE, WORKSPACE_BYTES)
        # Static shapes: every input is fully specified in the ONNX graph, so no optimization
        # profile is needed; a dynamic dimension gets a profile pinned to the instance's shape.
        profile = None
        for i in range(network.num_inputs):
            tensor = network.get_input(i)
            if any(d < 0 for d in tensor.shape):
                shape = self._shape_for(prepared, tensor.name)
                if profile is None:
                    profile = builder.create_optimization_profile()
                profile.set_shape(tensor.name, shape, shape, shape)
        if profile is not None:
            config.add_optimization_profile(profile)
        plan = builder.build_serialized_network(network, config)
        if plan is None:
            raise TensorRTError("build_serialized_network returned None (see the TensorRT log)")
        return TrtNetwork(bytes(plan), prepared)

    def _shape_for(self, prepared: PreparedOnnx, name: str) -> tuple[int, ...]:
        shapes = prepared.runtime_shapes
        if name not in shapes:
            raise TensorRTError(f"input {name!r} has a dynamic shape and no example value")
        return tuple(shapes[name])

    # --- compile: deserialize the engine, create the execution context -----------------------
    def compile(self, converted: TrtNetwork) -> TrtEngine:
        import tensorrt as trt

        runtime = trt.Runtime(_trt_logger())
        engine = runtime.deserialize_cuda_engine(converted.plan)
        if engine is None:
            raise TensorRTError("deserialize_cuda_engine returned None")
        context = engine.create_execution_context()
        if context is None:
            raise TensorRTError("create_execution_context returned None")
        return TrtEngine(engine, context, converted.prepared)

    # --- run: name-based I/O with torch CUDA buffers, execute_async_v3 -------------------------
    def run(self, compiled: TrtEngine, inputs: list[np.ndarray]) -> list[np.ndarray]:
        import tensorrt as trt
        import torch

        engine, context = compiled.engine, compiled.context
        feed = dict(zip(compiled.prepared.runtime_names, compiled.prepared.select(inputs), strict=True))
        keep_alive: list[Any] = []
        names = [engine.get_tensor_name(i) for i in range(engine.num_io_tensors)]
        for name in names:
            if engine.get_tensor_mode(name) != trt.TensorIOMode.INPUT:
                continue
            if name not in feed:
                raise TensorRTError(f"engine input {name!r} has no value (runtime inputs: {list(feed)})")
            host = np.asarray(feed[name].astype(trt.nptype(engine.get_tensor_dtype(name)), copy=False), order="C")
            device = torch.from_numpy(host).cuda()
            keep_alive.append(device)
            if not context.set_input_shape(name, tuple(host.shape)):
                raise TensorRTError(f"set_input_shape({name!r}, {host.shape}) failed")
            context.set_tensor_address(name, device.data_ptr())
        outputs: dict[str, Any] = {}
        for name in names:
            if engine.get_tensor_mode(name) != trt.TensorIOMode.OUTPUT:
                continue
            shape = tuple(context.get_tensor_shape(name))
            if any(d < 0 for d in shape):
                raise TensorRTError(f"output {name!r} has a data-dependent shape {shape}")
            dtype = np.dtype(trt.nptype(engine.get_tensor_dtype(name)))
            device = torch.empty(shape, dtype=_torch_dtype(dtype), device="cuda")
            outputs[name] = device
            context.set_tensor_address(name, device.data_ptr())
        stream = torch.cuda.Stream()
        if not context.execute_async_v3(stream.cuda_stream):
            raise TensorRTError("execute_async_v3 returned False")
        stream.synchronize()
        order = [vi.name for vi in compiled.prepared.model.graph.output]  # type: ignore[attr-defined]
        return [outputs[n].cpu().numpy() for n in order if n in outputs]


def _torch_dtype(dtype: np.dtype) -> Any:
    import torch

    return {
        np.dtype(np.float32): torch.float32,
        np.dtype(np.float16): torch.float16,
        np.dtype(np.int32): torch.int32,
        np.dtype(np.int64): torch.int64,
        np.dtype(np.int8): torch.int8,
        np.dtype(np.uint8): torch.uint8,
        np.dtype(np.bool_): torch.bool,
    }[np.dtype(dtype)]


@register_target
class TrtOnnxTarget(_TrtTarget):
    name = "trt-onnx"
    library = "onnx"
    requires = ("tensorrt", "torch", "onnx")

    def convert(self, built: SingleOpModel) -> TrtNetwork:
        prepared = prepare_built(built)
        return self._build(built.model, prepared)


@register_target
class TrtTorchTarget(_TrtTarget):
    """torch -> ONNX (dynamo exporter) -> TensorRT's ONNX parser."""

    name = "trt-torch"
    library = "torch"
    requires = ("tensorrt", "torch", "onnx")

    def converter_name(self, built: SingleOpModel) -> str | None:
        return aten_ops(built)

    def convert(self, built: SingleOpModel) -> TrtNetwork:
        model = torch_to_onnx(built)
        names = [vi.name for vi in model.graph.input if vi.name not in {i.name for i in model.graph.initializer}]
        prepared = prepare_onnx(model, built.inputs, names)
        return self._build(model, prepared)
