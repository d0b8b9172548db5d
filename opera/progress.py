"""Progress bars for long work (tqdm on stderr; silent when disabled or not wanted)."""

from __future__ import annotations

import os
import sys
from typing import Any

from tqdm import tqdm

__all__ = ["progress_bar"]


def progress_bar(*, total: int | None = None, desc: str = "", unit: str = "it", disable: bool = False, **kw: Any) -> tqdm:
    # A terminal that reports 0 columns (some ptys, CI consoles) would make tqdm draw nothing.
    width = {} if _columns() else {"ncols": 100, "nrows": 40, "dynamic_ncols": False}
    options = {"dynamic_ncols": True, "mininterval": 0.5, **width, **kw}
    return tqdm(total=total, desc=desc, unit=unit, disable=disable, **options)


def _columns() -> int:
    try:
        return os.get_terminal_size(sys.stderr.fileno()).columns
    except (OSError, ValueError):  # not a terminal: tqdm prints plain lines anyway
        return 1
