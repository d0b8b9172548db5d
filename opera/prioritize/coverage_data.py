"""Per-test statement coverage of a compiler frontend, for the total-/additional-coverage baselines.

File format (JSON)::

    {"format": "opera-coverage", "version": 1, "target": "tvm-onnx",
     "include": ["<frontend source dir>"], "corpus": ["harvested/onnx.jsonl.gz"],
     "tests": {"<instance id>": ["onnx_frontend.py:123", ...], ...},
     "failed": {"<instance id>": "<why no coverage>", ...}}

A bare mapping ``{instance id: ["file:line", ...]}`` is accepted too. File names are relative to the
frontend directories' common parent. ``measure`` fills it for any target: it builds each instance
with its library's template and runs the target's frontend stages (``Target.coverage_stages``:
``convert``, plus ``compile`` for the lazy ``torch.compile``) under
``coverage.Coverage(include=[the target's frontend_paths])``, one instance at a time so each test's
lines are its own (failures keep the lines executed before them: a crashing test covers code too).
OpenVINO's frontends are C++ with thin Python wrappers, so their Python coverage says little.

Run: ``python -m opera.prioritize.coverage_data CORPUS... --target tvm-onnx -o coverage.json``
(``--store S --run N``: only the instances run N planned for that target).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from opera.errors import OperaError

__all__ = ["COVERAGE_COMMAND", "CoverageDataMissing", "collection_seconds", "frontend_dirs", "load_coverage", "main", "measure"]

COVERAGE_COMMAND = "python -m opera.prioritize.coverage_data CORPUS... --target TARGET -o COVERAGE.json"


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


def collection_seconds(path: str | os.PathLike[str] | None) -> float:
    """How long measuring the coverage took (the file's ``seconds``; 0 for a bare mapping): the
    coverage strategies are charged it, since no order exists before the coverage pass ran."""
    if path is None:
        return 0.0
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError):
        return 0.0
    seconds = data.get("seconds") if isinstance(data, dict) and "tests" in data else None
    return float(seconds) if isinstance(seconds, (int, float)) else 0.0


def frontend_dirs(target: Any) -> list[Path]:
    """The installed source directories of a target's frontend (its ``frontend_paths``, which are
    relative to site-packages, e.g. ``tvm/relax/frontend/onnx``), those that exist."""
    import importlib

    dirs = []
    for rel in target.frontend_paths:
        top = rel.split("/")[0]
        try:
            module = importlib.import_module(top)
        except Exception:
            continue
        base = Path(module.__file__ or "").resolve().parent.parent
        path = base / rel
        if path.is_dir():
            dirs.append(path)
    return dirs


def measure(target_name: str, instances: Iterable[object], *, progress: bool = True) -> dict[str, object]:
    """Statement coverage of ``target_name``'s frontend per instance (see the module docstring)."""
    import coverage

    from opera.model import OperatorInstance
    from opera.progress import progress_bar
    from opera.run.targets import get_target
    from opera.templates import get_template

    target = get_target(target_name)
    reason = target.availability()
    if reason is not None:
        raise OperaError(f"target {target_name} is unavailable here: {reason}")
    dirs = frontend_dirs(target)
    if not dirs:
        raise OperaError(f"target {target_name}: none of its frontend paths {target.frontend_paths} is installed")
    template = get_template(target.library)
    tests: dict[str, list[str]] = {}
    failed: dict[str, str] = {}
    cov = coverage.Coverage(include=[str(d / "*") for d in dirs], data_file=None, branch=False)
    root = os.path.commonpath([str(d) for d in dirs])
    items = list(instances)
    bar = progress_bar(total=len(items), desc=f"coverage {target_name}", unit="test", disable=not progress)
    for inst in items:
        bar.update(1)
        assert isinstance(inst, OperatorInstance)
        if inst.id in tests or inst.id in failed:
            continue
        if inst.valid is False:
            failed[inst.id] = "invalid instance"
            continue
        try:
            built = template.build(inst)
        except Exception as exc:  # not a frontend test: the model could not be built
            failed[inst.id] = f"build: {type(exc).__name__}: {str(exc)[:120]}"
            continue
        cov.erase()
        cov.start()
        try:
            value: Any = built
            for stage in target.coverage_stages:
                value = target.convert(value) if stage == "convert" else target.compile(value)
        except Exception:
            pass  # a crashing conversion covers the lines it ran, too
        finally:
            cov.stop()
        data = cov.get_data()
        lines: list[str] = []
        for filename in sorted(data.measured_files()):
            rel = os.path.relpath(filename, root)
            lines.extend(f"{rel}:{n}" for n in sorted(data.lines(filename) or ()))
        tests[inst.id] = lines
    bar.close()
    return {"include": [str(d) for d in dirs], "tests": tests, "failed": failed}


def _run_instance_ids(store: str, run: int, target: str) -> set[str]:
    from opera.store import ResultStore

    with ResultStore(store) as db:
        return {p.instance_id for p in db.planned(run) if p.target == target}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m opera.prioritize.coverage_data", description=__doc__.splitlines()[0]
    )
    parser.add_argument("corpus", nargs="+")
    parser.add_argument("--target", default="tvm-onnx", help="any compiler target (see `opera targets`)")
    parser.add_argument("--limit", type=int, default=None, help="measure only the first N instances")
    parser.add_argument("--store", help="with --run: measure only the instances that run planned for the target")
    parser.add_argument("--run", type=int)
    parser.add_argument("-o", "--output", required=True)
    args = parser.parse_args(argv)
    from opera.corpus import read_corpus

    try:
        from opera.run.targets import get_target

        library = get_target(args.target).library
        instances = [i for i in read_corpus(*args.corpus) if i.library == library]
        if args.store and args.run is not None:
            wanted = _run_instance_ids(args.store, args.run, args.target)
            instances = [i for i in instances if i.id in wanted]
        if args.limit is not None:
            instances = instances[: args.limit]
        start = time.perf_counter()
        result = measure(args.target, instances)
    except OperaError as exc:
        print(f"coverage_data: error: {exc}", file=sys.stderr)
        return 2
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
