"""Bug signatures: how failures are de-duplicated into bugs (docs/design.md, Signatures).

The paper counts one bug per *conversion function* of the frontend, so a crash's signature is the
innermost traceback frame inside the target's frontend code (file relative to the package root +
function name) plus the exception type. When no frame lies in the frontend (the exception comes
from the compiler's backend, or from native code with no Python frame) the innermost frame inside
the compiler package is used, and failing that the exception type plus its message with numbers,
addresses and quoted names normalized away.

Inconsistencies are signed by target + the operator's converter when the target can name it
(``Target.converter_name``), else target + API: the paper counts one bug per conversion function,
so two APIs that reach the same converter (``torch.add`` and ``torch.Tensor.add`` both become
``aten.add.Tensor``) are one bug, and one ONNX op whose opset selects another ``_impl_vN`` another. Native crashes and timeouts carry no
traceback: target + API + signal (or ``timeout``).
"""

from __future__ import annotations

import hashlib
import re
import traceback
from collections.abc import Sequence
from typing import Any

__all__ = [
    "converter_of",
    "crash_signature",
    "harness_signature",
    "target_crash_signature",
    "inconsistency_signature",
    "native_location",
    "native_signature",
    "normalize_message",
    "signature_digest",
]


def _norm_path(path: str) -> str:
    return path.replace("\\", "/")


def _relative_to_fragment(path: str, fragments: Sequence[str]) -> str | None:
    """``.../site-packages/tvm/relax/frontend/onnx/x.py`` -> ``tvm/relax/frontend/onnx/x.py``."""
    norm = _norm_path(path)
    for fragment in fragments:
        frag = fragment.strip("/")
        idx = norm.rfind("/" + frag + "/")
        if idx >= 0:
            return norm[idx + 1 :]
        if norm.startswith(frag + "/"):
            return norm
    return None


_NUMBER = re.compile(r"(?<![\w.])[-+]?\d+(\.\d+)?([eE][-+]?\d+)?(?!\w)")
_HEX = re.compile(r"0x[0-9a-fA-F]+")
_QUOTED = re.compile(r"(['\"]).{0,80}?\1")
_SPACES = re.compile(r"\s+")


def normalize_message(message: str, limit: int = 120) -> str:
    """First line of an exception message with addresses, numbers and quoted values abstracted."""
    first = message.strip().splitlines()[0] if message.strip() else ""
    text = _HEX.sub("ADDR", first)
    text = _QUOTED.sub("'…'", text)
    text = _NUMBER.sub("N", text)
    return _SPACES.sub(" ", text)[:limit]


# A native frontend (``Target.native_frontend``: C++ behind a thin Python wrapper, OpenVINO and
# TensorRT): every conversion failure passes through the same Python frame (OpenVINO's
# ``frontend.py:convert``), while the message names the C++ translator that failed
# ("... failed at src/frontends/onnx/frontend/src/op/mod.cpp:27").
_NATIVE_LOCATION = re.compile(r"((?:[\w.-]+/)*src/[\w/.+-]+\.(?:cpp|cc|cxx|hpp|h))(?::\d+)?")
# Generic reporting/dispatch code that every failure passes through: not a location.
_GENERIC_NATIVE = ("unconverted_ops_report", "frontend_manager", "/core/src/except")


def native_location(message: str) -> str | None:
    """The innermost specific C++ source file a native error message names, if any."""
    found = [m.group(1) for m in _NATIVE_LOCATION.finditer(message)]
    specific = [f for f in found if not any(g in f for g in _GENERIC_NATIVE)]
    return specific[-1] if specific else None


