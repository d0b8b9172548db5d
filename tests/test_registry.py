"""One registration style (issue 12, section 2): every pluggable kind is an ``opera.registry.Registry``.

Real packages are written to a temporary directory on ``sys.path`` (and a real ``.dist-info`` with
an ``entry_points.txt``, which ``importlib.metadata`` reads as it would for an installed wheel), so
discovery, lazy import and third-party entry points run the code users get.
"""

from __future__ import annotations

import importlib
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from opera.errors import OperaError
from opera.registry import Registry


@pytest.fixture
def plugin_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()
    yield tmp_path
    for name in [m for m in sys.modules if m.split(".")[0] in ("kinds", "thirdparty")]:
        del sys.modules[name]


def _write(root: Path, rel: str, code: str) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(code))


def test_import_all_kind_finds_every_module_but_private_ones(plugin_root: Path) -> None:
    _write(plugin_root, "kinds/__init__.py", "")
    _write(plugin_root, "kinds/many/__init__.py", "from opera.registry import Registry\nREG = Registry('widget', __name__, group='opera.test-widgets')\n")
    _write(plugin_root, "kinds/many/two.py", "from kinds.many import REG\nREG.add('a', 1)\nREG.add('b', 2)\n")
    _write(plugin_root, "kinds/many/_helper.py", "raise RuntimeError('a private helper is never imported as a plugin')\n")
    reg = importlib.import_module("kinds.many").REG
    assert reg.names() == ["a", "b"]  # one module, two entries
    assert reg.get("b") == 2
    with pytest.raises(OperaError, match=r"unknown widget 'c'; known: a, b"):
        reg.get("c")
    with pytest.raises(ValueError, match="registered twice"):
        reg.add("a", 3)


def test_suffix_kind_reads_names_from_files_and_imports_only_what_is_asked(plugin_root: Path) -> None:
    _write(plugin_root, "kinds/__init__.py", "")
    _write(plugin_root, "kinds/lazy/__init__.py", "")
    _write(plugin_root, "kinds/lazy/fast_thing.py", "import kinds.lazy.reg as r\nr.REG.add('fast', 'FAST')\n")
    _write(plugin_root, "kinds/lazy/heavy_thing.py", "raise ImportError('heavy: imported only when asked for')\n")
    _write(plugin_root, "kinds/lazy/silent_thing.py", "x = 1  # registers nothing\n")
    _write(plugin_root, "kinds/lazy/reg.py", "from opera.registry import Registry\nREG = Registry('thing', 'kinds.lazy', group='opera.test-things', module_suffix='_thing')\n")
    reg = importlib.import_module("kinds.lazy.reg").REG
    assert reg.names() == ["fast", "heavy", "silent"]  # from file names: nothing imported yet
    assert "kinds.lazy.heavy_thing" not in sys.modules
    assert reg.get("fast") == "FAST"
    with pytest.raises(ImportError, match="heavy"):
        reg.get("heavy")
    with pytest.raises(OperaError, match="does not register a thing named 'silent'"):
        reg.get("silent")


def test_third_party_entry_points_register_modules_and_objects(plugin_root: Path) -> None:
    _write(plugin_root, "thirdparty/__init__.py", "")
    _write(plugin_root, "thirdparty/objects.py", "THING = 'from an entry point'\n")
    _write(
        plugin_root,
        "thirdparty/mod.py",
        "from opera.prioritize.strategies import Strategy, register_strategy\n"
        "@register_strategy\nclass Reverse(Strategy):\n    name = 'test-reverse'\n"
        "    def order(self, instances, ctx):\n        return [i.id for i in instances][::-1]\n",
    )
    _write(
        plugin_root,
        "thirdparty-1.0.dist-info/METADATA",
        "Metadata-Version: 2.1\nName: thirdparty\nVersion: 1.0\n",
    )
    _write(
        plugin_root,
        "thirdparty-1.0.dist-info/entry_points.txt",
        "[opera.test-objects]\nremote = thirdparty.objects:THING\n\n[opera.strategies]\nreverse = thirdparty.mod\n",
    )
    importlib.invalidate_caches()
    reg: Registry[str] = Registry("object", "opera.run.targets", group="opera.test-objects", module_suffix="_none")
    assert "remote" in reg.names()
    assert reg.get("remote") == "from an entry point"
    # the real strategy registry: a third-party strategy shows up by its own name
    from opera.prioritize import strategies

    strategies.STRATEGIES._all_loaded = False
    try:
        assert "test-reverse" in strategies.strategy_names()
        assert strategies.get_strategy("test-reverse").name == "test-reverse"
    finally:
        strategies.STRATEGIES.remove("test-reverse")


def test_every_kind_uses_the_registry() -> None:
    from opera.instrumentation import RECORDERS
    from opera.model import known_libraries
    from opera.prioritize.strategies import STRATEGIES
    from opera.run.executors import EXECUTORS
    from opera.run.targets import TARGETS
    from opera.templates import TEMPLATES

    for registry in (RECORDERS, STRATEGIES, EXECUTORS, TARGETS, TEMPLATES):
        assert isinstance(registry, Registry)
    # a library is known because it has a template, and harvestable because it has a recorder
    assert known_libraries() == tuple(TEMPLATES.names()) == tuple(RECORDERS.names()) == ("keras", "onnx", "torch")
    assert EXECUTORS.names() == ["local", "ray"]
    assert {"opera", "random", "total-cov"} <= set(STRATEGIES.names())
    assert "tvm-onnx" in TARGETS.names()
