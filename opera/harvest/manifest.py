"""harvested/MANIFEST.json: what each committed corpus holds and the exact command that made it.

Built from the corpus files themselves (their header carries the harvest command and library
version), so the manifest cannot drift from the data: `opera manifest harvested/` rewrites it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from opera import __version__
from opera.corpus import CorpusReader
from opera.errors import CorpusError
from opera.harvest.stats import CorpusStats
from opera.model import SCHEMA_VERSION

__all__ = ["build_manifest", "write_manifest"]


def _file_entry(path: Path) -> dict[str, Any]:
    reader = CorpusReader([path])
    stats = CorpusStats()
    per_source_valid: dict[str, int] = {}
    for inst in reader:
        stats.add(inst)
        if inst.valid is not False:
            per_source_valid[inst.source.suite] = per_source_valid.get(inst.source.suite, 0) + 1
    header = reader.stats.header
    summary = stats.to_json()
    entry = {
        "library": header.get("library") or next(iter(stats.libraries), None),
        "library_version": header.get("library_version")
        or stats.library_versions.get(header.get("library", ""), ""),
        "command": header.get("command", ""),
        "harvested_with": header.get("opera_version", ""),
        "instances": stats.instances,
        "valid": stats.valid,
        "invalid": stats.invalid,
        "validity_rate": summary["validity_rate"],
        "not_migratable": stats.not_migratable,
        "distinct_valid_apis": sum(summary["distinct_valid_apis"].values()),
        "instances_per_source": dict(stats.sources),
        "valid_instances_per_source": per_source_valid,
        "valid_instances_per_api": {
            api: n for apis in summary["valid_instances_per_api"].values() for api, n in apis.items()
        },
    }
    if "generation" in header:  # a generated corpus: the generator's own figures (opera generate)
        entry["generator"] = header.get("generator", "")
        entry["generation"] = header["generation"]
    return entry


def build_manifest(directory: str | Path) -> dict[str, Any]:
    root = Path(directory)
    files = sorted(p for p in root.iterdir() if p.name.endswith((".jsonl", ".jsonl.gz")))
    if not files:
        raise CorpusError(f"no corpus files (*.jsonl, *.jsonl.gz) in {root}")
    entries = {p.name: _file_entry(p) for p in files}
    return {
        "schema_version": SCHEMA_VERSION,
        "opera_version": __version__,
        "totals": {
            "instances": sum(e["instances"] for e in entries.values()),
            "valid": sum(e["valid"] for e in entries.values()),
            "distinct_valid_apis": _distinct_valid_apis(entries.values()),
        },
        "files": entries,
    }


def _distinct_valid_apis(entries: Iterable[dict[str, Any]]) -> dict[str, int]:
    """library -> distinct valid APIs over every file of that library (harvested and generated)."""
    apis: dict[str, set[str]] = {}
    for e in entries:
        apis.setdefault(e["library"], set()).update(e["valid_instances_per_api"])
    return {lib: len(names) for lib, names in sorted(apis.items())}


def write_manifest(directory: str | Path) -> Path:
    manifest = build_manifest(directory)
    out = Path(directory) / "MANIFEST.json"
    out.write_text(json.dumps(manifest, indent=1, sort_keys=False) + "\n")
    return out
