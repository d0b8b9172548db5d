"""Reading Opera's TOML files (oracle thresholds, unsupported patterns, the ledger of known bugs):
one reader, one error style (a missing, unreadable or malformed file is a one-line ``OperaError``
naming it)."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from opera.errors import OperaError

__all__ = ["read_config", "read_toml"]


def read_toml(path: str | Path, what: str) -> dict[str, Any]:
    """The tables of ``path``; ``what`` names the file in errors ("oracle config", "ledger")."""
    path = Path(path)
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise OperaError(f"{what} not found: {path}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise OperaError(f"{what} {path}: cannot be read ({exc})") from None
    except tomllib.TOMLDecodeError as exc:
        raise OperaError(f"{what} {path}: not valid TOML ({exc})") from None


def read_config(path: str | Path | None, default: Path, what: str, sections: set[str]) -> tuple[Path, dict[str, Any]]:
    """(the path read, its tables): ``path``, or ``default`` when None; a top-level key outside
    ``sections`` is an error."""
    config_path = Path(path) if path is not None else default
    data = read_toml(config_path, what)
    unknown = set(data) - sections
    if unknown:
        raise OperaError(f"{what} {config_path}: unknown section(s) {', '.join(sorted(unknown))}")
    return config_path, data
