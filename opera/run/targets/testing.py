"""Test-only targets for Opera's own tests (``test_only = True``: hidden from ``opera targets``).

All three consume ``onnx`` instances through the real ONNX template and use onnxruntime as their
"compiler", so they exercise the whole runner path without TVM or OpenVINO:

- ``test-wrong``: a correct conversion whose outputs are off by one (``+1``, booleans negated):
  the oracle must report every test ``inconsistent``.
- ``test-faults``: misbehaves as the instance's ``source.test`` asks, ``fault:<kind>[@<stage>]``
  with kind ``slow`` (sleeps 0.25 s, then passes), ``segv`` (SIGSEGV), ``abort`` (SIGABRT), ``hang`` (sleeps forever), ``lag`` (sleeps 6 s, then passes), ``alloc``
  (allocates without bound), ``raise`` (a Python exception: ``crash``), ``flaky`` (SIGSEGV in the run; its reproducer dies on every
  second run only), ``unsupported`` (an
  exception matched by ``opera/verdict/unsupported.toml``), ``poisoned`` (SIGABRT, but only in a worker
  that converted another test before: a death that needs an earlier test's state, which a fresh
  worker does not show) or ``harness`` (an exception in the target's own
  input preparation / output decoding, inside ``harness_step``: ``harness-error``), ``library-hang``
  and ``library-segv`` (a hang, a SIGSEGV inside ``library_step``: the library making the
  artifact, e.g. torch.export, so ``invalid``), ``library-slow`` (3 s inside ``library_step``, 2 s
  outside, then passes: the library's time is not on the test's clock), in stage ``convert`` (default), ``compile`` or
  ``run``. Any other instance passes.
- ``test-variants``: correct by default, with broken variants for the metamorphic rules
  (``opera.run.rules``): its ``optlevel`` build is off by one, its ``reload`` raises.
- ``test-drift``: a compiler whose behaviour changes between runs, for the nightly comparison
  tests. ``OPERA_TEST_DRIFT`` names a JSON file ``{"version": "2", "behaviour": {"<source.test>":
  "<kind>"}}``; kind ``pass``, ``wrong`` (outputs +1: ``inconsistent``), ``raise`` (RuntimeError:
  ``crash``), ``raise-type`` (TypeError: a crash with another signature) or ``unsupported``. A
  test the file does not name passes. ``version`` is reported by ``versions()``, so a change of
  verdict can be tied to a "compiler" upgrade.
"""

from __future__ import annotations

import ctypes
import json
import os
import time
from typing import Any

import numpy as np

from opera.run.targets import Target, harness_step, library_step, register_target
from opera.templates import SingleOpModel

__all__ = ["FaultNotSupported", "TestDriftTarget", "TestFaultsTarget", "TestVariantsTarget", "TestWrongTarget", "fault_of"]


class FaultNotSupported(Exception):
    """What ``test-faults`` raises for ``fault:unsupported`` (listed in unsupported.toml)."""


class _OrtSession:
    def __init__(self, model_bytes: bytes, input_names: list[str]) -> None:
        self.model_bytes = model_bytes
        self.input_names = input_names
        self.session: Any = None


class _OrtTarget(Target):
    library = "onnx"
    compiler = "onnxruntime"
    test_only = True
    frontend_paths = ("opera/run/targets/testing.py",)
    requires = ("onnxruntime",)
    # api onnx::Unsupported* raises this (see ``_inject``)
    unsupported_patterns: tuple[str, ...] = (r"^opera\.run\.targets\.testing\.FaultNotSupported:",)

    def convert(self, built: SingleOpModel) -> _OrtSession:
        return _OrtSession(bytes(built.model.SerializeToString()), list(built.input_names))

    def compile(self, converted: _OrtSession) -> _OrtSession:
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.log_severity_level = 3
        converted.session = ort.InferenceSession(
            converted.model_bytes, options, providers=["CPUExecutionProvider"]
        )
        return converted

    def run(self, compiled: _OrtSession, inputs: list[np.ndarray]) -> list[np.ndarray]:
        outputs = compiled.session.run(None, dict(zip(compiled.input_names, inputs, strict=False)))
        return [np.asarray(o) for o in outputs]

    # A standalone reproducer: onnxruntime on the embedded model (see opera.reproduce.write).
    def reproducer_steps(self, built: SingleOpModel) -> tuple[bytes, list[np.ndarray], str]:
        code = (
            "import onnxruntime as ort\n"
            f"INPUT_NAMES = {list(built.input_names)!r}\n"
            "session = ort.InferenceSession(ARTIFACT, providers=['CPUExecutionProvider'])\n"
            "outputs = [np.asarray(o) for o in session.run(None, dict(zip(INPUT_NAMES, INPUTS)))]\n"
        )
        return bytes(built.model.SerializeToString()), list(built.inputs), code


