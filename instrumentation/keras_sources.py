"""Keras harvest source: Keras's own test suite, shipped inside the keras wheel (docs/design.md, Harvest).

``keras-tests`` runs ``<site-packages>/keras/src/{layers,ops}/**/*_test.py`` with pytest under the
recording plugin (TensorFlow backend). Arguments after ``--`` on the command line are appended to
the pytest command (``-k``, ``--deselect``, ``-n 2`` with pytest-xdist, or explicit test paths that
replace the default directories when they are paths).

Measured on the 2-core development machine (keras 3.15.1, TF 2.21, jax 0.10.2, shared with other
jobs): 8,858 tests, about 9 minutes under the recorder with two xdist workers, then the validity gate
of ~11,800 distinct instances (ops ~7 ms, conv layers ~90 ms each); ``opera harvest keras`` end to
end 11m50s, 5.0 GB peak RSS (driver + 2 workers). With the recorder installed no test fails that
would not fail anyway (junit: 0 failures, only the 6 collection errors below).

Keras's tests use ``jax`` as their reference (``ops/image_test.py``, ``ops/math_test.py`` at import,
~4,000 dtype-promotion tests of ``ops/numpy_test.py`` inside the test before any op is called):
without jax those record nothing (the corpus had 5,000 fewer instances). Six preprocessing test
modules import ``grain`` and are still not collected.
"""

from __future__ import annotations

import importlib.util
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

from opera.instrumentation import BaseRecorder, HarvestOptions, harvest_source
from opera.instrumentation.pytest_source import run_pytest_harvest
from opera.model import OperatorInstance

__all__ = ["KERAS_TEST_DIRS", "keras_test_paths", "keras_tests"]

# Test folders of the keras wheel whose tests exercise keras.layers and keras.ops.
KERAS_TEST_DIRS = ("layers", "ops")

# Some test modules do ``from conftest import skip_if_backend``: the keras repository's top-level
# conftest.py, which the wheel does not ship. Without it image_test.py, math_test.py and
# einops_test.py fail to import and record nothing. This is the same helper.
_CONFTEST_SHIM = """import pytest
from keras.src.backend import backend


def skip_if_backend(given_backend, reason):
    return pytest.mark.skipif(backend() == given_backend, reason=reason)
"""

# pytest-xdist workers when it is installed and no -n was given: the suite is CPU-bound and each
# worker imports TensorFlow once (about 1.5 GB RSS each).
_XDIST_WORKERS = int(os.environ.get("OPERA_KERAS_WORKERS", "2"))

# Tests to deselect, by node id relative to keras/src. None needed so far: no test of layers/ or
# ops/ hangs, needs the network or a GPU on this machine.
SKIPPED_TESTS: tuple[str, ...] = ()


def keras_source_root() -> Path:
    """``<site-packages>/keras/src`` of the installed keras, found without importing keras."""
    spec = importlib.util.find_spec("keras")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("keras is not installed")
    return Path(next(iter(spec.submodule_search_locations))) / "src"


def keras_test_paths(dirs: tuple[str, ...] = KERAS_TEST_DIRS) -> list[str]:
    root = keras_source_root()
    return [str(root / d) for d in dirs if (root / d).is_dir()]


@harvest_source("keras", "keras-tests", default=True)
def keras_tests(recorder: BaseRecorder, options: HarvestOptions) -> Iterator[OperatorInstance]:
    """Keras's own layers/ops test suite from the installed wheel (TensorFlow backend)."""
    root = keras_source_root()
    user_args = list(options.pytest_args)
    explicit_paths = [a for a in user_args if not a.startswith("-") and Path(a.split("::")[0]).exists()]
    args = [] if explicit_paths else keras_test_paths()
    args += [f"--deselect={root / test}" for test in SKIPPED_TESTS]
    args += ["-p", "no:randomly", *user_args]
    asked_for_workers = any(a.startswith(("-n", "--numprocesses")) for a in user_args)
    if _XDIST_WORKERS and not asked_for_workers and importlib.util.find_spec("xdist") is not None:
        args += ["-n", str(_XDIST_WORKERS)]
    with tempfile.TemporaryDirectory(prefix="opera-keras-conftest-") as shim_dir:
        Path(shim_dir, "conftest.py").write_text(_CONFTEST_SHIM)
        python_path = os.pathsep.join(p for p in (shim_dir, os.environ.get("PYTHONPATH", "")) if p)
        env = {
            "KERAS_BACKEND": "tensorflow",
            "TF_CPP_MIN_LOG_LEVEL": "2",
            "CUDA_VISIBLE_DEVICES": "",
            "PYTHONPATH": python_path,
        }
        seen: set[str] = set()
        # Instances recorded twice (a parametrized test repeating a call) are dropped here, before
        # the harvest driver spends a validation on them; the corpus writer would drop them anyway.
        for inst in run_pytest_harvest(
            recorder, args, suite="keras-tests", limit=options.limit, extra_env=env, on_event=options.on_event
        ):
            if inst.id in seen:
                continue
            seen.add(inst.id)
            yield inst
