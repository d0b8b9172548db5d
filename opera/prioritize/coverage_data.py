"""Per-test statement coverage of a compiler frontend, for the total-/additional-coverage baselines.

File format (JSON)::

    {"format": "opera-coverage", "version": 1, "target": "tvm-onnx",
     "include": ["<frontend source dir>"], "corpus": ["harvested/onnx.jsonl.gz"],
     "tests": {"<instance id>": ["onnx_frontend.py:123", ...], ...},
     "failed": {"<instance id>": "<why no coverage>", ...}}

A bare mapping ``{instance id: ["file:line", ...]}`` is accepted too. File names are relative to the
frontend directory. ``measure`` fills it for an ONNX corpus on the ``tvm-onnx`` target: it builds
each instance's single-node model with the ONNX template and converts it with
``tvm.relax.frontend.onnx.from_onnx`` under ``coverage.Coverage(include=[frontend dir])``, one
instance at a time so each test's lines are its own (conversion failures keep the lines executed
before the failure: a crashing test covers code too).

Run: ``python -m opera.prioritize.coverage_data CORPUS... --target tvm-onnx -o coverage.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Iterable, Sequence
from pathlib import Path

from opera.errors import OperaError

__all__ = ["COVERAGE_COMMAND", "CoverageDataMissing", "load_coverage", "measure_tvm_onnx", "main"]

COVERAGE_COMMAND = "python -m opera.prioritize.coverage_data CORPUS... --target tvm-onnx -o COVERAGE.json"
SUPPORTED_TARGETS = ("tvm-onnx",)


class CoverageDataMissing(OperaError):
    pass


def missing_message(strategy: str) -> str:
    return (
        f"strategy {strategy} needs coverage data: run `{COVERAGE_COMMAND}` first and pass it with --coverage"
    )


def load_coverage(path: str | os.PathLike[str] | None, strategy: str = "total-cov") -> dict[str, list[str]]:
    """instance id -> covered "file:line" statements."""
    if path is None or not Path(path).exists():
        raise CoverageDataMissing(missing_message(strategy) + (f" ({path} not found)" if path else ""))
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise OperaError(f"{path}: not a coverage-data JSON file: {exc}") from None
    tests = data.get("tests", data) if isinstance(data, dict) else None
    if not isinstance(tests, dict) or not all(isinstance(v, list) for v in tests.values()):
        raise OperaError(f'{path}: expected {{instance id: ["file:line", ...]}} (or an opera-coverage file)')
    return {str(k): [str(s) for s in v] for k, v in tests.items()}


def _tvm_onnx_frontend_dir() -> Path:
    import tvm.relax.frontend.onnx as frontend

    return Path(frontend.__file__).resolve().parent


def measure_tvm_onnx(instances: Iterable[object], *, progress: bool = True) -> dict[str, object]:
    """Coverage of TVM's ONNX frontend per instance (see the module docstring)."""
    import coverage
    from tvm.relax.frontend.onnx import from_onnx

    from opera.model import OperatorInstance
    from opera.progress import progress_bar
    from opera.targets._onnx_prep import prepare_onnx
    from opera.targets.tvm import _onnx_opset
    from opera.templates import get_template

    frontend = _tvm_onnx_frontend_dir()
    template = get_template("onnx")
    tests: dict[str, list[str]] = {}
    failed: dict[str, str] = {}
    cov = coverage.Coverage(include=[str(frontend / "*")], data_file=None, branch=False)
    items = list(instances)
    bar = progress_bar(total=len(items), desc="coverage", unit="test", disable=not progress)
    for inst in items:
        bar.update(1)
        assert isinstance(inst, OperatorInstance)
        if inst.id in tests or inst.id in failed:
            continue
        try:
            built = template.build(inst)
            prepared = prepare_onnx(built.model, built.inputs, built.input_names or None)
        except Exception as exc:  # not a frontend test: the model could not be built
            failed[inst.id] = f"build: {type(exc).__name__}: {str(exc)[:120]}"
            continue
        cov.erase()
        cov.start()
        try:
            from_onnx(prepared.model, opset=_onnx_opset(prepared.model), keep_params_in_input=False)
        except Exception:
            pass
        finally:
            cov.stop()
        data = cov.get_data()
        lines: list[str] = []
        for filename in sorted(data.measured_files()):
            rel = os.path.relpath(filename, frontend)
            lines.extend(f"{rel}:{n}" for n in sorted(data.lines(filename) or ()))
        tests[inst.id] = lines
    bar.close()
    return {"include": [str(frontend)], "tests": tests, "failed": failed}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m opera.prioritize.coverage_data", description=__doc__.splitlines()[0]
    )
    parser.add_argument("corpus", nargs="+")
    parser.add_argument("--target", default="tvm-onnx", choices=SUPPORTED_TARGETS)
    parser.add_argument("--limit", type=int, default=None, help="measure only the first N instances")
    parser.add_argument("-o", "--output", required=True)
    args = parser.parse_args(argv)
    from opera.corpus import read_corpus

    try:
        instances = [i for i in read_corpus(*args.corpus) if i.library == "onnx"]
    except OperaError as exc:
        print(f"coverage_data: error: {exc}", file=sys.stderr)
        return 2
    if args.limit is not None:
        instances = instances[: args.limit]
    start = time.perf_counter()
    result = measure_tvm_onnx(instances)
    out = {
        "format": "opera-coverage",
        "version": 1,
        "target": args.target,
        "corpus": list(args.corpus),
        **result,
    }
    out["seconds"] = round(time.perf_counter() - start, 2)
    Path(args.output).write_text(json.dumps(out, sort_keys=True))
    tests, failed = result["tests"], result["failed"]
    assert isinstance(tests, dict) and isinstance(failed, dict)
    print(
        f"{len(tests)} instances measured, {len(failed)} not buildable, {out['seconds']} s -> {args.output}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
