"""The command line: every --help works, options match configs, spawn-envs runs for real."""

from __future__ import annotations

import dataclasses
import inspect
import json
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from computerrl.cli.main import app
from computerrl.stages import spawn_envs

STAGES = {"spawn-envs": (spawn_envs.command, spawn_envs.SpawnEnvsConfig)}


def test_top_level_help_lists_every_stage():
    result = CliRunner().invoke(app, ["--help"])
    assert result.exit_code == 0
    for name in STAGES:
        assert name in result.output


@pytest.mark.parametrize("name", STAGES)
def test_stage_help_exits_zero(name):
    result = CliRunner().invoke(app, [name, "--help"])
    assert result.exit_code == 0 and "--out" in result.output


@pytest.mark.parametrize("name", STAGES)
def test_command_options_and_config_fields_never_drift_apart(name):
    command, config = STAGES[name]
    params = inspect.signature(command).parameters
    fields = {f.name: f.default for f in dataclasses.fields(config)}
    assert list(params) == list(fields)
    for field, default in fields.items():
        assert params[field].default == default, field


def test_help_is_fast_because_heavy_imports_are_deferred():
    out = subprocess.run([sys.executable, "-c", "import sys, computerrl.cli.main; "
                          "print(json.dumps(sorted(m for m in ('torch', 'datasets', 'grpc', 'transformers') "
                          "if m in sys.modules)))".replace("json.dumps", "__import__('json').dumps")],
                         capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == []


def test_bad_option_combination_is_a_clear_error():
    result = CliRunner().invoke(app, ["spawn-envs", "--count", "0"])
    assert result.exit_code != 0 and "--count" in result.output


@pytest.mark.desktop
def test_spawn_envs_detach_then_stop(tmp_path):
    from computerrl.envs.backends.local import _alive
    from computerrl.envs.client import EnvClient
    from computerrl.envs.manifest import read_manifest

    out = tmp_path / "envs"
    cli = [sys.executable, "-m", "computerrl.cli.main", "spawn-envs", "--out", str(out)]
    started = subprocess.run(cli + ["--count", "2", "--detach", "--poll-s", "0.5"], capture_output=True, text=True,
                             timeout=600)
    assert started.returncode == 0, started.stderr + (out / "supervisor.log").read_text()
    handles, status = read_manifest(out)
    assert [h.env_id for h in handles] == ["env-000", "env-001"] and set(status.values()) == {"healthy"}
    for h in handles:
        client = EnvClient(h.address)
        assert client.health().healthy and h.address.startswith("127.0.0.1:")
        client.close()
    assert json.loads((out / "spawn-envs.json").read_text())["count"] == 2
    assert json.loads((out / "manifest" / "lineage.json").read_text())["stage"] == "spawn-envs"

    stopped = subprocess.run(cli + ["--stop"], capture_output=True, text=True, timeout=120)
    assert stopped.returncode == 0, stopped.stderr
    handles, status = read_manifest(out)
    assert set(status.values()) == {"stopped"}
    assert not any(_alive(h.detail["pid"]) for h in handles)
