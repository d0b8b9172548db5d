"""Cut tests/data/tvm_frontend_onnx_slice.jsonl from a harvest of Apache TVM's own ONNX frontend tests.

    opera harvest onnx -o tvm-onnx.jsonl.gz -- tvm/tests/python/relax/test_frontend_onnx.py
    python tests/data/cut_tvm_onnx_suite.py tvm-onnx.jsonl.gz

Keeps, in corpus order, the instances of the tests in ``PICK`` whose API and opset match (the
classes of false alarm and of real bug that the third-party run showed: README.md here), and writes
the corpus header without the harvest's machine paths.
"""

from __future__ import annotations

import gzip
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

OUT = Path(__file__).resolve().parent / "tvm_frontend_onnx_slice.jsonl"
# (source test suffix, api, opset or None, what else the instance must have): the first that matches
PICK: list[tuple[str, str, int | None, Callable[[dict[str, Any]], bool]]] = [
    ("test_grid_sample_5d[0-border-bilinear]", "onnx::GridSample", 16, lambda i: True),
    ("test_grid_sample_linear_mode_translation", "onnx::GridSample", 16, lambda i: True),
    ("test_quantizelinear_default_axis_opset10", "onnx::QuantizeLinear", 10, lambda i: True),
    ("test_dequantizelinear_default_axis_opset10", "onnx::DequantizeLinear", 10, lambda i: True),
    ("test_clip_v13[input0-min1-max1]", "onnx::Clip", 13, lambda i: True),  # max = NaN
    ("test_clip_v13[input0-min0-max0]", "onnx::Clip", 13, lambda i: True),  # [0, 6]
    ("test_batch_norm_mixed_dtype_params", "onnx::BatchNormalization", 15, lambda i: True),
    ("test_layer_norm", "onnx::LayerNormalization", 17, lambda i: "bfloat16" in json.dumps(i["inputs"])),
    ("test_optional_has_element_empty", "onnx::Optional", None, lambda i: True),
    ("test_quantizelinear_integer_saturate[21]", "onnx::QuantizeLinear", 21, lambda i: True),
    ("test_composite_reduce_funcs_axes_attr_ir", "onnx::ReduceL1", 13, lambda i: i["kwargs"].get("axes") == [1] and i.get("valid") is not False),
    (
        "test_composite_reduce_funcs_axes_input_ir",
        "onnx::ReduceL2",
        18,
        lambda i: i["kwargs"].get("noop_with_empty_axes") == 1
        and '"shape": [0]' in json.dumps(i["inputs"])
        and i.get("valid") is not False,
    ),
]


def main(corpus: str) -> int:
    with gzip.open(corpus, "rt", encoding="utf-8") as fh:
        header = json.loads(fh.readline())
        lines = [json.loads(line) for line in fh]
    header["command"] = "opera harvest onnx -o tvm-onnx.jsonl.gz -- tests/python/relax/test_frontend_onnx.py"
    kept = []
    for suffix, api, opset, also in PICK:
        for inst in lines:
            if (
                inst["source"]["test"].endswith("::" + suffix)
                and inst["api"] == api
                and (opset is None or inst["extra"].get("opset") == opset)
                and also(inst)
            ):
                kept.append(inst)
                break
        else:
            raise SystemExit(f"{suffix} ({api}, opset {opset}) is not in {corpus}")
    with OUT.open("w", encoding="utf-8") as out:
        for obj in [header, *kept]:
            out.write(json.dumps(obj, sort_keys=True) + "\n")
    print(f"{len(kept)} instances -> {OUT}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(*sys.argv[1:]))
