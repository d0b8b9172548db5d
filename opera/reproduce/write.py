"""Standalone reproducer scripts for failing tests (docs/design.md, Reproduce).

A reproducer needs only the source library and the compiler, never Opera: it embeds the artifact
the frontend consumed (ONNX model bytes, a ``torch.export.save`` archive, a TFLite flatbuffer) and
the runtime inputs (dtype + shape + base64 bytes, so bfloat16 survives), runs the same frontend
calls the target makes, and compares with the library's reference outputs, also embedded.
Exit status: 1 when the failure shows (an exception propagates, or the outputs differ beyond the
threshold), 0 when it no longer reproduces; a native crash or hang shows as itself.

What a target contributes is its *steps* (``Target.reproducer_steps``, built from the pieces in
``opera.reproduce.steps``): ``(artifact bytes, inputs, code)``, where ``code`` uses ``ARTIFACT``
(bytes), ``INPUTS`` (list of numpy arrays) and ``np`` and sets ``outputs`` (list of numpy arrays).
This module wraps them into the script: the embedded data, and the comparison with Opera's own
oracle functions.
"""

from __future__ import annotations

import ast
import base64
import json
from pathlib import Path
from typing import Any

import numpy as np

from opera.model import OperatorInstance
from opera.outcomes import TestResult
from opera.templates import SingleOpModel
from opera.verdict.signature import signature_digest

__all__ = ["write_reproducer"]


# ---- the script -------------------------------------------------------------------------------


def _encode_string(value: Any) -> dict[str, str]:
    """One element of a string tensor, base64 (the JSON sits in a Python string literal, where
    its escapes of quotes and newlines would be read as Python's)."""
    if isinstance(value, bytes | bytearray | np.bytes_):
        return {"bytes": base64.b64encode(bytes(value)).decode()}
    return {"str": base64.b64encode(str(value).encode("utf-8")).decode()}


def _encode_arrays(arrays: list[Any]) -> str:
    """dtype + shape + bytes per array (the script's ``_arrays`` reads them back). A 0-d array stays
    0-d (``np.ascontiguousarray`` returns at least 1-d); string and object arrays (ONNX string
    tensors) are stored as their values, one ``{"str"}`` or ``{"bytes"}`` per element; fixed-width
    numpy strings (``<U5``) as their bytes."""
    items: list[dict[str, Any]] = []
    for value in arrays:
        arr = np.asarray(value, order="C")
        if arr.dtype.kind == "O":
            items.append(
                {
                    "dtype": "object",
                    "shape": list(arr.shape),
                    "values": [_encode_string(v) for v in arr.reshape(-1).tolist()],
                }
            )
            continue
        if arr.dtype.byteorder == ">":
            arr = arr.astype(arr.dtype.newbyteorder("<"))
        # strings by their full spelling ("<U5": the name "str160" does not parse back); the rest
        # by name (ml_dtypes' float8_e5m2 is "<f1" otherwise)
        dtype = arr.dtype.str if arr.dtype.kind in "US" else arr.dtype.name
        items.append(
            {"dtype": dtype, "shape": list(arr.shape), "b64": base64.b64encode(arr.tobytes()).decode()}
        )
    return json.dumps(items)


def _wrap(text: str, width: int = 100) -> str:
    return "\n".join(text[i : i + width] for i in range(0, len(text), width)) or ""


_SCRIPT = '''#!/usr/bin/env python3
"""Opera reproducer (standalone: needs {requirements}, not Opera).

signature: {signature}
target:    {target}
instance:  {instance_id} ({api}), source {source}
verdict:   {outcome} at stage {stage}
message:   {message}

Exit status 1: the failure reproduces (an exception, or outputs beyond the threshold);
0: it does not. A native crash or a hang shows as itself.
"""
import base64
import json
import sys

import numpy as np


def _dtype(name):
    try:
        return np.dtype(name)
    except TypeError:  # bfloat16, float8_*, float4_*, int4, uint4, ...: ml_dtypes
        import ml_dtypes

        return np.dtype(getattr(ml_dtypes, name))


def _array(item):
    if "values" in item:  # strings / objects
        values = [base64.b64decode(v["bytes"]) if "bytes" in v else base64.b64decode(v["str"]).decode("utf-8") for v in item["values"]]
        arr = np.empty(len(values), dtype=object)
        arr[:] = values
        return arr.reshape(item["shape"])
    return np.frombuffer(base64.b64decode(item["b64"]), dtype=_dtype(item["dtype"])).reshape(item["shape"]).copy()


def _arrays(text):
    return [_array(item) for item in json.loads(text)]


ARTIFACT = base64.b64decode("""
{artifact}
""".replace("\\n", ""))
INPUTS = _arrays("""{inputs}""")
EXPECTED = _arrays("""{expected}""")
THRESHOLDS = {thresholds!r}  # per output: atol, rtol, whether the dtype must match
COMPARE_VALUES = {compare_values!r}  # False for a random operator: count, shapes and dtypes only
EXPECTED_OUTCOME = {outcome!r}

# ---- the target's steps: convert, compile, run ----
{code}
# ---- compare with the library's reference: Opera's own oracle functions (opera/verdict/oracles.py) ----
{oracle}

def _allowed(expected, atol, rtol):
    return atol if rtol == 0.0 else atol + rtol * _max_abs_finite(expected)


failed = len(outputs) != len(EXPECTED)
if failed:
    print(f"output count differs: expected {{len(EXPECTED)}}, got {{len(outputs)}}")
for index, (expected, actual) in enumerate(zip(EXPECTED, outputs)):
    expected, actual = np.asarray(expected), np.asarray(actual)
    atol, rtol, check_dtype = THRESHOLDS[index]
    problems, distance, allowed = [], float("inf"), _allowed(expected, atol, rtol)
    if expected.shape != actual.shape:
        problems.append(f"shape {{expected.shape}} vs {{actual.shape}}")
    else:
        if check_dtype and dtypes_differ(expected, actual):
            problems.append(f"dtype {{expected.dtype}} vs {{actual.dtype}}")
        pattern = nonfinite_mismatch(expected, actual) if COMPARE_VALUES else None
        if pattern:
            problems.append(pattern)
        else:
            try:
                distance = chebyshev_distance(expected, actual)
            except (TypeError, ValueError) as exc:
                problems.append(f"not comparable ({{exc}})")
            else:
                if COMPARE_VALUES and distance > allowed:
                    problems.append(f"distance {{distance:.6g}} > {{allowed:.3g}}")
    failed = failed or bool(problems)
    print(f"output {{index}}: {{expected.dtype}}{{list(expected.shape)}} chebyshev distance {{distance:.6g}} (allowed {{allowed:.3g}}){{'  <- INCONSISTENT: ' + '; '.join(problems) if problems else ''}}")
if failed:
    print("REPRODUCED: the outputs differ from the library's reference")
    sys.exit(1)
print(f"not reproduced (expected {{EXPECTED_OUTCOME}}): outputs match the reference")
sys.exit(0)
'''