def _off_by_one(x: np.ndarray) -> np.ndarray:
    arr = np.asarray(x)
    if arr.dtype == np.bool_:
        return ~arr
    return (arr + np.ones((), dtype=arr.dtype)).astype(arr.dtype)


@register_target
class TestWrongTarget(_OrtTarget):
    """onnxruntime, then +1 on every output: a deliberately wrong compiler."""

    __test__ = False
    name = "test-wrong"
    batchable = True

    def run(self, compiled: _OrtSession, inputs: list[np.ndarray]) -> list[np.ndarray]:
        return [_off_by_one(o) for o in super().run(compiled, inputs)]

    def reproducer_steps(self, built: SingleOpModel) -> tuple[bytes, list[np.ndarray], str]:
        artifact, inputs, code = super().reproducer_steps(built)
        code += "# the deliberate bug of the test-wrong target:\noutputs = [~o if o.dtype == np.bool_ else (o + np.ones((), o.dtype)).astype(o.dtype) for o in outputs]\n"
        return artifact, inputs, code


@register_target
class TestVariantsTarget(_OrtTarget):
    """onnxruntime, correct; its ``optlevel`` variant adds one to every output (a wrong optimizing
    build), its ``reload`` variant raises: the rules must report both, the test itself passes."""

    __test__ = False
    name = "test-variants"

    def compile_variant(self, converted: _OrtSession, variant: str) -> _OrtSession:
        if variant == "reload":
            raise RuntimeError("injected failure reading the saved model back")
        if variant != "optlevel":
            return super().compile_variant(converted, variant)
        compiled = self.compile(_OrtSession(converted.model_bytes, converted.input_names))
        compiled.wrong = True  # type: ignore[attr-defined]
        return compiled

    def run(self, compiled: _OrtSession, inputs: list[np.ndarray]) -> list[np.ndarray]:
        outputs = super().run(compiled, inputs)
        return [_off_by_one(o) for o in outputs] if getattr(compiled, "wrong", False) else outputs


def fault_of(built: SingleOpModel) -> tuple[str | None, str]:
    """(fault kind or None, stage) from the instance's ``source.test`` = ``fault:<kind>[@<stage>]``;
    for a combined model (a batch), the first faulty part's."""
    for inst in built.details.get("parts") or [built.instance]:
        test = inst.source.test
        if test.startswith("fault:"):
            kind, _, stage = test[len("fault:") :].partition("@")
            return kind, stage or "convert"
    return None, "convert"


def _inject(kind: str) -> None:
    if kind in ("segv", "flaky"):
        ctypes.string_at(0)  # reads address 0: SIGSEGV
    elif kind == "abort":
        os.abort()
    elif kind == "slow":  # a slow but correct compiler (resume tests kill a run mid-way)
        time.sleep(0.25)
    elif kind == "hang":
        while True:
            time.sleep(3600)
    elif kind == "lag":  # past a short test timeout, then done: slow, not a hang
        time.sleep(6.0)
    elif kind == "alloc":
        blocks = []
        while True:  # 64 MiB per step, touched so that it is resident
            blocks.append(np.ones(8 << 20, dtype=np.float64))
            time.sleep(0.005)
    elif kind == "raise":
        raise RuntimeError("injected fault in the test-faults target")
    elif kind == "unsupported":
        raise FaultNotSupported("the test-faults target does not support this operator")
    elif kind == "library-slow":  # 3 s of the library's time, then 2 s of the compiler's: passes
        with library_step():
            time.sleep(3.0)
        time.sleep(2.0)
    elif kind in ("library-hang", "library-segv"):
        with library_step():
            _inject(kind.removeprefix("library-"))
    elif kind == "harness":
        with harness_step("decode the outputs"):
            np.asarray([[1.0], [2.0, 3.0]], dtype=np.float32)  # a ragged list: Opera's decoding bug
    else:
        raise ValueError(f"unknown fault kind {kind!r}")


_converted_before: set[str] = set()  # the tests this process converted (the ``poisoned`` fault)


