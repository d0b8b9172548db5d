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

Fidelity (docs/results.md, Fidelity to the artifact's prioritization): the ``opera-artifact``
strategy (the artifact's code, ``opera/prioritize/artifact.py``) is run on the records as the
artifact held them (``EquippedReader(opaque_shapes=True)``: the shapes of string/FNUZ/undefined
inputs kept) and as Opera's reader keeps them (those shapes lost), and every order is compared
with the published one: positions equal over the artifact's 1,004 tests, and Spearman's rho /
Kendall's tau over the unique instances. "paper text" is the ``opera`` greedy with corpus-order
ties (no rarity tie-break of ours).

With ``--store STORE`` it also scores ``opera`` (ours), ``paper-text`` and ``opera-artifact`` (with
``param-only``, ``random`` over 10 seeds, ``fast``) on the finished runs of an Opera results store,
through ``opera.report.apfd_table`` (APFD over each target's unique bug signatures, as in the real
comparison): once without an equipped corpus, and, with ``--equipped [TARGET=]FILE``, once with it.

    nice -n 10 python benchmarks/prioritize_apfd_artifact.py [--artifact ARTIFACT_DIR]
        [--store STORE [--run N ...] [--equipped [TARGET=]FILE ...]]
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
from opera.prioritize._greedy import diversity_order
from opera.prioritize.artifact import artifact_order as run_artifact
from opera.prioritize.artifact import load_cases
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
    parser.add_argument("--store", type=data_path, help="also score the variants on this store's runs")
    parser.add_argument("--run", type=int, action="append", help="run of --store (repeatable; default: all)")
    parser.add_argument("--equipped", action="append", default=[], help="[TARGET=]FILE, as for opera report")
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

    ranked = (data / "ranked_onnx_tc_4_ov.txt").read_text().splitlines()
    id_of_test = {tid: inst.id for inst, tid in zip(instances, test_ids, strict=True)}
    counts = [re.search(r"count=(\d+)", line) for line in ranked]
    published_tests = [int(c.group(1)) for c in counts if c is not None]
    artifact_order = list(dict.fromkeys(id_of_test[t] for t in published_tests))
    artifact_order += [i for i in unique_ids if i not in set(artifact_order)]

    def agreement(order: list[str]) -> dict[str, Any]:
        """Rank correlation with the published order over the unique instances."""
        from scipy.stats import kendalltau, spearmanr

        rank = {iid: k for k, iid in enumerate(order)}
        ours = [rank[iid] for iid in artifact_order]
        published = list(range(len(artifact_order)))
        return {
            "spearman": float(spearmanr(ours, published).statistic),
            "kendall": float(kendalltau(ours, published).statistic),
            "same_position": sum(a == b for a, b in zip(order, artifact_order, strict=True)),
        }

    def artifact_variant(opaque_shapes: bool) -> tuple[list[str], dict[str, Any]]:
        """The opera-artifact order (Opera ids of the standard reader) and how many of the
        artifact's 1,004 tests it puts where the published order has them."""
        corpus = list(EquippedReader(corpus_path, opaque_shapes=opaque_shapes))
        eq = list(EquippedReader(data / "ov_equipped_onnx_tc.txt", opaque_shapes=opaque_shapes))
        res = prioritize(corpus, "opera-artifact", PrioritizeContext(equipped=eq))
        # the same instances under the standard reader's ids, by position (the ids differ only for
        # inputs Opera keeps opaque); a test's position is its first line's
        std_id = {inst.id: instances[k].id for k, inst in reversed(list(enumerate(corpus)))}
        # the test-level order (duplicate lines are separate tests there) from the same engine
        cases, eq_cases, defaults = load_cases(corpus, eq)
        tests = [test_ids[tc.pos] for tc in run_artifact(cases, eq_cases, defaults).order]
        same_tests = sum(a == b for a, b in zip(tests, published_tests, strict=True))
        order = list(dict.fromkeys(std_id[i] for i in res.ids))
        return order, {"seconds": round(res.seconds, 3), "same_test_positions": same_tests, **res.notes}

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
        rows[label] = {**score(res.ids), "seconds": round(res.seconds, 3), **agreement(res.ids)}
    for label, pre in [
        ("paper text (opera, corpus-order ties, precovered)", True),
        ("paper text (opera, corpus-order ties, not precovered)", False),
    ]:
        ids = diversity_order(
            instances, equipped, use_op_score=True, use_diversity=True, precover_equipped=pre, rarity_ties=False
        )
        rows[label] = {**score(ids), **agreement(ids)}
    for label, shapes in [
        ("opera-artifact (artifact's records)", True),
        ("opera-artifact (Opera's reader: opaque input shapes lost)", False),
    ]:
        order, info = artifact_variant(shapes)
        rows[label] = {**score(order), **agreement(order), **info}
    # How much of its score is the seed of its shuffled tail (122 of the 1,004 tests)?
    cases, eq_cases, defaults = load_cases(
        list(EquippedReader(corpus_path, opaque_shapes=True)),
        list(EquippedReader(data / "ov_equipped_onnx_tc.txt", opaque_shapes=True)),
    )
    runs = []
    for tail_seed in range(20):
        tests = [test_ids[tc.pos] for tc in run_artifact(cases, eq_cases, defaults, tail_seed=tail_seed).order]
        order = list(dict.fromkeys(id_of_test[t] for t in tests))
        runs.append(score(order + [i for i in unique_ids if i not in set(order)]))
    rows["opera-artifact, tail seeds 0-19 (mean)"] = {
        key: statistics.mean(r[key] for r in runs) for key in runs[0]
    } | {"apfd_stdev": statistics.stdev(r["apfd"] for r in runs), "apfd_min": min(r["apfd"] for r in runs),
         "apfd_max": max(r["apfd"] for r in runs)}  # fmt: skip
    for strategy, seeds in (("random", range(20)), ("fast", range(5))):
        runs = [score(prioritize(instances, strategy, PrioritizeContext(seed=s)).ids) for s in seeds]
        rows[f"{strategy} (mean of {len(runs)} seeds)"] = {
            key: statistics.mean(r[key] for r in runs) for key in runs[0]
        } | {"apfd_stdev": statistics.stdev(r["apfd"] for r in runs)}
    rows["artifact's own order (ranked_onnx_tc_4_ov)"] = score(artifact_order)

    print(f"OpenVINO-ONNX, artifact corpus: n = {n} unique instances, m = {m} (symptom, operator) bugs\n")
    print(
        f"{'strategy':<58} {'APFD':>6} {'RAUC25':>7} {'RAUC50':>7} {'RAUC75':>7} {'RAUC100':>8}"
        f" {'rho':>6} {'tau':>6}"
    )
    for label, r in rows.items():
        corr = f" {r['spearman']:>6.3f} {r['kendall']:>6.3f}" if "spearman" in r else ""
        print(
            f"{label:<58} {r['apfd']:>6.3f} {r['rauc25']:>7.3f} {r['rauc50']:>7.3f} {r['rauc75']:>7.3f}"
            f" {r['rauc100']:>8.3f}{corr}"
        )
        if "same_test_positions" in r:
            print(f"{'':<58} {r['same_test_positions']} of {len(published_tests)} tests where the published order has them")
    result: dict[str, Any] = {
        "subject": "ov-onnx (artifact)", "n": n, "m": m, "bug_key": "(symptom, operator)", "rows": rows,
    }  # fmt: skip
    if args.store is not None:
        result["stored_runs"] = stored_runs(args.store, args.run, args.equipped)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(result, indent=2) + "\n")
    return 0


STORED_STRATEGIES = ["opera", "paper-text", "opera-artifact", "param-only", "random", "fast"]


def _register_paper_text() -> None:
    """``paper-text``: the ``opera`` greedy with the paper's corpus-order ties (no rarity tie-break)."""
    from collections.abc import Iterable

    from opera.model import OperatorInstance
    from opera.prioritize.strategies import Strategy, register_strategy, strategy_names

    if "paper-text" in strategy_names():
        return

    @register_strategy
    class PaperText(Strategy):
        name = "paper-text"
        description = "opera's greedy with corpus-order ties (the paper's text)"

        def order(self, instances: Iterable[OperatorInstance], ctx: PrioritizeContext) -> list[str]:
            return diversity_order(
                instances, ctx.equipped, use_op_score=True, use_diversity=True,
                precover_equipped=ctx.precover_equipped, zero_case=ctx.zero_case, rarity_ties=False,
            )  # fmt: skip


def stored_runs(store: Path, runs: list[int] | None, equipped: list[str]) -> list[dict[str, Any]]:
    import sqlite3

    from opera.report import apfd_table

    _register_paper_text()
    with sqlite3.connect(f"file:{store}?mode=ro", uri=True) as conn:
        targets = {r[0]: json.loads(r[1]).get("targets", []) for r in conn.execute("SELECT id, config FROM runs")}
    out: list[dict[str, Any]] = []
    print(f"\nstored runs of {store.name}: APFD over unique bug signatures")
    for run in runs or sorted(targets):
        # a TARGET=FILE entry applies to runs that have TARGET
        mine = [e for e in equipped if "=" not in e or e.split("=", 1)[0] in targets[run]]
        settings: list[dict[str, Any]] = [{"equipped": []}]
        if mine:
            settings.append({"equipped": mine, "precover_equipped": True})
        for option in settings:
            frame = apfd_table(store, run, strategies=STORED_STRATEGIES, random_seeds=10, **option)
            rows = [
                {k: (None if isinstance(v, float) and v != v else v) for k, v in r.items()}  # NaN -> null
                for r in frame[["target", "strategy", "tests", "bugs", "apfd", "apfd_std"]].to_dict("records")
            ]
            out.append({"store": store.name, "run": run, **option, "rows": rows})
            label = "equipped " + " ".join(option["equipped"]) if option["equipped"] else "no equipped corpus"
            print(f"run {run}, {label}")
            for target in dict.fromkeys(r["target"] for r in rows):
                cells = [f"{r['strategy']} {r['apfd']:.3f}" for r in rows if r["target"] == target]
                print(f"  {target}: " + ", ".join(cells))
    return out


if __name__ == "__main__":
    sys.exit(main())
