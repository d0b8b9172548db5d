"""What each form of a torch function instance finds: weights as constants vs. every tensor an input.

``templates/torch_template.py`` builds a function instance (``torch.nn.functional.conv2d(x, w,
b)``) in one of two forms (``tensor_args``): ``constants`` (the default: the data tensor is the one
graph input, the weight, bias, indices, second operand, ... are buffers that ``torch.export``
lifts and the frontends bind as constants) or ``inputs`` (every tensor argument a graph input).
This script runs the same seeded sample of valid function instances with at least two tensor
arguments through the torch frontends in both forms and prints, per target and form, the outcome
counts, the number of distinct failure signatures, the signatures only one form finds, and how the
instances moved between outcomes.

Half the sample is drawn from ``torch.nn.functional.*`` (convolutions, linear, normalizations,
embeddings, losses: the operators with weights), half from the rest (binary operators, indexing,
linear algebra, ...), at most ``--per-api`` instances per API, seeded.

Each (target, form) runs in a child process (``opera.run.execution.execute_task`` in process, as
``tests/test_targets.py`` does): a test that kills its process (a native crash) or runs past
``--timeout`` is recorded as ``native-crash`` / ``timeout`` and the child is restarted after it.

    .venv/bin/python benchmarks/torch_constant_weights.py                  # 150 instances, ov-torch + tvm-torch
    .venv/bin/python benchmarks/torch_constant_weights.py -n 40 -t ov-torch --seed 1

Results go to ``benchmarks/results/torch_constant_weights.json``.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import random
import selectors
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
FORMS = ("constants", "inputs")


def tensor_count(inst: Any) -> int:
    """Tensor arguments the template places (top level and directly inside top-level lists)."""
    from opera.templates.torch_template import _is_tensor_value

    count = 0
    for value in [*inst.args, *inst.kwargs.values()]:
        items = value if isinstance(value, (list, tuple)) else [value]
        count += sum(1 for v in items if _is_tensor_value(v))
    return count


def write_sample(corpus: str, n: int, seed: int, per_api: int, out: Path) -> list[str]:
    from opera.corpus import CorpusReader, CorpusWriter
    from opera.model import InstanceKind

    by_api: dict[str, list[Any]] = collections.defaultdict(list)
    for inst in CorpusReader([corpus]):
        if (
            inst.kind == InstanceKind.FUNCTION
            and inst.valid is not False
            and inst.migratable
            and tensor_count(inst) >= 2
        ):
            by_api[inst.api].append(inst)
    rng = random.Random(seed)
    halves: dict[bool, list[Any]] = {True: [], False: []}
    for api in sorted(by_api):
        group = by_api[api]
        halves[api.startswith("torch.nn.functional.")].extend(rng.sample(group, min(per_api, len(group))))
    picked: list[Any] = []
    for functional, want in ((True, n // 2), (False, n - n // 2)):
        pool = halves[functional]
        picked.extend(rng.sample(pool, min(want, len(pool))))
    picked.sort(key=lambda i: (i.api, i.id))
    with CorpusWriter(out, header={"sample_of": corpus, "n": n, "seed": seed, "per_api": per_api}) as writer:
        for inst in picked:
            writer.write(inst)
    return [i.id for i in picked]


# -- the child: one (target, form), instances in order, one JSON line per test ----------------


def child(sample: str, target: str, form: str, skip: int) -> None:
    from opera.corpus import CorpusReader
    from opera.run.execution import WorkerState, execute_task
    from opera.run.executors import TestTask, WorkerSettings
    from opera.templates import _cache, get_template
    from opera.templates.torch_template import TorchTemplate

    class _Form(TorchTemplate):
        """The torch template with ``tensor_args`` fixed (whatever the caller passes)."""

        def build(self, inst: Any, seed: int = 0, **_: Any) -> Any:
            return super().build(inst, seed, tensor_args=form)

    get_template("torch")
    _cache["torch"] = _Form()
    state = WorkerState(WorkerSettings(seed=0, torch_tensor_args=form))
    for k, inst in enumerate(CorpusReader([sample])):
        if k < skip:
            continue
        print(json.dumps({"start": k, "id": inst.id}), flush=True)
        result = execute_task(TestTask(k, inst, target), state, lambda stage: None).result
        assert result is not None
        row = {
            "done": k,
            "id": inst.id,
            "api": inst.api,
            "outcome": result.outcome.value,
            "stage": str(result.stage.value if hasattr(result.stage, "value") else result.stage),
            "signature": result.signature,
            "message": (result.message or "")[-160:] if result.signature else "",
        }
        print(json.dumps(row), flush=True)


def run_form(sample: Path, count: int, target: str, form: str, timeout_s: float) -> list[dict[str, Any]]:
    """Every instance of ``sample`` on ``target`` in ``form``, restarting the child after a death."""
    rows: list[dict[str, Any]] = []
    env = {**os.environ, "CI": "true", "TF_CPP_MIN_LOG_LEVEL": "2"}  # CI=true: no OpenVINO telemetry
    while len(rows) < count:
        cmd = [sys.executable, __file__, "--child", str(sample), target, form, str(len(rows))]
        proc = subprocess.Popen(
            cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
        )
        assert proc.stdout is not None
        selector = selectors.DefaultSelector()
        selector.register(proc.stdout, selectors.EVENT_READ)
        current: dict[str, Any] | None = None
        started = time.monotonic()
        warm = False  # the first test also pays the imports
        while True:
            limit = timeout_s if warm else timeout_s + 300
            if current is not None and time.monotonic() - started > limit:
                proc.kill()
                proc.wait()
                rows.append({"id": current["id"], "outcome": "timeout", "signature": f"{target}:timeout"})
                break
            if not selector.select(timeout=1.0):
                if proc.poll() is not None:
                    break
                continue
            line = proc.stdout.readline()
            if not line:
                proc.wait()
                if current is not None:  # died inside a test: a native crash
                    rows.append(
                        {
                            "id": current["id"],
                            "outcome": "native-crash",
                            "signature": f"{target}:native:{proc.returncode}",
                        }
                    )
                break
            if not line.startswith("{"):
                continue
            event = json.loads(line)
            if "start" in event:
                current, started = event, time.monotonic()
            else:
                rows.append(event)
                current, warm = None, True
        selector.close()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return rows


def summarize(results: dict[tuple[str, str], list[dict[str, Any]]], targets: list[str]) -> list[str]:
    lines = []
    outcomes = sorted({r["outcome"] for rows in results.values() for r in rows})
    head = f"{'target':<10} {'form':<10} " + " ".join(f"{o:>12}" for o in outcomes) + f" {'signatures':>11}"
    lines += [head, "-" * len(head)]
    sigs: dict[tuple[str, str], set[str]] = {}
    for (target, form), rows in results.items():
        counts = collections.Counter(r["outcome"] for r in rows)
        sigs[(target, form)] = {r["signature"] for r in rows if r.get("signature")}
        lines.append(
            f"{target:<10} {form:<10} "
            + " ".join(f"{counts.get(o, 0):>12}" for o in outcomes)
            + f" {len(sigs[(target, form)]):>11}"
        )
    for target in targets:
        if not all((target, f) in results for f in FORMS):
            continue
        a, b = sigs[(target, FORMS[0])], sigs[(target, FORMS[1])]
        lines.append("")
        lines.append(f"{target}: {len(a & b)} signatures in both forms")
        for form, only in ((FORMS[0], a - b), (FORMS[1], b - a)):
            lines.append(f"  only with {form} ({len(only)}):")
            lines += [f"    {s}" for s in sorted(only)]
        before = {r["id"]: r["outcome"] for r in results[(target, FORMS[1])]}
        moves = collections.Counter(
            (before.get(r["id"], "?"), r["outcome"])
            for r in results[(target, FORMS[0])]
            if before.get(r["id"]) != r["outcome"]
        )
        lines.append(f"  instances that changed outcome ({FORMS[1]} -> {FORMS[0]}):")
        lines += [f"    {x} -> {y}: {c}" for (x, y), c in sorted(moves.items())]
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--corpus", default=str(ROOT / "harvested" / "torch.jsonl.gz"))
    parser.add_argument("--target", "-t", action="append", default=[], help="default: ov-torch and tvm-torch")
    parser.add_argument("-n", type=int, default=150)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--per-api", type=int, default=3, help="at most this many instances per API")
    parser.add_argument("--timeout", type=float, default=120.0, help="per-test timeout in seconds")
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "torch_constant_weights.json"))
    args = parser.parse_args()
    targets = args.target or ["ov-torch", "tvm-torch"]
    with tempfile.TemporaryDirectory(prefix="opera-constants-") as tmp:
        sample = Path(tmp) / "sample.jsonl"
        ids = write_sample(args.corpus, args.n, args.seed, args.per_api, sample)
        print(
            f"sample: {len(ids)} function instances with >= 2 tensor arguments (seed {args.seed})", flush=True
        )
        results: dict[tuple[str, str], list[dict[str, Any]]] = {}
        for target in targets:
            for form in FORMS:
                began = time.monotonic()
                results[(target, form)] = run_form(sample, len(ids), target, form, args.timeout)
                print(f"{target} {form}: {time.monotonic() - began:.0f} s", flush=True)
    lines = summarize(results, targets)
    print("\n".join(lines))
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(
        json.dumps(
            {
                "n": args.n,
                "seed": args.seed,
                "per_api": args.per_api,
                "instances": ids,
                "results": {f"{t}/{f}": rows for (t, f), rows in results.items()},
                "table": lines,
            },
            separators=(",", ":"),
        )
        + "\n"
    )


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]))
    else:
        main()