@register_target
class TestFaultsTarget(_OrtTarget):
    """onnxruntime, with the fault the instance asks for (see the module docstring)."""

    __test__ = False
    name = "test-faults"
    batchable = True  # opera run --batch: a fault anywhere in a batch hits the whole batch

    def convert(self, built: SingleOpModel) -> _OrtSession:
        kind, stage = fault_of(built)
        if kind == "poisoned":
            if _converted_before - {built.instance.id}:
                os.abort()
        elif kind is not None and stage == "convert":
            _inject(kind)
        if built.instance.source.suite != "opera-warm-up":
            _converted_before.add(built.instance.id)
        session = super().convert(built)
        session.fault = (kind, stage)  # type: ignore[attr-defined]
        return session

    def compile(self, converted: _OrtSession) -> _OrtSession:
        kind, stage = getattr(converted, "fault", (None, ""))
        if kind is not None and stage == "compile":
            _inject(kind)
        return super().compile(converted)

    def run(self, compiled: _OrtSession, inputs: list[np.ndarray]) -> list[np.ndarray]:
        kind, stage = getattr(compiled, "fault", (None, ""))
        if kind is not None and stage == "run":
            _inject(kind)
        return super().run(compiled, inputs)

    def reproducer_steps(self, built: SingleOpModel) -> tuple[bytes, list[np.ndarray], str]:
        artifact, inputs, code = super().reproducer_steps(built)
        kind, _ = fault_of(built)
        if kind in _FAULT_CODE:
            code = f"# the injected fault of the test-faults target ({kind}):\n{_FAULT_CODE[kind]}\n" + code
        return artifact, inputs, code


# The same faults as source code, for standalone reproducers.
_FAULT_CODE = {
    "segv": "import ctypes\nctypes.string_at(0)",
    "abort": "import os\nos.abort()",
    "slow": "import time\ntime.sleep(0.25)",
    "hang": "import time\nwhile True:\n    time.sleep(3600)",
    "lag": "import time\ntime.sleep(6.0)",
    "alloc": "blocks = []\nwhile True:\n    blocks.append(np.ones(8 << 20))",
    "raise": "raise RuntimeError('injected fault in the test-faults target')",
    # fails on every second run of the script (the run count kept in the file $OPERA_TEST_FLAKY)
    "flaky": (
        "import os, pathlib\n_count = pathlib.Path(os.environ['OPERA_TEST_FLAKY'])\n"
        "_runs = int(_count.read_text()) if _count.exists() else 0\n_count.write_text(str(_runs + 1))\n"
        "if _runs % 2:\n    import ctypes\n    ctypes.string_at(0)"
    ),
    "unsupported": "raise NotImplementedError('the test-faults target does not support this operator')",
    "harness": "np.asarray([[1.0], [2.0, 3.0]], dtype=np.float32)",
}


# ---- test-drift -------------------------------------------------------------------------------

DRIFT_ENV = "OPERA_TEST_DRIFT"


def _drift_config() -> dict[str, Any]:
    path = os.environ.get(DRIFT_ENV)
    if not path:
        return {}
    with open(path, encoding="utf-8") as f:
        return dict(json.load(f))


def _drift_inject(kind: str) -> None:
    if kind == "raise":
        raise RuntimeError("injected crash in the test-drift target")
    if kind == "raise-type":
        raise TypeError("injected crash of another kind in the test-drift target")
    if kind == "unsupported":
        raise FaultNotSupported("the test-drift target does not support this operator")
    if kind not in ("pass", "wrong"):
        raise ValueError(f"unknown drift kind {kind!r}")


@register_target
class TestDriftTarget(_OrtTarget):
    """onnxruntime, misbehaving as ``$OPERA_TEST_DRIFT`` says (see the module docstring)."""

    __test__ = False
    name = "test-drift"

    def versions(self) -> dict[str, str]:
        return {**super().versions(), "test-drift": str(_drift_config().get("version", "0"))}

    def convert(self, built: SingleOpModel) -> _OrtSession:
        kind = str(_drift_config().get("behaviour", {}).get(built.instance.source.test, "pass"))
        _drift_inject(kind)
        session = super().convert(built)
        session.fault = (kind, "run")  # type: ignore[attr-defined]
        return session

    def run(self, compiled: _OrtSession, inputs: list[np.ndarray]) -> list[np.ndarray]:
        outputs = super().run(compiled, inputs)
        if getattr(compiled, "fault", (None, ""))[0] == "wrong":
            return [_off_by_one(o) for o in outputs]
        return outputs
