"""Progress bars for long work (tqdm on stderr; silent when disabled or not wanted)."""

from __future__ import annotations

from typing import Any

from tqdm import tqdm

__all__ = ["progress_bar"]


def progress_bar(*, total: int | None = None, desc: str = "", unit: str = "it", disable: bool = False, **kw: Any) -> tqdm:
    return tqdm(total=total, desc=desc, unit=unit, disable=disable, dynamic_ncols=True, mininterval=0.5, **kw)
