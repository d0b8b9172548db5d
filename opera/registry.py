"""One registration style for every pluggable kind: targets, strategies, executors, templates,
recorders (and, keyed by library, harvest sources).

A plugin is a module in the kind's package, found on disk (no table to edit), or a module of a
third-party package named in the kind's entry point group (``[project.entry-points."opera.targets"]``
``mine = "my_pkg.my_target"``). The module registers what it defines with the registry's
``register`` decorator when it is imported. Two ways to find names:

- ``module_suffix=None``: one module may define several entries (``tvm.py`` holds three targets),
  so names are known only once every module is imported. For kinds whose modules import nothing
  heavy at import time (targets, strategies).
- ``module_suffix="_template"`` (or ``""``): the module named ``<name><suffix>`` defines the entry
  ``<name>``, so names are read from file names and a module is imported only when its entry is
  asked for. For kinds whose modules import a deep-learning library (templates, recorders: seconds
  each) or an optional dependency (the Ray executor).

Modules whose name starts with ``_`` are private helpers, never plugins.
"""

from __future__ import annotations

import importlib
import pkgutil
import types
from collections.abc import Callable
from importlib.metadata import entry_points
from typing import Generic, TypeVar

from opera.errors import OperaError

__all__ = ["Registry"]

T = TypeVar("T")


class Registry(Generic[T]):
    def __init__(
        self,
        kind: str,
        package: str,
        *,
        group: str,
        module_suffix: str | None = None,
        error: type[Exception] = OperaError,
    ) -> None:
        self.kind = kind
        self.package = package
        self.group = group
        self.module_suffix = module_suffix
        self.error = error
        self._entries: dict[str, T] = {}
        self._all_loaded = False

    # ---- registration -------------------------------------------------------------------------
    def add(self, name: str, obj: T) -> T:
        if not name:
            raise ValueError(f"a {self.kind} needs a name: {obj!r}")
        known = self._entries.get(name)
        if known is not None and known is not obj and _qualname(known) != _qualname(obj):
            raise ValueError(f"{self.kind} {name!r} registered twice: {_qualname(known)} and {_qualname(obj)}")
        self._entries[name] = obj
        return obj

    def register(self, name: str) -> Callable[[T], T]:
        """Decorator: ``@REGISTRY.register("name")``."""

        def decorate(obj: T) -> T:
            return self.add(name, obj)

        return decorate

    def remove(self, name: str) -> None:
        """Forget an entry (tests that register a throwaway plugin clean up with this)."""
        self._entries.pop(name, None)

    # ---- lookup -------------------------------------------------------------------------------
    def _modules(self) -> list[str]:
        package = importlib.import_module(self.package)
        suffix = self.module_suffix or ""
        return sorted(
            info.name
            for info in pkgutil.iter_modules(package.__path__)
            if not info.name.startswith("_") and info.name.endswith(suffix)
        )

    def _entry_points(self) -> list[object]:
        return list(entry_points(group=self.group))

    def _load_entry_point(self, ep: object) -> None:
        loaded = ep.load()  # type: ignore[attr-defined]
        if not isinstance(loaded, types.ModuleType):  # "pkg.mod:Thing": the entry itself
            self.add(ep.name, loaded)  # type: ignore[attr-defined]

    def _load_all(self) -> None:
        if self._all_loaded:
            return
        for module in self._modules():
            importlib.import_module(f"{self.package}.{module}")
        for ep in self._entry_points():
            self._load_entry_point(ep)
        self._all_loaded = True

    def names(self) -> list[str]:
        """Every known name, sorted. With a module suffix, nothing is imported."""
        if self.module_suffix is None:
            self._load_all()
            return sorted(self._entries)
        suffix = self.module_suffix
        from_files = {m[: len(m) - len(suffix)] if suffix else m for m in self._modules()}
        return sorted(from_files | set(self._entries) | {ep.name for ep in self._entry_points()})  # type: ignore[attr-defined]

    def get(self, name: str) -> T:
        if name not in self._entries:
            if self.module_suffix is None:
                self._load_all()
            else:
                self._load_one(name)
        try:
            return self._entries[name]
        except KeyError:
            known = ", ".join(self.names()) or "none"
            raise self.error(f"unknown {self.kind} {name!r}; known: {known}") from None

    def _load_one(self, name: str) -> None:
        module = f"{name}{self.module_suffix}"
        if module in self._modules():
            importlib.import_module(f"{self.package}.{module}")
            if name not in self._entries:
                raise self.error(f"{self.package}.{module} does not register a {self.kind} named {name!r}")
            return
        for ep in self._entry_points():
            if ep.name == name:  # type: ignore[attr-defined]
                self._load_entry_point(ep)
                return

    def items(self) -> list[tuple[str, T]]:
        """Every entry, by name (imports every module)."""
        if self.module_suffix is not None:
            for name in self.names():
                self.get(name)
        else:
            self._load_all()
        return sorted(self._entries.items())


def _qualname(obj: object) -> str:
    return f"{getattr(obj, '__module__', '?')}.{getattr(obj, '__qualname__', repr(obj))}"
