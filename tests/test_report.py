"""`opera report` on a real store: runs on the test-only targets, then every strategy evaluated."""

from __future__ import annotations

import json
import shutil
import sqlite3
import statistics
from pathlib import Path

import pandas as pd
import pytest
from _run_fixtures import fault, rejected, relus, write

from opera.cli import main
from opera.corpus import read_corpus
from opera.errors import OperaError
from opera.prioritize import prioritize, read_order
from opera.prioritize.strategies import PrioritizeContext
from opera.report import apfd_table, bug_curves, build_report
from opera.report.plots import plot_bugs_over_time
from opera.run.runner import RunConfig, start_run
from opera.store import RUN_INTERRUPTED, ResultStore

FAILURES = ("crash", "native-crash", "timeout", "inconsistent")


def _instances():
    # test-faults: 6 passing, then raise, segv, abort (3 unique signatures; raise twice), then more
    # passing ones; test-wrong: every valid instance is inconsistent (one signature).
    return (
        relus(6)
        + [fault("raise", 1), fault("segv", 2), fault("abort@compile", 3), fault("raise@run", 4)]
        + relus(5, start=10)
        + [rejected(9)]
    )


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("report")
    corpus = write(tmp / "c.jsonl", _instances())
    path = tmp / "opera.db"
    config = RunConfig(
        corpus=[str(corpus)], targets=["test-faults", "test-wrong"], store=str(path), workers=1
    )
    summary = start_run(config, show_progress=False)
    assert summary.status == "complete" and summary.run_id == 1
    return path


def _hand(store: Path, run: int, target: str, order: list[str] | None = None) -> tuple[float, int, int]:
    """APFD by hand from the raw tables: (apfd, n, m); ``order`` defaults to the run's order."""
    db = sqlite3.connect(store)
    rows = db.execute(
        """SELECT p.instance_id, r.outcome, r.signature FROM planned p JOIN results r
           ON r.run=p.run AND r.instance_id=p.instance_id AND r.target=p.target
           WHERE p.run=? AND p.target=? ORDER BY p.seq""",
        (run, target),
    ).fetchall()
    db.close()
    sig = {iid: (s if outcome in FAILURE_OUTCOMES_TEXT and s else None) for iid, outcome, s in rows}
    ids = order if order is not None else [iid for iid, _, _ in rows]
    assert sorted(ids) == sorted(sig)
    first: dict[str, int] = {}
    for rank, iid in enumerate(ids, 1):
        if sig[iid] is not None:
            first.setdefault(sig[iid], rank)
    n, m = len(ids), len(first)
    return 1 - sum(first.values()) / (n * m) + 1 / (2 * n), n, m


FAILURE_OUTCOMES_TEXT = set(FAILURES)


def _row(df: pd.DataFrame, target: str, strategy: str) -> pd.Series:
    rows = df[(df["target"] == target) & (df["strategy"] == strategy)]
    assert len(rows) == 1, (target, strategy, df[["target", "strategy"]])
    return rows.iloc[0]


def test_run_order_apfd_equals_hand_computation(store: Path) -> None:
    df = apfd_table(store, 1)
    faults, wrong = _row(df, "test-faults", "run"), _row(df, "test-wrong", "run")
    # test-faults: 16 tests; the first raise/segv/abort are tests 7, 8, 9 of the run order.
    assert (faults["tests"], faults["bugs"]) == (16, 3)
    assert faults["apfd"] == pytest.approx(1 - (7 + 8 + 9) / (16 * 3) + 1 / 32)
    assert faults["apfd"] == pytest.approx(_hand(store, 1, "test-faults")[0])
    # RAUC-100%: found-curve area 10 + 9 + 8 over the ideal 1 + 2 + 3 * 14.
    assert faults["rauc_100"] == pytest.approx(27 / 45)
    assert (
        wrong["apfd"] == pytest.approx(1 - 1 / 16 + 1 / 32) == pytest.approx(_hand(store, 1, "test-wrong")[0])
    )
    assert wrong["bugs"] == 1 and wrong["status"] == "ok"


def test_strategy_orders_are_those_of_opera_prioritize(store: Path, tmp_path: Path) -> None:
    df = apfd_table(store, 1, strategies=["opera", "op-only"], targets=["test-faults"])
    assert set(df["strategy"]) == {"opera", "op-only", "run"} and set(df["target"]) == {"test-faults"}
    corpus = str(store.parent / "c.jsonl")
    for strategy in ("opera", "op-only"):
        order = tmp_path / f"{strategy}.order"
        assert (
            main(["prioritize", corpus, "--target", "test-faults", "--strategy", strategy, "-o", str(order)])
            == 0
        )
        ids, _ = read_order(order)
        assert _row(df, "test-faults", strategy)["apfd"] == pytest.approx(
            _hand(store, 1, "test-faults", ids)[0]
        )
    # the diversity strategy puts the other fault instances (new source tests) early here
    assert _row(df, "test-faults", "opera")["apfd"] > _row(df, "test-faults", "run")["apfd"]