def _oracle_source() -> str:
    """The oracle's own comparison functions as source, for a script that has numpy but not Opera
    (one definition: a reproducer judges exactly as the run did)."""
    import inspect

    from opera.verdict import oracles

    functions = (
        oracles._as_comparable,
        oracles._max_abs_finite,
        oracles.nonfinite_mismatch,
        oracles.chebyshev_distance,
        oracles.dtypes_differ,
    )
    header = f"import math\nfrom typing import Any\n\n_LOW_PRECISION = {oracles._LOW_PRECISION!r}\n\n\n"
    return header + "\n\n".join(inspect.getsource(f) for f in functions)


_REQUIREMENTS = {
    "onnx": "numpy, onnx",
    "torch": "numpy, torch",
    "keras": "numpy, keras/tensorflow",
}


def _thresholds(
    config: Any, target: str, instance: OperatorInstance, built: SingleOpModel, reference: list[Any]
) -> list[tuple[float, float, bool]]:
    """Per reference output, the (atol, rtol, check_dtype) the oracle judged it with
    (``opera.verdict.oracles.compare_outputs``: the judging dtype, then the instance's float tolerance)."""
    from opera.verdict.oracles import _LOW_PRECISION, _judging_dtype

    input_dtypes = [a.dtype.name for a in built.inputs if isinstance(a, np.ndarray)]
    out = []
    for value in reference:
        ref = np.asarray(value)
        threshold = config.threshold(target, _judging_dtype(ref, input_dtypes))
        if instance.tolerance is not None and (ref.dtype.kind in "fcV" or ref.dtype.name in _LOW_PRECISION):
            threshold = threshold.loosened(instance.tolerance.atol, instance.tolerance.rtol)
        out.append((float(threshold.atol), float(threshold.rtol), bool(threshold.check_dtype)))
    return out


def write_reproducer(
    instance: OperatorInstance,
    target: Any,
    result: TestResult,
    directory: str | Path,
    *,
    built: SingleOpModel | None = None,
    reference: list[np.ndarray] | None = None,
    file_name: str | None = None,
) -> Path | None:
    """Write ``<directory>/<signature-hash>.py`` (or ``file_name``); None when the target has no
    steps. ``built``/``reference`` are rebuilt with the instance's template when not given."""
    if built is None or reference is None:
        from opera.templates import get_template

        template = get_template(instance.library)
        built = template.build(instance)
        pristine = [x.copy() if isinstance(x, np.ndarray) else x for x in built.inputs]
        reference = template.reference(built)
        built.inputs = pristine
    steps = target.reproducer_steps(built)
    if steps is None:
        return None
    artifact, inputs, code = steps
    from opera.verdict.oracles import load_oracle_config

    oracle = load_oracle_config()
    thresholds = _thresholds(oracle, target.name, instance, built, reference)
    message = " ".join(result.message.strip().splitlines()[-1:])[:300].replace('"""', "'''")
    compiler = getattr(target, "compiler", "the compiler")
    text = _SCRIPT.format(
        requirements=f"{_REQUIREMENTS.get(instance.library, instance.library)}, {compiler}",
        signature=result.signature,
        target=target.name,
        instance_id=instance.id,
        api=instance.api,
        source=f"{instance.source.suite} {instance.source.test}".strip(),
        outcome=result.outcome.value,
        stage=result.stage.value,
        message=message.replace("\\", "\\\\"),
        artifact=_wrap(base64.b64encode(artifact).decode()),
        inputs=_encode_arrays(inputs),
        expected=_encode_arrays(reference),
        thresholds=thresholds,
        compare_values=not oracle.is_random(instance.api),
        code=code,
        oracle=_oracle_source(),
    )
    try:
        ast.parse(text)
    except SyntaxError as exc:  # embedded source that is not what this process loaded
        raise ValueError(
            f"the reproducer script does not parse (line {exc.lineno}: {exc.msg}): Opera's source changed on "
            "disk while this process ran; a fresh process writes it again"
        ) from None
    out_dir = Path(directory)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / (file_name or f"{signature_digest(result.signature or instance.id)}.py")
    path.write_text(text, encoding="utf-8")
    return path
