"""What OpenVINO's ONNX frontend can implement, read from its shared library.

OpenVINO's ONNX converters are C++ (``src/frontends/onnx/frontend/src/op/*.cpp``), registered per
opset range with ``ONNX_OP("Celu", OPSET_SINCE(1), ...)``; Python sees neither their source nor
their registrations. Two facts can still be read from the library file, each only in the direction
that cannot be wrong:

- A converter reads an attribute by name (``node.get_attribute_value<int64_t>("softcap", 0)``), so
  every attribute any converter reads is a string in the library. A name that appears nowhere in it
  is read by no converter (sample 14: Attention-25's ``left_window_size``, a silently ignored
  attribute). A name that does appear proves nothing: the library also embeds ONNX's schema texts.
- The library embeds ONNX's operator schemas (``GetOpSchema<Attention_Onnx_ver24>``, one
  ``OpSet_Onnx_verN`` class per opset). No converter can implement a schema version newer than the
  newest opset the frontend itself knows: Celu-28's float16 (samples 8, 13) is outside what an
  OpenVINO that knows opset 27 implements.

Both are coverage gaps, never bugs (docs/design.md, the project dtype rule).
"""

from __future__ import annotations

import functools
import importlib.util
import re
from pathlib import Path

__all__ = ["frontend_library", "library_names", "newest_known_opset"]


@functools.cache
def frontend_library() -> bytes:
    """The bytes of the installed ``libopenvino_onnx_frontend`` (empty when it cannot be found:
    then nothing is claimed)."""
    spec = importlib.util.find_spec("openvino")
    for root in (spec.submodule_search_locations or []) if spec else []:
        for path in sorted(Path(root).glob("libs/*openvino_onnx_frontend*")):
            if path.is_file():
                return path.read_bytes()
    return b""


def library_names(name: str) -> bool:
    """Whether ``name`` occurs anywhere in the frontend library (True when the library is unknown)."""
    data = frontend_library()
    return not data or name.encode() in data


@functools.cache
def newest_known_opset() -> int | None:
    """The newest ai.onnx opset whose schemas the frontend embeds (``OpSet_Onnx_ver27`` -> 27)."""
    found = [int(n) for n in re.findall(rb"OpSet_Onnx_ver(\d+)", frontend_library())]
    return max(found) if found else None
