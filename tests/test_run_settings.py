"""`opera run` and `opera nightly` share one set of settings (``RunSettings``): the same flags,
read by one function, carried unchanged into every run the nightly starts."""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

from _run_fixtures import relus, write

import opera.verdict
from opera.cli import main
from opera.commands import nightly as nightly_command
from opera.commands import run as run_command
from opera.commands.run import run_settings_from_args
from opera.nightly import NightlyConfig
from opera.run.runner import RunConfig, RunSettings
from opera.store import ResultStore

VERDICT_DIR = Path(opera.verdict.__file__).parent


def _settings_flags(tmp_path: Path) -> list[str]:
    """A value other than the default for every setting."""
    return [
        "--store", str(tmp_path / "s.db"),
        "--workers", "1",
        "--timeout", "45s",
        "--max-rss", "3G",
        "--seed", "7",
        "--oracle-config", str(VERDICT_DIR / "oracles.toml"),
        "--unsupported-config", str(VERDICT_DIR / "unsupported.toml"),
        "--no-reproducers",
        "--no-verify",
        "--torch-tensor-args", "inputs",
        "--onnx-data-inputs", "constants",
        "--oracle", "reference,optlevel,batch",
        "--batch", "8",
        "--sample", "2",
    ]  # fmt: skip


def _parse(module: object, argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    module.add_arguments(parser)  # type: ignore[attr-defined]
    return parser.parse_args(argv)


def test_both_verbs_read_the_same_flags_into_every_setting(tmp_path: Path) -> None:
    argv = ["c.jsonl", *_settings_flags(tmp_path), "--executor", "ray", "--address", "auto"]
    from_run = run_settings_from_args(_parse(run_command, argv))
    from_nightly = run_settings_from_args(_parse(nightly_command, argv))
    assert from_run == from_nightly
    defaults = RunSettings()
    unset = [
        f.name
        for f in dataclasses.fields(RunSettings)
        if getattr(from_run, f.name) == getattr(defaults, f.name)
    ]
    assert unset == [], f"settings no flag sets: {unset}"
    assert from_run.timeout_s == 45.0 and from_run.max_rss_bytes == 3 * 1024**3
    # both configs are the settings plus their own fields, and hand the settings on unchanged
    assert {f.name for f in dataclasses.fields(RunSettings)} <= {
        f.name for f in dataclasses.fields(RunConfig)
    }
    nightly = NightlyConfig(corpus=["c.jsonl"], **from_run.run_settings())
    assert (
        RunConfig(corpus=[], targets=[], **nightly.run_settings()).run_settings() == from_run.run_settings()
    )
    # the defaults of the flags are the settings' defaults
    assert run_settings_from_args(_parse(run_command, ["c.jsonl"])) == defaults
    assert run_settings_from_args(_parse(nightly_command, [])) == defaults


def test_every_setting_reaches_the_nightly_run_and_its_stored_config(tmp_path: Path) -> None:
    corpus = write(tmp_path / "c.jsonl", relus(3))
    flags = _settings_flags(tmp_path)
    argv = ["nightly", str(corpus), "-t", "test-wrong", "-q", "-o", str(tmp_path / "out"), *flags]
    assert main(argv) == 1  # test-wrong: every test is a new failure
    expected = run_settings_from_args(_parse(nightly_command, [str(corpus), *flags]))
    with ResultStore(tmp_path / "s.db") as store:
        (run,) = store.runs()
        stored = RunConfig.from_json(run.config)
    assert stored.run_settings() == expected.run_settings()
    assert run.config["nightly"] == 1 and stored.targets == ["test-wrong"] and stored.order
    assert set(run.config) == {f.name for f in dataclasses.fields(RunConfig)} | {"nightly"}
    assert not (tmp_path / "s.db.d" / "repro").exists()  # --no-reproducers reached the workers
