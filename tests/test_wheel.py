"""The wheel a user installs (``pip install .``, not editable) carries every module and every verb works.

The wheel is built from a copy of the tree (so the checkout gets no build/ or egg-info), then
(a) its module list is compared with the tree: ``opera/``, and ``instrumentation/`` and
``templates/`` installed as ``opera/instrumentation`` and ``opera/templates``; (b) it is unpacked
and every verb's ``--help`` runs from it, in a folder outside the checkout with PYTHONPATH = the
unpacked wheel, so that every ``opera`` module comes from the wheel and not from the editable
install (checked, not assumed).
"""

from __future__ import annotations

import configparser
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from filelock import FileLock  # a dependency of torch, which is pinned

from opera.cli import VERBS

ROOT = Path(__file__).resolve().parents[1]
# folder in the tree -> where its files are in the wheel (the design keeps instrumentation/ and
# templates/ beside opera/; they are installed as opera.instrumentation and opera.templates)
INSTALLED_AS = {"opera": "opera", "instrumentation": "opera/instrumentation", "templates": "opera/templates"}
MODULE_SUFFIXES = (".py", ".toml")
# what the build needs besides the package folders (pyproject.toml names README.md as the readme)
BUILD_FILES = ("setup.py", "pyproject.toml", "README.md")


def _modules_in_tree() -> set[str]:
    found = set()
    for folder, installed in INSTALLED_AS.items():
        for path in (ROOT / folder).rglob("*"):
            if path.is_file() and path.suffix in MODULE_SUFFIXES and "__pycache__" not in path.parts:
                found.add(f"{installed}/{path.relative_to(ROOT / folder).as_posix()}")
    return found


def _env(unpacked: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "PYTHONSAFEPATH")}
    return {**env, "PYTHONPATH": str(unpacked), "TF_CPP_MIN_LOG_LEVEL": "2", "CI": "true"}


def _build_wheel(out: Path) -> Path:
    source = out / "source"
    for folder in INSTALLED_AS:
        shutil.copytree(
            ROOT / folder, source / folder, ignore=shutil.ignore_patterns("__pycache__"), dirs_exist_ok=True
        )
    for name in BUILD_FILES:
        shutil.copy2(ROOT / name, source / name)
    cmd = [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation"]
    proc = subprocess.run(
        [*cmd, "-w", str(out / "dist"), str(source)], capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    (built,) = (out / "dist").glob("opera-*.whl")
    return built


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> Path:
    """Built once per session: under pytest-xdist the workers share one build (the folder above
    each worker's base temp belongs to this session)."""
    if worker_id == "master":
        return _build_wheel(tmp_path_factory.mktemp("wheel"))
    shared = tmp_path_factory.getbasetemp().parent / "opera-wheel"
    with FileLock(str(shared) + ".lock"):
        built = sorted(shared.glob("dist/opera-*.whl"))
        return built[0] if built else _build_wheel(shared)


@pytest.fixture(scope="module")
def unpacked(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    where = tmp_path_factory.mktemp("unpacked")
    with zipfile.ZipFile(wheel) as zf:
        zf.extractall(where)
    return where


def test_wheel_has_every_module_of_the_tree(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
    in_wheel = {n for n in names if n.endswith(MODULE_SUFFIXES) and ".dist-info/" not in n}
    in_tree = _modules_in_tree()
    # the stages the package is grouped by, and the two mapped folders, are all there
    for package in ("opera/generate", "opera/run", "opera/verdict", "opera/prioritize", "opera/report"):
        assert f"{package}/__init__.py" in in_tree
    assert {"opera/instrumentation/__init__.py", "opera/templates/__init__.py"} <= in_tree
    assert sorted(in_tree - in_wheel) == [], "in the tree, not in the wheel"
    assert sorted(in_wheel - in_tree) == [], "in the wheel, not in the tree"


def test_wheel_entry_points(unpacked: Path) -> None:
    (dist_info,) = unpacked.glob("opera-*.dist-info")
    entry_points = configparser.ConfigParser()
    entry_points.read(dist_info / "entry_points.txt")
    assert dict(entry_points["console_scripts"]) == {"opera": "opera.cli:main"}
    plugin = entry_points["pytest11"]["opera_harvest"]
    assert (unpacked / (plugin.replace(".", "/") + ".py")).is_file()


# Builds the parser (imports every verb's module, as `opera --help` does), then lists every loaded
# opera module that does not come from the unpacked wheel.
PROVENANCE = """
import json, sys
from pathlib import Path
import opera
from opera.cli import build_parser
build_parser()
root = Path(sys.argv[1]).resolve()
loaded = {n: m.__file__ for n, m in sys.modules.items() if n.split(".")[0] == "opera" and getattr(m, "__file__", None)}
print(json.dumps({"opera": opera.__file__, "loaded": len(loaded),
                  "elsewhere": {n: f for n, f in loaded.items() if not Path(f).resolve().is_relative_to(root)}}))
"""


def test_every_module_loads_from_the_wheel(unpacked: Path, tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-c", PROVENANCE, str(unpacked)],
        cwd=tmp_path,
        env=_env(unpacked),
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert Path(report["opera"]).resolve() == (unpacked / "opera" / "__init__.py").resolve()
    assert not Path(report["opera"]).resolve().is_relative_to(ROOT)
    assert report["elsewhere"] == {}
    assert report["loaded"] >= len(VERBS) + 2  # opera, opera.cli and every verb's module at least


@pytest.mark.parametrize("verb", [None, *VERBS], ids=lambda v: v or "opera")
def test_every_verb_helps_from_the_wheel(unpacked: Path, tmp_path: Path, verb: str | None) -> None:
    if verb is None:  # `opera --help`: the console script's target, as entry_points.txt names it
        cmd = [sys.executable, "-c", "import sys; from opera.cli import main; sys.exit(main(['--help']))"]
    else:
        cmd = [sys.executable, "-m", "opera.cli", verb, "--help"]
    proc = subprocess.run(cmd, cwd=tmp_path, env=_env(unpacked), capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.startswith(f"usage: opera {verb or ''}".rstrip()), proc.stdout[:200]
    if verb is None:
        assert all(v in proc.stdout for v in VERBS)
