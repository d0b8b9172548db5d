#!/usr/bin/env python3
"""Which bug signatures new mutation kinds reach (issue 14, section 4).

Given a corpus generated with the new kinds and a store of its run, the same for an older generated
corpus, and a store of a human-written slice on the same targets: the signatures the new corpus
finds that neither other run finds, and those whose failing instances all come from the new kinds.

    python benchmarks/generate_new_kinds.py NEW.jsonl.gz NEW.db OLD.jsonl.gz OLD.db HUMAN.db [-o OUT.json]
"""

from __future__ import annotations

import argparse
import collections
import json
import re
import sqlite3
import sys
from pathlib import Path

from opera.corpus import CorpusReader

NEW_KINDS = ("tensor:values", "tensor:dtype-new", "tensor:spatial")
_KIND = re.compile(r": \S+ ((?:tensor|int|float|seq|bool|enum|optional|borrow)[^ ]*)")
FAILURES = "('crash', 'inconsistent', 'native-crash', 'timeout')"


def kinds(path: str) -> dict[str, str]:
    """instance id -> the mutation kind its ``source.test`` names."""
    out = {}
    for inst in CorpusReader([path]):
        match = _KIND.search(inst.source.test)
        out[inst.id] = match.group(1) if match else "?"
    return out


def signatures(db: str, kind_of: dict[str, str]) -> dict[str, set[str]]:
    found: dict[str, set[str]] = collections.defaultdict(set)
    rows = sqlite3.connect(f"file:{db}?mode=ro", uri=True).execute(
        f"SELECT instance_id, signature FROM results WHERE outcome IN {FAILURES} AND signature IS NOT NULL"
    )
    for iid, sig in rows:
        found[sig].add(kind_of.get(iid, "?"))
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    for name in ("new_corpus", "new_store", "old_corpus", "old_store", "human_store"):
        parser.add_argument(name)
    parser.add_argument("-o", "--output", type=Path)
    args = parser.parse_args(argv)
    new = signatures(args.new_store, kinds(args.new_corpus))
    old = signatures(args.old_store, kinds(args.old_corpus))
    human = {s for (s,) in sqlite3.connect(f"file:{args.human_store}?mode=ro", uri=True).execute("SELECT signature FROM bugs")}
    only_new = {s: k for s, k in new.items() if s not in old and s not in human}
    by_new_kinds = {s: sorted(k) for s, k in sorted(only_new.items()) if all(x.startswith(NEW_KINDS) for x in k)}
    per_kind = collections.Counter(x for k in by_new_kinds.values() for x in k)
    result = {
        "signatures_new_corpus": len(new),
        "signatures_old_corpus": len(old),
        "new_only": len(only_new),
        "new_only_from_new_kinds": by_new_kinds,
        "per_kind": dict(per_kind.most_common()),
    }
    print(
        f"signatures: new corpus {len(new)}, old corpus {len(old)}; only in the new run {len(only_new)}, "
        f"of which every failing instance is from a new kind: {len(by_new_kinds)} {dict(per_kind.most_common())}"
    )
    if args.output:
        args.output.write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
