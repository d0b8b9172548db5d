"""APFD of each strategy on the one subject whose tests and bugs the artifact ships: OpenVINO-ONNX.

Corpus: the artifact's 1,013 migrated ONNX instances (``original_migrated_onnx_tc.txt``, test id =
1-based line). Bugs: ``detected_bugs_ov.txt`` (test id, symptom, operator, message). The artifact
does not say which failing tests share a unique bug, so a unique bug is approximated here as
(symptom, operator): coarser than the paper's 13 triaged bugs in some places, finer in others.
The figures are comparable between strategies, not with Table II. Equipped corpus:
``ov_equipped_onnx_tc.txt``. The artifact's own order (``ranked_onnx_tc_4_ov.txt``, its
``count=`` field is the test id) is scored the same way as a reference. All four files are read from
``onnx/data/`` of the artifact folder given by ``--artifact`` (default: ``opera-artifact/`` in
$OPERA_SHARED, else in shared/ beside the checkout); a missing one is a usage error.

    nice -n 10 python benchmarks/prioritize_apfd_artifact.py [--artifact ARTIFACT_DIR]
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
from pathlib import Path
from typing import Any

from _common import ROOT, SHARED, data_path

from opera.prioritize import PrioritizeContext, prioritize
from opera.prioritize.equipped import EquippedReader
from opera.report.apfd import apfd, first_bug_positions, rauc_levels

RESULTS = ROOT / "benchmarks" / "results" / "prioritize_apfd_artifact.json"
FILES = (
    "original_migrated_onnx_tc.txt",
    "detected_bugs_ov.txt",
    "ov_equipped_onnx_tc.txt",
    "ranked_onnx_tc_4_ov.txt",
)


def load_bugs(path: Path) -> dict[int, tuple[str, str]]:
    """test id -> (symptom, operator); the known merged last line is split on its second id."""
    bugs: dict[int, tuple[str, str]] = {}
    text = path.read_text()
    for m in re.finditer(r"(?m)(?:^|(?<=\S))(\d+)\t(crash|wrong results|segfault)\t(\w+)\t", text):
        bugs.setdefault(int(m.group(1)), (m.group(2), m.group(3)))
    return bugs


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--artifact",
        type=data_path,
        default=str(SHARED / "opera-artifact"),
        help="the published OPERA artifact's folder (default: $OPERA_SHARED/opera-artifact, "
        "else shared/opera-artifact beside the checkout)",
    )
    parser.add_argument("-o", "--output", type=Path, default=RESULTS)
    args = parser.parse_args()
    data = args.artifact / "onnx" / "data"
    missing = [name for name in FILES if not (data / name).is_file()]
    if missing:
        parser.error(f"{data} lacks {', '.join(missing)}")
    corpus_path = data / "original_migrated_onnx_tc.txt"
    instances = list(EquippedReader(corpus_path))
    test_ids = [int(i.source.test.rsplit(":", 1)[1]) for i in instances]
    bugs = load_bugs(data / "detected_bugs_ov.txt")
    bug_of: dict[str, tuple[str, str]] = {}
    for inst, tid in zip(instances, test_ids, strict=True):
        if tid in bugs:
            bug_of.setdefault(inst.id, bugs[tid])
    unique_ids = list(dict.fromkeys(i.id for i in instances))
    n = len(unique_ids)
    m = len(set(bug_of.values()))
    equipped = list(EquippedReader(data / "ov_equipped_onnx_tc.txt"))

    def score(order: list[str]) -> dict[str, Any]:
        pos = list(first_bug_positions(order, bug_of).values())
        return {"apfd": apfd(pos, n), **{f"rauc{int(k * 100)}": v for k, v in rauc_levels(pos, n).items()}}

    rows: dict[str, dict[str, Any]] = {}
    for label, strategy, pre, zero in [
        ("opera (untested-first, precovered)", "opera", True, "untested-first"),
        ("opera (untested-first, not precovered)", "opera", False, "untested-first"),
        ("opera (smoothed, precovered)", "opera", True, "smoothed"),
        ("opera (smoothed, not precovered)", "opera", False, "smoothed"),
        ("op-only (untested-first)", "op-only", False, "untested-first"),
        ("op-only (smoothed)", "op-only", False, "smoothed"),
        ("param-only (precovered)", "param-only", True, "untested-first"),
        ("param-only (not precovered)", "param-only", False, "untested-first"),
    ]:
        ctx = PrioritizeContext(equipped=equipped, precover_equipped=pre, zero_case=zero)
        res = prioritize(instances, strategy, ctx)
        rows[label] = {**score(res.ids), "seconds": round(res.seconds, 3)}
    for strategy, seeds in (("random", range(20)), ("fast", range(5))):
        runs = [score(prioritize(instances, strategy, PrioritizeContext(seed=s)).ids) for s in seeds]
        rows[f"{strategy} (mean of {len(runs)} seeds)"] = {
            key: statistics.mean(r[key] for r in runs) for key in runs[0]
        } | {"apfd_stdev": statistics.stdev(r["apfd"] for r in runs)}
    ranked = (data / "ranked_onnx_tc_4_ov.txt").read_text().splitlines()
    id_of_test = {tid: inst.id for inst, tid in zip(instances, test_ids, strict=True)}
    counts = [re.search(r"count=(\d+)", line) for line in ranked]
    artifact_order = list(dict.fromkeys(id_of_test[int(c.group(1))] for c in counts if c is not None))
    artifact_order += [i for i in unique_ids if i not in set(artifact_order)]
    rows["artifact's own order (ranked_onnx_tc_4_ov)"] = score(artifact_order)

    print(f"OpenVINO-ONNX, artifact corpus: n = {n} unique instances, m = {m} (symptom, operator) bugs\n")
    print(f"{'strategy':<44} {'APFD':>6} {'RAUC25':>7} {'RAUC50':>7} {'RAUC75':>7} {'RAUC100':>8}")
    for label, r in rows.items():
        print(
            f"{label:<44} {r['apfd']:>6.3f} {r['rauc25']:>7.3f} {r['rauc50']:>7.3f} {r['rauc75']:>7.3f} {r['rauc100']:>8.3f}"
        )
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(
        json.dumps(
            {"subject": "ov-onnx (artifact)", "n": n, "m": m, "bug_key": "(symptom, operator)", "rows": rows},
            indent=2,
        )
        + "\n"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
