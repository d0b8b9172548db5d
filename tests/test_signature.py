"""Bug signatures and the unsupported-pattern config."""

from __future__ import annotations

import pytest

from opera.errors import OperaError
from opera.verdict.signature import (
    crash_signature,
    inconsistency_signature,
    native_signature,
    normalize_message,
)
from opera.verdict.unsupported import load_unsupported

FRONTEND = "/venv/lib/python3.11/site-packages/tvm/relax/frontend/onnx/onnx_frontend.py"
BACKEND = "/venv/lib/python3.11/site-packages/tvm/driver/build_module.py"


def _raise_through(files_and_functions: list[tuple[str, str]], exc: Exception) -> Exception:
    """Raise ``exc`` through real frames whose code objects carry the given file/function names."""
    namespace: dict = {"exc": exc}
    previous = None
    for index, (filename, function) in reversed(list(enumerate(files_and_functions))):
        name = f"frame_{index}"
        body = f"def {name}():\n    {previous}()\n" if previous else f"def {name}():\n    raise exc\n"
        exec(compile(body, filename, "exec"), namespace)
        namespace[name].__code__ = namespace[name].__code__.replace(co_name=function, co_qualname=function)
        previous = name
    try:
        namespace[previous]()
    except Exception as caught:
        return caught
    raise AssertionError("nothing raised")


def test_crash_signature_is_innermost_frontend_frame() -> None:
    exc = _raise_through(
        [(FRONTEND, "_impl_v13"), (FRONTEND, "_helper"), (BACKEND, "build")], KeyError("num_heads")
    )
    sig = crash_signature(exc, "tvm-onnx", ("tvm/relax/frontend/onnx",), ("tvm",))
    assert sig == "crash:tvm-onnx:tvm/relax/frontend/onnx/onnx_frontend.py:_helper:KeyError"


def test_crash_signature_falls_back_to_compiler_then_message() -> None:
    exc = _raise_through(
        [("/opera/targets/tvm.py", "compile"), (BACKEND, "build")], ValueError("bad shape (2, 3) at 0x7f")
    )
    assert crash_signature(exc, "tvm-onnx", ("tvm/relax/frontend/onnx",), ("tvm",)) == (
        "crash:tvm-onnx:tvm/driver/build_module.py:build:ValueError"
    )
    exc2 = _raise_through([("/somewhere/else.py", "f")], ValueError("bad shape (2, 3) at 0x7f"))
    sig = crash_signature(exc2, "tvm-onnx", ("tvm/relax/frontend/onnx",), ("tvm",))
    assert sig == "crash:tvm-onnx:ValueError:bad shape (N, N) at ADDR"
    native = _raise_through(
        [("/somewhere/else.py", "f"), ("/project/src/runtime/sort.cc", "tvm::Topk()::<lambda(int)>")],
        RuntimeError("x"),
    )
    assert crash_signature(native, "tvm-onnx", ("tvm/relax/frontend/onnx",), ("tvm",)) == (
        "crash:tvm-onnx:src/runtime/sort.cc:tvm::Topk()::<lambda>:RuntimeError"
    )


def test_other_signatures_and_normalization() -> None:
    assert inconsistency_signature("ov-onnx", "onnx::Mod") == "inconsistent:ov-onnx:onnx::Mod"
    assert (
        inconsistency_signature("ov-onnx", "onnx::Mod", "translate_mod")
        == "inconsistent:ov-onnx:converter=translate_mod"
    )
    assert native_signature("tvm-onnx", "onnx::Relu", "SIGSEGV") == "native-crash:tvm-onnx:onnx::Relu:SIGSEGV"
    assert native_signature("tvm-onnx", "onnx::Relu", "timeout") == "timeout:tvm-onnx:onnx::Relu"
    assert normalize_message("dtype uint64 index 12 of 'x'") == "dtype uint64 index N of '…'"


def test_unsupported_patterns_per_target_and_compiler(tmp_path) -> None:
    patterns = load_unsupported()
    no_rule = RuntimeError(
        "Model wasn't fully converted.\n-- No conversion rule found for operations: TfIdfVectorizer-9"
    )
    assert patterns.match(no_rule, "ov-onnx", "openvino") is not None
    assert patterns.match(no_rule, "tvm-onnx", "tvm") is None
    axes = AssertionError("Only constant axes currently supported")
    assert patterns.match(axes, "tvm-onnx", "tvm") is not None
    assert (
        patterns.match(KeyError("num_heads"), "tvm-onnx", "tvm") is None
    )  # a frontend bug, not "unsupported"
    chained = RuntimeError("wrapper")
    chained.__cause__ = axes
    assert patterns.match(chained, "tvm-onnx", "tvm") is not None
    bad = tmp_path / "u.toml"
    bad.write_text('[target."x"]\npatterns = ["(unclosed"]\n')
    with pytest.raises(OperaError, match="bad regular expression"):
        load_unsupported(bad)


@pytest.mark.slow
def test_converter_names_of_real_frontends() -> None:
    from _run_fixtures import relus, torch_gelu

    from opera.run.targets import get_target
    from opera.templates import get_template
    from opera.verdict.signature import converter_of as converter_name

    relu = get_template("onnx").build(relus(1)[0])
    assert converter_name(get_target("tvm-onnx"), relu) == "Relu._impl_v13"  # opset 17 -> the v13 converter
    assert converter_name(get_target("ov-onnx"), relu) is None  # falls back to the API
    assert converter_name(get_target("test-wrong"), relu) is None
    gelu = get_template("torch").build(torch_gelu())
    assert converter_name(get_target("tvm-torch"), gelu) == "aten.gelu.default"


def test_native_frontend_signature_uses_the_cpp_translator_named_in_the_message() -> None:
    message = (
        "Check 'false' failed at src/frontends/common_translators/src/unconverted_ops_report.cpp:151:\n"
        "FrontEnd API failed with OpConversionFailure:\n-- Mod-28 with a message:\n"
        "Check 'x.get_element_type().is_integral()' failed at src/frontends/onnx/frontend/src/op/mod.cpp:27:\n"
    )
    exc = _raise_through(
        [("/venv/site-packages/openvino/frontend/frontend.py", "convert")], RuntimeError(message)
    )
    paths = ("openvino/frontend",)
    assert crash_signature(exc, "ov-onnx", paths, ("openvino",), native_frontend=True) == (
        "crash:ov-onnx:src/frontends/onnx/frontend/src/op/mod.cpp:RuntimeError"
    )
    assert (
        crash_signature(exc, "ov-onnx", paths, ("openvino",))
        == "crash:ov-onnx:openvino/frontend/frontend.py:convert:RuntimeError"
    )
    only_generic = _raise_through(
        [("/venv/site-packages/openvino/frontend/frontend.py", "convert")],
        RuntimeError(message.split("\n")[0]),
    )
    assert crash_signature(only_generic, "ov-onnx", paths, native_frontend=True).startswith(
        "crash:ov-onnx:openvino/frontend/frontend.py"
    )


def test_openvino_unsupported_element_type() -> None:
    patterns = load_unsupported()
    exc = RuntimeError(
        "Check 'false' failed at src/frontends/common/src/frontend.cpp:47:\nLoading input model\nUnsupported type\n"
    )
    assert patterns.match(exc, "ov-onnx", "openvino") is not None
    other = RuntimeError(
        "Check 'false' failed at src/frontends/common/src/frontend.cpp:47:\nLoading input model\nbad graph\n"
    )
    assert patterns.match(other, "ov-onnx", "openvino") is None
