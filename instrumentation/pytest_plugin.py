"""pytest plugin that records operator instances while any test suite runs.

Registered through the ``pytest11`` entry point and inert unless ``OPERA_HARVEST_OUT`` names the
raw corpus file to write (``opera harvest`` sets it, with ``OPERA_HARVEST_LIBRARY``, for the pytest
subprocess it starts). The recorder is installed in ``pytest_configure``, before test modules are
imported, so names they bind at import time (``from keras.ops import softmax``) are the recording
wrappers; every instance is labelled with the id of the test that produced it.

Under pytest-xdist (``-n N``) the controller records nothing and each worker writes its own raw
file, ``<worker>.<name>`` next to ``OPERA_HARVEST_OUT`` (``OPERA_HARVEST_LIMIT`` applies per worker);
``run_pytest_harvest`` reads them all.
"""

from __future__ import annotations

import os
from collections.abc import Generator
from pathlib import Path
from typing import Any

import pytest

from opera.corpus import CorpusWriter
from opera.instrumentation import EXPECTED_ERROR
from opera.model import Source

_state: dict[str, Any] = {}



def _watch_expected_errors() -> None:
    """Count how deep the running test is inside ``pytest.raises(...)`` / ``self.assertRaises(...)``
    (context or callable form, ``assertRaisesRegex`` too): wrap their context managers'
    ``__enter__``/``__exit__`` for the rest of the session."""
    import unittest.case

    classes: list[Any] = [unittest.case._AssertRaisesContext]
    try:
        import _pytest.raises as pytest_raises

        classes += [getattr(pytest_raises, n) for n in ("RaisesExc", "RaisesGroup") if hasattr(pytest_raises, n)]
    except ImportError:  # older pytest: RaisesContext in _pytest.python_api
        import _pytest.python_api as pytest_api

        classes += [c for c in (getattr(pytest_api, "RaisesContext", None),) if c is not None]
    for cls in classes:
        enter, exit_ = cls.__enter__, cls.__exit__
        if getattr(enter, "_opera_wrapped", False):
            continue

        def entered(self: Any, *args: Any, _enter: Any = enter, **kwargs: Any) -> Any:
            _state["expecting_error"] = _state.get("expecting_error", 0) + 1
            return _enter(self, *args, **kwargs)

        def exited(self: Any, *args: Any, _exit: Any = exit_, **kwargs: Any) -> Any:
            _state["expecting_error"] = max(0, _state.get("expecting_error", 0) - 1)
            return _exit(self, *args, **kwargs)

        entered._opera_wrapped = True  # type: ignore[attr-defined]
        cls.__enter__ = entered
        cls.__exit__ = exited


def worker_output_path(out: str, worker: str) -> str:
    """Raw file of one pytest-xdist worker: ``gw0.raw.jsonl.gz`` next to ``raw.jsonl.gz``."""
    path = Path(out)
    return str(path.with_name(f"{worker}.{path.name}"))


def _is_xdist_controller(config: pytest.Config) -> bool:
    """The pytest-xdist controller runs no tests itself; its workers record (one file each)."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        return False
    workers = getattr(config.option, "numprocesses", None)
    return bool(workers) and workers != "0" and getattr(config.option, "dist", "no") != "no"


def pytest_configure(config: pytest.Config) -> None:
    out = os.environ.get("OPERA_HARVEST_OUT")
    if not out or "recorder" in _state or _is_xdist_controller(config):
        return
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if worker:
        out = worker_output_path(out, worker)
    _state["out"] = out
    from opera.instrumentation import get_recorder

    library = os.environ.get("OPERA_HARVEST_LIBRARY", "")
    limit = int(os.environ.get("OPERA_HARVEST_LIMIT", "0") or 0)
    writer = CorpusWriter(out, header={"library": library, "raw": True})
    _state["writer"] = writer

    def sink(inst: Any) -> None:
        if limit and writer.written >= limit:
            return
        if _state.get("expecting_error", 0) > 0:  # the test expects this call to fail
            inst = inst.with_verdict(False, EXPECTED_ERROR)
        writer.write(inst)

    _watch_expected_errors()

    recorder = get_recorder(library, sink)
    recorder.expecting_error = lambda: _state.get("expecting_error", 0) > 0
    recorder.install()
    _state["recorder"] = recorder


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None, None, None]:
    recorder = _state.get("recorder")
    if recorder is not None:
        recorder.source = Source(suite=os.environ.get("OPERA_HARVEST_SUITE", "pytest"), test=_relative_nodeid(item))
    yield
    if recorder is not None:
        recorder.flush()  # what the test's consumers received, now that the test is over
    writer = _state.get("writer")
    if writer is not None:
        writer.sync()  # a killed or crashed suite still leaves every finished test's instances
        written = writer.written
        _event({"tests": 1, "instances": written - _state.get("reported", 0)})
        _state["reported"] = written


def _event(event: dict[str, Any]) -> None:
    """One line for the harvest driver's progress bar (``OPERA_HARVEST_EVENTS``; every pytest-xdist
    worker appends to the same file, one short write per line)."""
    path = os.environ.get("OPERA_HARVEST_EVENTS")
    if path:
        import json

        with open(path, "a") as fh:
            fh.write(json.dumps(event) + "\n")


def pytest_collection_finish(session: pytest.Session) -> None:
    recorder = _state.get("recorder")
    if recorder is not None:
        recorder.test_modules_loaded()
    if os.environ.get("OPERA_HARVEST_OUT") and not _is_xdist_controller(session.config):
        _event({"collected": len(session.items)})


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """pytest's own outcome counts (the process that prints the summary: the controller under xdist)."""
    if not os.environ.get("OPERA_HARVEST_OUT") or os.environ.get("PYTEST_XDIST_WORKER"):
        return
    stats = terminalreporter.stats
    counts = {k: len(stats[k]) for k in ("passed", "failed", "error", "skipped", "xfailed", "xpassed") if stats.get(k)}
    _event({"summary": counts})


def _relative_nodeid(item: pytest.Item) -> str:
    """Node id relative to the installed package (site-packages paths differ per machine)."""
    nodeid = item.nodeid
    marker = "site-packages/"
    return nodeid.split(marker, 1)[1] if marker in nodeid else nodeid


def pytest_unconfigure(config: pytest.Config) -> None:
    recorder = _state.pop("recorder", None)
    if recorder is not None:
        recorder.uninstall()
        errors = recorder.errors
        if errors:
            import json

            with open(_state["out"] + ".errors.json", "w") as fh:
                json.dump(errors, fh)
    writer = _state.pop("writer", None)
    if writer is not None:
        writer.close()
