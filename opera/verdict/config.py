"""Reading the verdict's TOML files (oracle thresholds, unsupported patterns): one reader, one
error style (a missing or malformed file is a one-line ``OperaError`` naming it)."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from opera.errors import OperaError

__all__ = ["read_config"]


def read_config(path: str | Path | None, default: Path, what: str, sections: set[str]) -> tuple[Path, dict[str, Any]]:
    """(the path read, its tables): ``path``, or ``default`` when None. ``what`` names the file in
    errors ("oracle config"); a top-level key outside ``sections`` is an error."""
    config_path = Path(path) if path is not None else default
    try:
        data = tomllib.loads(config_path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise OperaError(f"{what} not found: {config_path}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise OperaError(f"{what} {config_path}: cannot be read ({exc})") from None
    except tomllib.TOMLDecodeError as exc:
        raise OperaError(f"{what} {config_path}: {exc}") from None
    unknown = set(data) - sections
    if unknown:
        raise OperaError(f"{what} {config_path}: unknown section(s) {', '.join(sorted(unknown))}")
    return config_path, data