def crash_signature(
    exc: BaseException,
    target: str,
    frontend_paths: Sequence[str],
    compiler_packages: Sequence[str] = (),
    *,
    native_frontend: bool = False,
) -> str:
    """``crash:<target>:<file>:<function>:<ExceptionType>``, or the fallbacks described above.

    ``native_frontend``: the frontend is C++ (``Target.native_frontend``); a C++ source
    file named in the message beats the Python wrapper frame.
    """
    frames = traceback.extract_tb(exc.__traceback__)
    exc_type = type(exc).__name__
    if native_frontend:
        location = native_location(str(exc))
        if location is not None:
            return f"crash:{target}:{location}:{exc_type}"
    for fragments in (frontend_paths, compiler_packages):
        if not fragments:
            continue
        for frame in reversed(frames):
            rel = _relative_to_fragment(frame.filename, fragments)
            if rel is not None:
                return f"crash:{target}:{rel}:{frame.name}:{exc_type}"
    # Some compilers (TVM's FFI) append their C++ frames to the Python traceback: the innermost
    # one names the native function that raised.
    for frame in reversed(frames):
        if frame.filename.endswith(_NATIVE_SUFFIXES):
            return f"crash:{target}:{_native_file(frame.filename)}:{_short_function(frame.name)}:{exc_type}"
    return f"crash:{target}:{exc_type}:{normalize_message(str(exc))}"


_NATIVE_SUFFIXES = (".cc", ".cpp", ".cxx", ".c", ".h", ".hpp")


def _native_file(path: str) -> str:
    norm = _norm_path(path)
    idx = norm.find("/src/")
    return norm[idx + 1 :] if idx >= 0 else norm.rsplit("/", 1)[-1]


def _short_function(name: str) -> str:
    """``tvm::contrib::RegisterTopk()::<lambda(...)>`` -> ``tvm::contrib::RegisterTopk()::<lambda>``."""
    return re.sub(r"<lambda\(.*\)>", "<lambda>", name)[:160]


def inconsistency_signature(target: str, api: str, converter: str | None = None) -> str:
    return f"inconsistent:{target}:{'converter=' + converter if converter else api}"


def native_signature(target: str, api: str, cause: str) -> str:
    """``cause`` is a signal name (``SIGSEGV``), ``memory`` or ``timeout``."""
    kind = "timeout" if cause == "timeout" else "native-crash"
    return f"{kind}:{target}:{api}:{cause}" if kind != "timeout" else f"timeout:{target}:{api}"


def signature_digest(signature: str) -> str:
    """A short file-name-safe hash of a signature (reproducer file names)."""
    return hashlib.sha256(signature.encode()).hexdigest()[:16]


def harness_signature(exc: BaseException, target: str) -> str:
    """``harness:<target>:<file>:<function>:<ExcType>`` at the innermost frame of Opera's own code
    (templates and instrumentation included) of the exception that a ``harness_step`` caught."""
    cause = exc.__cause__ or exc
    where = "?"
    for frame in traceback.extract_tb(cause.__traceback__):
        rel = _relative_to_fragment(frame.filename, ("opera", "templates", "instrumentation"))
        if rel is not None:
            where = f"{rel}:{frame.name}"
    return f"harness:{target}:{where}:{type(cause).__name__}"


def target_crash_signature(exc: BaseException, target_name: str, target: object) -> str:
    """The crash signature of ``exc`` on a target object: its frontend paths, its compiler's
    packages, and whether its frontend is native. The one formula the run, the masked crashes of a
    fallback pipeline, and reproducer verification all use."""
    frontend_paths = tuple(getattr(target, "frontend_paths", ()))
    compiler = str(getattr(target, "compiler", ""))
    packages = tuple(sorted({p.strip("/").split("/")[0] for p in frontend_paths} | {compiler}))
    native = bool(getattr(target, "native_frontend", False))
    return crash_signature(exc, target_name, frontend_paths, packages, native_frontend=native)


def converter_of(target: Any, built: Any) -> str | None:
    """The converter ``built`` goes through on ``target`` (``Target.converter_name``), or None when
    it cannot be told: naming is best effort, and the API is a fine fallback."""
    try:
        return target.converter_name(built)
    except Exception:
        return None
