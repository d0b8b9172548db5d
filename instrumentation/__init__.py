"""Recording hooks, one module per source library, and the harvest sources that drive them.

A *recorder* patches a library for the duration of a harvest so that every top-level operator call
becomes an ``OperatorInstance`` handed to its ``sink``; ``uninstall`` restores every patched object.
A *source* drives a recorder over a body of tests (OpInfo samples, a pytest suite, ONNX node tests)
and yields the recorded instances.

Adding a library means adding ``<lib>_recorder.py`` here (a ``BaseRecorder`` subclass decorated with
``@register_recorder``, found by its file name: no table to edit) and a template; adding a source
means adding a function decorated with ``@harvest_source`` (in ``<lib>_sources.py``). Third parties
can register both through the ``opera.recorders`` / ``opera.sources`` entry points.
"""

from __future__ import annotations

import importlib
import pkgutil
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from typing import Any

from opera.errors import HarvestError
from opera.model import OperatorInstance, Source
from opera.registry import Registry

__all__ = [
    "EXPECTED_ERROR",
    "RECORDERS",
    "SOURCES",
    "BaseRecorder",
    "HarvestOptions",
    "HarvestSourceSpec",
    "get_recorder",
    "get_source",
    "harvest_source",
    "register_recorder",
    "sources_for",
]

# A library's recorder is ``<library>_recorder.py`` here (a ``BaseRecorder`` subclass decorated with
# ``@register_recorder``), or a module of a third-party package in the ``opera.recorders`` entry
# point group; imported only when that library is harvested (importing a DL library costs seconds).
# Its harvest sources are the ``@harvest_source`` functions of ``<library>_sources.py`` and of the
# library-independent modules in ``_COMMON_SOURCE_MODULES`` (importing the keras sources must not
# pull TensorFlow into a torch harvest), plus the ``opera.sources`` entry point group.
_COMMON_SOURCE_MODULES = ("pytest_source",)

# The verdict of an instance recorded inside an expected-error block (or of a model a consumer
# received there): the harvest keeps it (the validity gate does not run it again), and runs leave it
# out like every invalid instance.
EXPECTED_ERROR = "expected error: recorded inside pytest.raises / assertRaises, where the test expects the call to fail"


class BaseRecorder:
    """Common machinery: the sink, the current source label, and the top-level-only guard.

    Subclasses implement ``_install``/``_uninstall`` and call ``self.emit(instance)`` for each
    top-level call. Wrapped library entry points use ``with self.nested():`` around the real call
    so that calls an operator makes internally are not recorded (``self.recording`` is False inside).
    """

    library: str = ""

    def __init__(self, sink: Callable[[OperatorInstance], None] | None = None) -> None:
        self.sink: Callable[[OperatorInstance], None] = sink or (lambda inst: None)
        self.source = Source(suite="manual")
        self.installed = False
        self._local = threading.local()
        self.errors: dict[str, int] = {}  # "why a call could not be recorded" -> count
        # whether the running test is inside pytest.raises / assertRaises (the pytest plugin says)
        self.expecting_error: Callable[[], bool] = lambda: False

    # ---- the top-level guard ------------------------------------------------------------------
    @property
    def depth(self) -> int:
        return getattr(self._local, "depth", 0)

    @property
    def recording(self) -> bool:
        return self.installed and self.depth == 0

    @contextmanager
    def nested(self) -> Iterator[None]:
        self._local.depth = self.depth + 1
        try:
            yield
        finally:
            self._local.depth -= 1

    paused = nested  # the harvest driver pauses recording while it validates an instance

    def emit(self, inst: OperatorInstance) -> None:
        self.sink(inst)

    def note_error(self, reason: str) -> None:
        self.errors[reason] = self.errors.get(reason, 0) + 1

    def flush(self) -> None:
        """Emit what was held back until its test ended (the pytest plugin calls this after each
        test, ``uninstall`` once more); a recorder that emits at once has nothing to do."""

    def test_modules_loaded(self) -> None:
        """pytest has imported the test modules (and what they import): patch what appeared since
        ``install`` (the pytest plugin calls this after collection)."""

    # ---- install / uninstall ------------------------------------------------------------------
    def install(self) -> None:
        if self.installed:
            return
        self._install()
        self.installed = True

    def uninstall(self) -> None:
        if not self.installed:
            return
        self.installed = False
        self._uninstall()

    def _install(self) -> None:
        raise NotImplementedError

    def _uninstall(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> BaseRecorder:
        self.install()
        return self

    def __exit__(self, *exc: object) -> None:
        self.uninstall()

    def library_version(self) -> str:
        return ""


RECORDERS: Registry[type[BaseRecorder]] = Registry(
    "library", __name__, group="opera.recorders", module_suffix="_recorder", error=HarvestError
)


def register_recorder(cls: type[BaseRecorder]) -> type[BaseRecorder]:
    """Class decorator: the recorder of ``cls.library`` (its module must be ``<library>_recorder``)."""
    if not cls.library:
        raise ValueError(f"{cls.__qualname__} has no library")
    return RECORDERS.add(cls.library, cls)


def get_recorder(library: str, sink: Callable[[OperatorInstance], None] | None = None) -> BaseRecorder:
    return RECORDERS.get(library)(sink)


@dataclass(frozen=True)
class HarvestOptions:
    limit: int | None = None  # stop after this many recorded instances (per source)
    pytest_args: tuple[str, ...] = ()  # for pytest-driven sources
    show_progress: bool = True
    # pytest-driven sources report here while the suite runs: {"collected": N}, {"tests": k,
    # "instances": m} (k more tests finished, m more instances recorded), {"summary": {outcome: n}}
    # (pytest's own pass/fail/skip/xfail counts), {"validating": n} (recorded, to be validated)
    on_event: Callable[[dict[str, Any]], None] | None = field(default=None, compare=False)


SourceFunc = Callable[[BaseRecorder, HarvestOptions], Iterator[OperatorInstance]]


@dataclass(frozen=True)
class HarvestSourceSpec:
    name: str
    library: str
    func: SourceFunc
    description: str
    default: bool  # part of `opera harvest LIB` with no --source


SOURCES: dict[tuple[str, str], HarvestSourceSpec] = {}


def harvest_source(library: str, name: str, *, default: bool = False) -> Callable[[SourceFunc], SourceFunc]:
    """Register a generator ``(recorder, options) -> Iterator[OperatorInstance]`` as a source."""

    def register(func: SourceFunc) -> SourceFunc:
        doc = (func.__doc__ or "").strip().splitlines()
        SOURCES[(library, name)] = HarvestSourceSpec(name, library, func, doc[0] if doc else "", default)
        return func

    return register


def _import_sources(library: str) -> None:
    own = f"{library}_sources"
    here = {info.name for info in pkgutil.iter_modules(__path__)}
    for module in ((own,) if own in here else ()) + _COMMON_SOURCE_MODULES:
        importlib.import_module(f"{__name__}.{module}")
    for ep in entry_points(group="opera.sources"):
        ep.load()


def sources_for(library: str) -> list[HarvestSourceSpec]:
    _import_sources(library)
    return [spec for (lib, _), spec in sorted(SOURCES.items()) if lib == library]


def get_source(library: str, name: str) -> HarvestSourceSpec:
    _import_sources(library)
    spec = SOURCES.get((library, name))
    if spec is None:
        known = ", ".join(s.name for s in sources_for(library)) or "none"
        raise HarvestError(f"unknown source {name!r} for {library}; known: {known}")
    return spec
