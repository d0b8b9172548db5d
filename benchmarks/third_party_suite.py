#!/usr/bin/env python3
"""Figures of a third-party suite harvested and run by Opera (README, "Harvesting your own suite";
issue 17): pytest's own summary, instances, APIs the shipped corpus lacks, expected-error and
invalid instances with their reasons, and each target's outcomes and signatures of one run.

    python benchmarks/third_party_suite.py CORPUS --store STORE [--run N] [--shipped harvested/onnx.jsonl.gz] [--json OUT]
"""

from __future__ import annotations

import argparse
import gzip
import json
from collections import Counter
from pathlib import Path
from typing import Any

from opera.corpus import CorpusReader
from opera.store import ResultStore


def _header(path: Path) -> dict[str, Any]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as fh:  # type: ignore[operator]
        return dict(json.loads(fh.readline()))


def _reason(text: str) -> str:
    return text.split(": the test's")[0].split(" (")[0][:90]


def figures(corpus: Path, store: Path, run: int | None, shipped: list[Path]) -> dict[str, Any]:
    instances = list(CorpusReader([corpus]))
    shipped_apis = {inst.api for inst in CorpusReader(shipped)} if shipped else set()
    valid = [i for i in instances if i.valid is not False and i.opaque_reason is None]
    expected = [i for i in instances if (i.invalid_reason or "").startswith("expected error")]
    invalid = Counter(_reason(i.invalid_reason or "") for i in instances if i.valid is False and i not in expected)
    opaque = Counter(_reason(i.opaque_reason or "") for i in instances if i.valid is not False and i.opaque_reason)
    out: dict[str, Any] = {
        "pytest": _header(corpus).get("pytest", {}),
        "tests_with_instances": len({i.source.test for i in instances}),
        "instances": len(instances),
        "runnable": len(valid),
        "distinct_apis": len({i.api for i in instances}),
        "apis_not_in_shipped_corpus": sorted({i.api for i in valid} - shipped_apis) if shipped else None,
        "expected_error": len(expected),
        "invalid": dict(invalid.most_common()),
        "not_migratable": dict(opaque.most_common()),
    }
    with ResultStore(store) as db:
        run_id = run if run is not None else max(r.id for r in db.runs())
        out["run"] = run_id
        out["outcomes"] = db.outcome_counts(run_id)
        out["signatures"] = {
            b.signature: {"count": b.count, "example": b.example_instance}
            for b in sorted(db.bugs(run_id), key=lambda b: b.signature)
        }
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("corpus", type=Path)
    parser.add_argument("--store", type=Path, required=True)
    parser.add_argument("--run", type=int)
    parser.add_argument("--shipped", type=Path, action="append", default=[])
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    result = figures(args.corpus, args.store, args.run, args.shipped)
    text = json.dumps(result, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
