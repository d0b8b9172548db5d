"""Cut the equipped-corpus slices under tests/data/equipped/ from the OPERA artifact (README.md here).

    python tests/data/cut_equipped.py SHARED

``SHARED`` is the folder that holds the published OPERA artifact (``opera-artifact/``) and the TVM
0.27 equipped corpus (``equipped/``). The three ONNX corpora whose record and operator counts are
published (``FULL``) are copied whole; of every other equipped corpus, the slice keeps the first
``FIRST`` records and the first record of every operator, in file order, byte for byte (a PyTorch
record is its whole ``# test_id`` block). Each file is written gzipped under its original name plus
``.gz`` (no name or time in the gzip header, so a re-cut with the same zlib gives the same bytes).
"""

from __future__ import annotations

import argparse
import gzip
import sys
from pathlib import Path

from opera.prioritize.equipped import EquippedReader

OUT = Path(__file__).resolve().parent / "equipped"
FULL = (
    "equipped/tvm-0.27_equipped_onnx_tc.txt",
    "opera-artifact/onnx/data/tvm_equipped_onnx_tc.txt",
    "opera-artifact/onnx/data/original_migrated_onnx_tc.txt",
)
SLICED = (
    "opera-artifact/onnx/data/ov_equipped_onnx_tc.txt",
    "opera-artifact/onnx/data/trt_equipped_onnx_tc.txt",
    "opera-artifact/onnx/data/trt_equipped_onnx_tc_old.txt",
    "opera-artifact/keras/data/tvm_equipped_keras_tc.txt",
    "opera-artifact/keras/data/ov_equipped_keras_tc.txt",
    "opera-artifact/torch/data/ov_equipped_torch_tc.txt",
    "opera-artifact/torch/data/trt_equipped_torch_tc.txt",
    "opera-artifact/torch/data/tvm_equipped_torch_tc.txt",
)
FIRST = 10


def _records(text: str) -> list[str]:
    """The file's records as raw text (a line, or a ``# test_id`` block with its header)."""
    lines = text.splitlines(keepends=True)
    if any(line.startswith("# test_id") for line in lines):
        blocks: list[list[str]] = []
        for line in lines:
            if line.startswith("# test_id"):
                blocks.append([])
            if blocks:
                blocks[-1].append(line)
        return ["".join(b) for b in blocks]
    return [line for line in lines if line.strip() and not line.startswith("#")]


def cut(path: Path) -> tuple[str, int, int]:
    """The slice of ``path``: (text, records kept, records in the file)."""
    records = _records(path.read_text())
    reader = EquippedReader(path)
    apis = [inst.api for inst in reader]
    if reader.skipped or len(apis) != len(records):
        raise SystemExit(f"{path}: {len(records)} records, {len(apis)} read, skipped {dict(reader.skipped)}")
    seen: set[str] = set()
    kept = []
    for k, (record, api) in enumerate(zip(records, apis, strict=True)):
        if k < FIRST or api not in seen:
            kept.append(record)
        seen.add(api)
    return "".join(kept), len(kept), len(records)


def write(name: str, text: str) -> Path:
    out = OUT / f"{name}.gz"
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out, "wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as gz:
        gz.write(text.encode())
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("shared", type=Path, help="the folder holding opera-artifact/ and equipped/")
    args = parser.parse_args()
    for rel in FULL + SLICED:
        path = args.shared / rel
        if not path.is_file():
            parser.error(f"{path} does not exist")
        if rel in FULL:
            text = path.read_text()
            kept = total = len(_records(text))
        else:
            text, kept, total = cut(path)
        out = write(path.name, text)
        print(f"{rel}: {kept} of {total} records -> {out.name} ({out.stat().st_size:,} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
