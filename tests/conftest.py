"""Fixtures shared by several test modules.

Plain helpers (instances, corpus writing, one verdict in this process) stay importable from
``tests/_run_fixtures.py``. Lanes: tests marked ``slow`` (pyproject.toml) run a real harvest, a
notebook, a Ray cluster or real compilers over a slice; ``make test-fast`` leaves them out,
``make test`` (what CI runs) runs everything.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from opera.run.execution import WorkerState


@pytest.fixture(scope="module")
def state(tmp_path_factory: pytest.TempPathFactory) -> WorkerState:
    """One worker's state for a whole module whose tests run real targets in this process
    (``_run_fixtures.verdict_in_process``): targets and configs are loaded, and every framework
    and compiler imported, once per module."""
    from opera.run.execution import WorkerState
    from opera.run.executors import WorkerSettings

    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    os.environ.setdefault("CI", "true")  # no OpenVINO telemetry
    # Inductor's default cache lies in the system temp folder and grows from run to run.
    os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", str(tmp_path_factory.mktemp("inductor-cache")))
    return WorkerState(WorkerSettings(seed=0))
