"""Order files: what `opera prioritize` writes is what `opera run --order` reads, through one reader
(``opera.prioritize.read_order``); a malformed file is a one-line error naming the file and line."""

from __future__ import annotations

from pathlib import Path

import pytest
from _run_fixtures import relus, write

from opera.cli import main
from opera.errors import OperaError
from opera.prioritize import read_order, write_order
from opera.store import ResultStore


def _error_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    return err[0]


def test_what_prioritize_writes_is_the_order_run_plans(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    instances = relus(6)
    corpus = write(tmp_path / "c.jsonl", instances)
    order = tmp_path / "o.order"
    assert (
        main(
            [
                "prioritize",
                str(corpus),
                "--target",
                "test-wrong",
                "--strategy",
                "random",
                "--seed",
                "5",
                "-o",
                str(order),
            ]
        )
        == 0
    )
    ids, header = read_order(order)
    assert sorted(ids) == sorted(i.id for i in instances)
    assert ids != [i.id for i in instances]  # the strategy changed the corpus order (seed 5)
    assert header["strategy"] == "random" and header["target"] == "test-wrong"
    store = tmp_path / "s.db"
    args = [
        "run",
        str(corpus),
        "-t",
        "test-wrong",
        "--store",
        str(store),
        "--order",
        str(order),
        "--workers",
        "1",
        "-q",
    ]
    assert main(args) == 0
    with ResultStore(store) as db:
        assert [p.instance_id for p in db.planned(1)] == ids
    # write_order -> read_order keeps ids, header values (lists joined) and comments out of the ids
    path = tmp_path / "w.order"
    assert write_order(path, ids[:2], {"corpus": ["a.jsonl", "b.jsonl"], "seed": 3}) == 2
    assert read_order(path) == (ids[:2], {"corpus": "a.jsonl b.jsonl", "seed": "3"})
    path.write_text(f"# hand-made\n\n{ids[1]}   # a note\n  {ids[0]}\n")
    assert read_order(path)[0] == [ids[1], ids[0]]


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("{a}\n{b} {a}\n", ":2: not an instance id"),  # two ids on one line
        ("# header\n{a}\n\n{a}\n", ":4: duplicate id"),  # the same id twice
        ("{a}\n{b}\tjunk # note\n", ":2: not an instance id"),
    ],
)
def test_a_malformed_order_file_is_one_line_naming_file_and_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str, expected: str
) -> None:
    instances = relus(2)
    corpus = write(tmp_path / "c.jsonl", instances)
    order = tmp_path / "bad.order"
    order.write_text(content.format(a=instances[0].id, b=instances[1].id))
    store = tmp_path / "s.db"
    assert (
        main(["run", str(corpus), "-t", "test-wrong", "--store", str(store), "--order", str(order), "-q"])
        == 2
    )
    line = _error_line(capsys)
    assert line.startswith("opera run: error: ") and f"{order}{expected}" in line, line
    assert not store.exists()  # refused before anything was stored
    with pytest.raises(OperaError, match=expected):
        read_order(order)


def test_an_unreadable_order_file_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    corpus = write(tmp_path / "c.jsonl", relus(1))
    store = tmp_path / "s.db"
    binary = tmp_path / "binary.order"
    binary.write_bytes(b"\xff\xfe\x00junk\n")
    for path, expected in (
        (tmp_path / "missing.order", "order file not found"),
        (binary, "not UTF-8"),
        (tmp_path, "order file"),  # a directory
    ):
        assert (
            main(["run", str(corpus), "-t", "test-wrong", "--store", str(store), "--order", str(path)]) == 2
        )
        line = _error_line(capsys)
        assert expected in line and str(path) in line, line
