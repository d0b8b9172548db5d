"""Opera's own source text as this process loaded it.

A reproducer embeds the oracle's comparison functions and the targets' I/O modules with
``inspect.getsource``, which reads the file on disk. A worker that outlives a change of that file
(a commit during a long run) read the new text at the old line numbers, and 14 of a run's
reproducers were fragments that did not parse. ``pin_loaded_sources`` puts the text of every
loaded module under the given packages into ``linecache`` as a loader-provided entry (its mtime
None), which ``linecache.checkcache`` leaves alone: ``inspect.getsource`` then returns the text
the process runs, whatever the disk holds later.
"""

from __future__ import annotations

import linecache
import sys
import tokenize


def pin_loaded_sources(packages: tuple[str, ...] = ("opera",)) -> int:
    """Pin the source of each loaded module of ``packages`` not pinned yet; returns how many.
    Call it right after the modules are imported (a worker does at the end of its warm-up)."""
    pinned = 0
    for name, module in list(sys.modules.items()):
        if not any(name == p or name.startswith(p + ".") for p in packages):
            continue
        path = getattr(module, "__file__", None)
        if not path or not path.endswith(".py"):
            continue
        entry = linecache.cache.get(path)
        if entry is not None and len(entry) == 4 and entry[1] is None:
            continue  # pinned already (or provided by a loader)
        try:
            with tokenize.open(path) as handle:
                text = handle.read()
        except (OSError, SyntaxError):
            continue
        lines = text.splitlines(keepends=True)
        if lines and not lines[-1].endswith("\n"):
            lines[-1] += "\n"
        linecache.cache[path] = (len(text), None, lines, path)
        pinned += 1
    return pinned