def test_random_is_the_mean_over_seeds(store: Path) -> None:
    instances = list(read_corpus(store.parent / "c.jsonl"))
    per_seed = []
    for seed in range(7):
        ordering = prioritize(
            instances, "random", PrioritizeContext(target="test-faults", library="onnx", seed=seed)
        )
        per_seed.append(_hand(store, 1, "test-faults", ordering.ids)[0])
    assert len(set(per_seed)) > 1  # the seeds do differ, so the mean is not one of them by accident
    df5 = apfd_table(store, 1, strategies=["random"], targets=["test-faults"])
    df7 = apfd_table(store, 1, strategies=["random"], targets=["test-faults"], random_seeds=7)
    r5, r7 = _row(df5, "test-faults", "random"), _row(df7, "test-faults", "random")
    assert r5["seeds"] == 5 and r7["seeds"] == 7
    assert r5["apfd"] == pytest.approx(statistics.fmean(per_seed[:5]))
    assert r5["apfd_std"] == pytest.approx(statistics.stdev(per_seed[:5]))
    assert r7["apfd"] == pytest.approx(statistics.fmean(per_seed))


def test_dataframe_columns_and_skipped_coverage_strategies(store: Path) -> None:
    df = apfd_table(store, 1)
    assert list(df.columns) == [
        "target", "strategy", "status", "tests", "bugs", "seeds", "apfd", "apfd_std",
        "rauc_25", "rauc_50", "rauc_75", "rauc_100",
        "prioritization_s", "time_to_all_bugs_s", "total_time_s", "note",
    ]  # fmt: skip
    expected = ["opera", "op-only", "param-only", "random", "fast", "total-cov", "add-cov", "opera-artifact", "run"]
    for target in ("test-faults", "test-wrong"):
        assert list(df[df["target"] == target]["strategy"]) == expected
        for strategy in ("total-cov", "add-cov"):
            row = _row(df, target, strategy)
            assert row["status"] == "skipped" and pd.isna(row["apfd"]) and "--coverage" in row["note"]
    assert (df[df["status"] == "ok"]["apfd"].between(0, 1)).all()


def test_coverage_strategies_run_where_coverage_is_given(store: Path, tmp_path: Path) -> None:
    ids = [i.id for i in read_corpus(store.parent / "c.jsonl")]
    # made-up coverage: the k-th instance covers k lines, so total-cov reverses the corpus order
    cov = {iid: [f"f.py:{line}" for line in range(k + 1)] for k, iid in enumerate(ids)}
    path = tmp_path / "cov.json"
    path.write_text(json.dumps({"tests": cov}))
    df = apfd_table(store, 1, coverage={"test-faults": str(path)}, strategies=["total-cov", "add-cov"])
    row = _row(df, "test-faults", "total-cov")
    assert row["status"] == "ok"
    run_ids = [iid for iid in ids]  # the run planned every instance on test-faults
    assert row["apfd"] == pytest.approx(_hand(store, 1, "test-faults", list(reversed(run_ids)))[0])
    assert _row(df, "test-faults", "add-cov")["status"] == "ok"
    assert _row(df, "test-wrong", "total-cov")["status"] == "skipped"


def test_curves_count_durations_and_prioritization_time(store: Path) -> None:
    report = build_report(store, 1, strategies=["opera"])
    curves = report.curves()
    tests = report.targets["test-faults"].tests
    run_curve = curves["test-faults"]["run"]
    assert run_curve[0] == (0.0, 0) and run_curve[-1][1] == 3
    # the 7th test of the run order reveals the first bug: its time is the sum of the first 7 durations
    assert run_curve[1] == (pytest.approx(sum(tests.duration_of[i] for i in tests.ids[:7])), 1)
    assert run_curve[-1][0] == pytest.approx(sum(tests.duration_of.values()))
    opera_eval = next(e for e in report.targets["test-faults"].evaluations if e.strategy == "opera")
    assert opera_eval.prioritization_s > 0
    assert curves["test-faults"]["opera"][0] == (opera_eval.prioritization_s, 0)
    assert bug_curves(store, 1, strategies=["opera"])["test-wrong"]["run"][-1][1] == 1


