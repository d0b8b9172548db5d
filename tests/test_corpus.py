"""Corpus files: streaming read/write, dedup, schema version, malformed lines, crash-friendliness."""

from __future__ import annotations

import gzip
import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from opera.corpus import CorpusReader, CorpusWriter, read_corpus, write_corpus
from opera.errors import CorpusError
from opera.model import SCHEMA_VERSION, InstanceKind, OperatorInstance, Source
from opera.values import Opaque


def _inst(i: int, api: str = "torch.add") -> OperatorInstance:
    return OperatorInstance(
        library="torch",
        api=api,
        kind=InstanceKind.FUNCTION,
        args=(np.full((2,), i, dtype=np.float32), i),
        source=Source("opinfo", test=api, sample=i),
    )


@pytest.mark.parametrize("name", ["c.jsonl", "c.jsonl.gz"])
def test_write_then_read_preserves_instances_and_drops_duplicates(tmp_path: Path, name: str) -> None:
    path = tmp_path / name
    items = [_inst(i) for i in range(5)]
    with CorpusWriter(path) as writer:
        for inst in items + items[:2]:
            writer.write(inst)
    assert writer.written == 5 and writer.duplicates == 2
    back = list(read_corpus(path))
    assert [b.id for b in back] == [i.id for i in items]
    assert all(np.array_equal(b.args[0], i.args[0]) for b, i in zip(back, items, strict=True))
    assert back[3].source == Source("opinfo", test="torch.add", sample=3)


def test_id_is_a_stable_content_hash() -> None:
    a, b = _inst(1), _inst(1)
    assert a.id == b.id
    assert a.id != _inst(2).id
    # provenance and verdict are not part of the identity
    assert a.with_verdict(False, "boom").id == a.id
    # the id is pinned: changing the canonical encoding would silently split corpora
    assert OperatorInstance("onnx", "onnx::Relu", InstanceKind.ONNX_NODE, extra={"opset": 17}).id == (
        OperatorInstance("onnx", "onnx::Relu", InstanceKind.ONNX_NODE, extra={"opset": 17}).id
    )


def test_malformed_line_error_names_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    write_corpus(path, [_inst(0), _inst(1)])
    lines = path.read_text().splitlines()
    lines.insert(2, '{"library": "torch", "api": ')  # line 3: cut JSON
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(CorpusError, match=r"bad\.jsonl:3: malformed"):
        list(read_corpus(path))


def test_skip_malformed_skips_and_counts(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    write_corpus(path, [_inst(0), _inst(1)])
    with open(path, "a") as fh:
        fh.write("not json\n")
        fh.write(json.dumps({"library": "torch", "api": "x", "kind": "nope", "source": {"suite": "s"}}) + "\n")
        fh.write(_inst(2).to_line() + "\n")
    reader = CorpusReader([path], skip_malformed=True)
    got = list(reader)
    assert len(got) == 3
    assert reader.stats.skipped == 2 and reader.stats.skipped_lines == [4, 5]


def test_tampered_content_does_not_match_its_id(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    obj = _inst(0).to_json()
    obj["api"] = "torch.sub"
    path.write_text(json.dumps(obj) + "\n")
    with pytest.raises(CorpusError, match="does not match"):
        list(read_corpus(path))


def test_newer_schema_version_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "new.jsonl"
    path.write_text(json.dumps({"$schema": "opera-corpus", "version": SCHEMA_VERSION + 1}) + "\n")
    with pytest.raises(CorpusError, match="newer than this Opera supports"):
        list(read_corpus(path))


def test_missing_file_and_directory_are_clear_errors(tmp_path: Path) -> None:
    with pytest.raises(CorpusError, match="not found"):
        CorpusReader([tmp_path / "nope.jsonl"])
    with pytest.raises(CorpusError, match="directory"):
        CorpusReader([tmp_path])


def test_unwritable_output_is_a_clear_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(CorpusError, match="cannot"):
        CorpusWriter(blocker / "sub" / "c.jsonl")


def test_not_migratable_instances_are_kept_and_flagged(tmp_path: Path) -> None:
    inst = OperatorInstance("torch", "torch.bernoulli", InstanceKind.FUNCTION, args=(Opaque("torch.Generator", "RNG state"),))
    assert not inst.migratable
    path = tmp_path / "o.jsonl"
    write_corpus(path, [inst])
    (back,) = read_corpus(path)
    assert not back.migratable and back.opaque_reason == "torch.Generator: RNG state"
    assert json.loads(path.read_text().splitlines()[1])["migratable"] is False


def test_gzip_corpus_of_a_killed_writer_is_readable_up_to_the_last_sync(tmp_path: Path) -> None:
    path = tmp_path / "killed.jsonl.gz"
    script = textwrap.dedent(
        f"""
        import os, signal, numpy as np
        from opera.corpus import CorpusWriter
        from opera.model import InstanceKind, OperatorInstance, Source
        w = CorpusWriter({str(path)!r})
        for i in range(450):
            w.write(OperatorInstance("torch", "torch.add", InstanceKind.FUNCTION, args=(i,), source=Source("t")))
        os.kill(os.getpid(), signal.SIGKILL)
        """
    )
    proc = subprocess.run([sys.executable, "-c", script])
    assert proc.returncode == -signal.SIGKILL
    with pytest.raises(EOFError), gzip.open(path) as stock:  # the stock reader cannot read the cut stream...
        stock.read()
    got = list(read_corpus(path))  # ...ours yields everything up to the last sync (every 200 lines)
    assert len(got) == 400
    assert [g.args[0] for g in got] == list(range(400))


def test_reader_streams_without_reading_the_whole_file_first(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl.gz"
    write_corpus(path, (_inst(i) for i in range(1000)))
    it = iter(read_corpus(path))
    first = next(it)
    assert first.args[1] == 0
    assert os.path.getsize(path) > 0