def test_cli_writes_every_file(store: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "rep"
    assert main(["report", "--store", str(store), "-o", str(out), "-q"]) == 0
    stdout = capsys.readouterr().out
    assert "test-faults: 16 tests, 3 unique bugs" in stdout
    for name in ("report.md", "report.html", "report.json", "apfd.csv", "outcomes.csv"):
        assert (out / name).stat().st_size > 0, name
    for target in ("test-faults", "test-wrong"):
        assert (out / f"bugs_over_time_{target}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert "<svg" in (out / f"bugs_over_time_{target}.svg").read_text()
    page = (out / "report.html").read_text()
    assert page.count("<svg") == 2 and "<table" in page and "<img" not in page.replace("<image", "")
    assert "native-crash:test-faults:onnx::Relu:SIGSEGV" in page and "0.531" in page
    csv = pd.read_csv(out / "apfd.csv")
    assert _row(csv, "test-faults", "run")["apfd"] == pytest.approx(0.53125)
    assert len(csv) == 18  # 2 targets x (8 strategies + the run order)
    doc = json.loads((out / "report.json").read_text())
    assert doc["run"]["id"] == 1 and doc["targets"]["test-wrong"]["bug_signatures"] == [
        "inconsistent:test-wrong:onnx::Relu"
    ]
    assert len(doc["targets"]["test-faults"]["apfd_per_seed"]["random"]) == 5
    md = (out / "report.md").read_text()
    assert "| run | 0.531 |" in md and "![bugs found over time on test-faults]" in md


def test_plot_function_for_other_verbs(tmp_path: Path) -> None:
    svg = plot_bugs_over_time({"a": [(0.0, 0), (1.5, 2)], "b": []}, tmp_path / "p.svg", title="t")
    png = plot_bugs_over_time({"a": [(0.0, 0), (1.5, 2)]}, tmp_path / "p.png")
    assert "<svg" in svg.read_text() and png.read_bytes()[:4] == b"\x89PNG"


# ---- bad input: one line on stderr, exit code 2 ------------------------------------------------


def _one_error(capsys, argv: list[str], *needles: str) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("opera report: error:"), err
    for needle in needles:
        assert needle in err, err
    return err


def test_unknown_run_and_target_and_store(store: Path, tmp_path: Path, capsys) -> None:
    out = str(tmp_path / "o")
    _one_error(capsys, ["report", "--store", str(store), "--run", "99", "-o", out, "-q"], "no run 99")
    _one_error(
        capsys,
        ["report", "--store", str(store), "-t", "tvm-onnx", "-o", out, "-q"],
        "no test on target tvm-onnx",
    )
    _one_error(capsys, ["report", "--store", str(tmp_path / "x.db"), "-o", out, "-q"], "store not found")
    _one_error(
        capsys, ["report", "--store", str(store), "--random-seeds", "0", "-o", out, "-q"], "--random-seeds"
    )
    _one_error(
        capsys, ["report", "--store", str(store), "--strategy", "nope", "-o", out, "-q"], "unknown strategy"
    )
    _one_error(
        capsys,
        ["report", "--store", str(store), "--coverage", "tvm-onnx=x.json", "-o", out, "-q"],
        "no target tvm-onnx",
    )
    assert not Path(out).exists()


def test_unfinished_run_is_refused_unless_partial(store: Path, tmp_path: Path, capsys) -> None:
    copy = tmp_path / "partial.db"
    shutil.copy(store, copy)
    with ResultStore(copy) as db:
        planned = [(p.instance_id, p.target) for p in db.planned(1)]
        results = [r.result for r in db.results_in_plan_order(1)]
        run = db.create_run(
            {}, tool_version="test", versions={}, corpus=db.get_run(1).corpus, planned=planned
        )
        for result in results[:16]:  # the first 8 instances on both targets, then "killed"
            db.add_result(run, result)
        db.set_run_status(run, RUN_INTERRUPTED)
    out = tmp_path / "o"
    _one_error(
        capsys,
        ["report", "--store", str(copy), "-o", str(out), "-q"],
        f"run {run} is not finished",
        "--allow-partial",
    )
    assert main(["report", "--store", str(copy), "--allow-partial", "-o", str(out), "-q"]) == 0
    csv = pd.read_csv(out / "apfd.csv")
    row = _row(csv, "test-faults", "run")
    assert row["tests"] == 8 and row["bugs"] == 2  # raise (test 7) and segv (test 8) ran; abort did not
    assert row["apfd"] == pytest.approx(1 - (7 + 8) / (8 * 2) + 1 / 16)
    assert "partial run" in (out / "report.md").read_text()


def test_run_without_bugs_says_apfd_is_undefined(tmp_path: Path, capsys) -> None:
    corpus = write(tmp_path / "c.jsonl", relus(4))
    path = tmp_path / "clean.db"
    start_run(
        RunConfig(corpus=[str(corpus)], targets=["test-faults"], store=str(path), workers=1),
        show_progress=False,
    )
    out = tmp_path / "o"
    _one_error(
        capsys,
        ["report", "--store", str(path), "-o", str(out), "-q"],
        "no bug signatures",
        "APFD is undefined",
    )
    md = (out / "report.md").read_text()
    assert (
        "APFD undefined" in md and "| test-faults | 4 | 4 | 4 | 0 |" in md
    )  # outcomes: planned, ran, pass, sigs
    csv = pd.read_csv(out / "apfd.csv")
    assert csv["apfd"].isna().all() and set(csv[csv["strategy"] == "run"]["status"]) == {"undefined"}
    assert (out / "outcomes.csv").exists() and "<svg" in (out / "report.html").read_text()


def test_missing_corpus_file(store: Path, tmp_path: Path, capsys) -> None:
    copy_dir = tmp_path / "moved"
    copy_dir.mkdir()
    corpus = write(copy_dir / "c.jsonl", relus(2))
    path = tmp_path / "m.db"
    start_run(
        RunConfig(corpus=[str(corpus)], targets=["test-wrong"], store=str(path), workers=1),
        show_progress=False,
    )
    corpus.unlink()
    _one_error(
        capsys, ["report", "--store", str(path), "-o", str(tmp_path / "o"), "-q"], "corpus file", "missing"
    )


def test_equipped_is_passed_through(store: Path, tmp_path: Path) -> None:
    # the compiler's "own tests" already use (1, 3) float inputs: the fault instances lose their novelty
    equipped = write(tmp_path / "eq.jsonl", [fault("raise", 20), fault("raise", 21)])
    plain = apfd_table(store, 1, strategies=["opera"], targets=["test-faults"])
    df = apfd_table(
        store, 1, strategies=["opera"], targets=["test-faults"], equipped=[f"test-faults={equipped}"]
    )
    order = tmp_path / "opera.order"
    corpus = str(store.parent / "c.jsonl")
    argv = ["prioritize", corpus, "--target", "test-faults", "--equipped", str(equipped), "-o", str(order)]
    assert main(argv) == 0
    expected = _hand(store, 1, "test-faults", read_order(order)[0])[0]
    assert _row(df, "test-faults", "opera")["apfd"] == pytest.approx(expected)
    assert expected != pytest.approx(_row(plain, "test-faults", "opera")["apfd"])
    # a plain FILE serves every target of its library, the same here
    both = apfd_table(store, 1, strategies=["opera"], equipped=[str(equipped)])
    assert _row(both, "test-faults", "opera")["apfd"] == pytest.approx(expected)


def test_bugs_can_be_root_causes(store: Path) -> None:
    """Issue 15: APFD over root causes (``--bugs root-causes``): each failing test counts under the
    root cause `opera triage` puts it in, so two signatures of one defect are one bug."""
    from opera.commands.triage import latest_results
    from opera.corpus import CorpusReader
    from opera.report.build import build_report
    from opera.triage.root_causes import find_root_causes

    with ResultStore(store) as db:
        results = latest_results(db.results(1))
        corpus = db.get_run(1).corpus
    instances = {i.id: i for i in CorpusReader(corpus)}
    report = build_report(store, 1, strategies=["random"], random_seeds=1, bugs="root-causes")
    for target, t in report.targets.items():
        causes = find_root_causes([r for r in results if r.target == target], instances)
        cause_of = {iid: c.id for c in causes for iid in c.instances}
        assert {b for b in t.tests.bug_of.values() if b} == {c.id for c in causes}, target
        assert all(t.tests.bug_of[iid] == cid for iid, cid in cause_of.items())
        run_row = next(e for e in t.evaluations if e.strategy == "run")
        first: dict[str, int] = {}
        for rank, iid in enumerate(t.tests.ids, 1):
            if t.tests.bug_of[iid]:
                first.setdefault(t.tests.bug_of[iid], rank)
        n, m = len(t.tests.ids), len(first)
        assert run_row.apfd == pytest.approx(1 - sum(first.values()) / (n * m) + 1 / (2 * n))
    with pytest.raises(OperaError, match="bugs = 'defects'"):
        build_report(store, 1, strategies=["random"], random_seeds=1, bugs="defects")
