"""The command line: every --help works, options match configs, spawn-envs runs for real."""

from __future__ import annotations

import dataclasses
import inspect
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from computerrl.cli import async_rl as async_rl_cli
from computerrl.cli import eval as eval_cli
from computerrl.cli import filter_success as filter_success_cli
from computerrl.cli import grpo as grpo_cli
from computerrl.cli import rollout as rollout_cli
from computerrl.cli import sft as sft_cli
from computerrl.cli import build_apis as build_apis_cli
from computerrl.cli import spawn_envs as spawn_envs_cli
from computerrl.cli import tasks as tasks_cli
from computerrl.cli.main import app
from computerrl.cli.options import REQUIRED
from computerrl.envs.fleet.pidfile import is_supervisor
from computerrl.stages import eval as eval_stage
from computerrl.stages import (build_apis, filter_success, grpo, rollout, sft, spawn_envs, tasks_build, tasks_check,
                               tasks_fetch)

STAGES = {"spawn-envs": (spawn_envs_cli.command, spawn_envs.SpawnEnvsConfig),
          "rollout": (rollout_cli.command, rollout.RolloutConfig),
          "grpo": (grpo_cli.command, grpo.GRPOConfig),
          "async-rl": (async_rl_cli.command, async_rl_cli.CheckedAsyncRLConfig),
          "filter-success": (filter_success_cli.command, filter_success.FilterSuccessConfig),
          "sft": (sft_cli.command, sft.SFTConfig),
          "eval": (eval_cli.command, eval_stage.EvalConfig)}


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
    fields = {f.name: f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
              for f in dataclasses.fields(config)}
    assert list(params) == list(fields)
    for field, default in fields.items():
        assert params[field].default == default, field


# Every command made from a stage's config (cli/options.py), with the defaults its command line
# changes: `tasks build` asks for its --out, `tasks check` and `fetch` for their FOLDER (fetch: and --cache).
def command_of(typer_app, name: str):
    return next(info.callback for info in typer_app.registered_commands if info.name == name)


CONFIGURED = STAGES | {"build-apis": (build_apis_cli.command, build_apis.BuildApisConfig),
                       "tasks build": (tasks_cli.build, tasks_build.BuildConfig),
                       "tasks check": (command_of(tasks_cli.app, "check"), tasks_check.CheckConfig),
                       "tasks fetch": (command_of(tasks_cli.app, "fetch"), tasks_fetch.FetchConfig)}
CLI_DEFAULTS = {"tasks build": {"out": REQUIRED}, "tasks check": {"folder": REQUIRED},
                "tasks fetch": {"folder": REQUIRED, "cache": REQUIRED}}


def test_every_stage_command_is_made_from_its_config():
    made = {info.name for info in app.registered_commands if hasattr(info.callback, "config")} | \
        {f"tasks {info.name}" for info in tasks_cli.app.registered_commands if hasattr(info.callback, "config")}
    assert made == set(CONFIGURED)
    for name, (command, config) in CONFIGURED.items():
        assert command.config is config and command.cli_defaults == CLI_DEFAULTS.get(name, {}), name


@pytest.mark.parametrize("name", CONFIGURED)
def test_help_shows_each_option_with_its_config_default_and_help(name):
    """What `--help` shows for each field: its help, and the config's default (or the command line's
    declared one); a bool as its flag, an empty default ("", None, []) as none."""
    from computerrl.data.config import described

    command, config = CONFIGURED[name]
    result = CliRunner(env={"COLUMNS": "1000"}).invoke(app, [*name.split(), "--help"])
    assert result.exit_code == 0, result.output
    rows = {}  # "--flag" -> its row, one line at this width ("│ * --out -o <path> … [required] │")
    for line in result.output.splitlines():
        words = [w for w in line.split() if w not in ("│", "*")]
        if line.startswith("│") and words and words[0].startswith("--"):
            rows[words[0]] = " ".join(words)
    for field in dataclasses.fields(config):
        about = described(config, field.name)
        if about["cli"].get("argument"):
            continue  # a positional argument: in the Arguments box, without a flag
        flag = (about["flags"] or ("--" + field.name.replace("_", "-"),))[0].split("/")[0]
        toggles = not about["flags"] or "/" in about["flags"][0]  # --x/--no-x: the default is shown
        default = CLI_DEFAULTS.get(name, {}).get(field.name, field.default_factory()
                                                 if field.default_factory is not dataclasses.MISSING else field.default)
        row = rows[flag]
        assert " ".join(about["help"].split()) in row, (flag, row)
        if default is REQUIRED:
            assert "[required]" in row and "[default:" not in row, row
        elif isinstance(default, bool) and not toggles:
            assert "[default:" not in row, row  # a plain flag: on when given
        elif isinstance(default, bool):
            assert f"[default: {'' if default else 'no-'}{flag[2:]}]" in row, row
        elif default in (None, "", []):
            assert "[default:" not in row, row
        else:
            assert f"[default: {default}]" in row, row


BAD = {  # one value each stage's config refuses, and the option its message names
    "spawn-envs": (["--count", "0"], "--count"),
    "rollout": (["--max-steps", "0"], "--max-steps"),
    "eval": (["--samples", "3"], "--samples"),
    "grpo": (["--rollouts", "{steps}", "--eps-low", "1"], "--eps-low"),
    "async-rl": (["--max-lag", "-1"], "--max-lag"),
    "filter-success": (["--rollouts", "{steps}", "--k", "-2"], "--k"),
    "sft": (["--data", "{steps}", "--batch-rows", "0"], "--batch-rows"),
    "build-apis": (["--rounds", "0"], "--rounds"),
    "tasks build": (["--out", "{tmp}", "--train", "-1"], "--train"),
    "tasks fetch": (["{tmp}", "--cache", "{tmp}", "--max-mb", "0"], "--max-mb"),
}  # tasks check refuses only its FOLDER, a wrong kind of input (tests/test_tasks_check.py)


@pytest.mark.parametrize("name", BAD)
def test_a_value_the_config_refuses_is_a_usage_error_naming_the_option(name, tmp_path):
    import datasets

    from computerrl.data.datasets_io import save_atomic
    from computerrl.data.schemas import STEP_FEATURES

    args, option = BAD[name]
    steps = save_atomic(datasets.Dataset.from_dict({c: [] for c in STEP_FEATURES}, features=STEP_FEATURES),
                        tmp_path / "steps")  # a step dataset: the input is right, the value is not
    result = CliRunner(env={"COLUMNS": "1000"}).invoke(app, [*name.split(),
                                                             *(a.format(tmp=tmp_path, steps=steps) for a in args)])
    assert result.exit_code == 2 and "Invalid value" in result.output and option in result.output, result.output


def test_an_unknown_name_is_a_usage_error_listing_the_known_ones_unquoted():
    result = CliRunner(env={"COLUMNS": "1000"}).invoke(app, ["rollout", "--budgets", "nope"])
    assert result.exit_code == 2 and "Invalid value: unknown prompt budget 'nope'; known: paper, quick, small, tiny" \
        in " ".join(result.output.split()), result.output


def test_a_config_field_can_be_an_argument_take_its_own_flags_and_a_subclass_keeps_its_help():
    import typer

    from computerrl.cli.options import stage_command
    from computerrl.data.config import setting

    @dataclasses.dataclass
    class Base:
        folder: Path = setting(Path("."), "Where to look.", argument=True, metavar="FOLDER")
        quiet: bool = setting(False, "Say less.", "--quiet/--loud", "-q")
        size: int = setting(1, "How many.")

        def __post_init__(self):
            if self.size < 1:
                raise ValueError("--size must be at least 1")

    @dataclasses.dataclass
    class Child(Base):
        size: int = 3

    seen = []
    toy = typer.Typer()
    toy.command()(stage_command(Child, seen.append))
    runner = CliRunner(env={"COLUMNS": "1000"})
    assert runner.invoke(toy, ["somewhere", "-q"]).exit_code == 0
    assert seen == [Child(folder=Path("somewhere"), quiet=True, size=3)]
    shown = " ".join(runner.invoke(toy, ["--help"]).output.split())
    assert "FOLDER" in shown and "--quiet -q --loud <bool> Say less." in shown, shown
    assert "How many. [default: 3]" in shown, shown  # the parent's help, the child's default
    refused = runner.invoke(toy, [".", "--size", "0"])
    assert refused.exit_code == 2 and "--size must be at least 1" in refused.output and seen == [seen[0]]


def test_help_is_fast_because_heavy_imports_are_deferred():
    out = subprocess.run([sys.executable, "-c", "import sys, computerrl.cli.main; "
                          "print(json.dumps(sorted(m for m in ('torch', 'datasets', 'grpc', 'transformers') "
                          "if m in sys.modules)))".replace("json.dumps", "__import__('json').dumps")],
                         capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == []


def test_bad_option_combination_is_a_clear_error():
    result = CliRunner().invoke(app, ["spawn-envs", "--count", "0"])
    assert result.exit_code != 0 and "--count" in result.output


def test_docker_options_reach_the_backend_and_loopback_with_remote_engines_is_refused():
    cfg = spawn_envs.SpawnEnvsConfig(backend="docker", docker_hosts="tcp://gpu1:2375, tcp://gpu2:2375",
                                     publish_ip="0.0.0.0", docker_image="img:1")
    backend = spawn_envs._backend(cfg)
    assert (backend.hosts, backend.publish_ip, backend.image) == (["tcp://gpu1:2375", "tcp://gpu2:2375"], "0.0.0.0",
                                                                  "img:1")
    result = CliRunner().invoke(app, ["spawn-envs", "--backend", "docker", "--docker-hosts", "tcp://gpu1:2375"])
    assert result.exit_code != 0 and "publish_ip" in result.output
    result = CliRunner().invoke(app, ["spawn-envs", "--backend", "nope"])
    assert result.exit_code != 0 and "docker, local" in result.output


def test_stop_without_a_manifest_says_so(tmp_path, capsys):
    assert spawn_envs.run(spawn_envs.SpawnEnvsConfig(out=tmp_path, stop=True)) == 1
    assert "no env manifest" in capsys.readouterr().err


def test_stop_stops_docker_servers_on_the_hosts_the_manifest_names(tmp_path, monkeypatch):
    from computerrl.envs.fleet.backends.base import BACKENDS, EnvHandle
    from computerrl.envs.fleet.manifest import read_manifest, write_manifest

    made, stopped = [], []

    class Recorder:
        def __init__(self, **options):
            made.append(options)

        def stop(self, handle):
            stopped.append(handle.env_id)

    import computerrl.envs.fleet.backends.docker  # noqa: F401 - registered before the stand-in replaces it

    monkeypatch.setitem(BACKENDS, "docker", Recorder)
    handles = [EnvHandle(f"env-00{i}", f"gpu{i}:3000", "docker", "t", detail={"container": f"c{i}",
                                                                           "docker_host": f"tcp://gpu{i}:2375"})
               for i in range(2)]
    write_manifest(tmp_path, handles, {h.env_id: "healthy" for h in handles})
    assert spawn_envs.run(spawn_envs.SpawnEnvsConfig(out=tmp_path, stop=True)) == 0
    # The fleet's token too: its containers' label, to sweep those the manifest no longer names.
    assert made == [{"hosts": ["tcp://gpu0:2375", "tcp://gpu1:2375"], "publish_ip": "0.0.0.0", "token": "t"}]
    assert stopped == ["env-000", "env-001"]
    assert set(read_manifest(tmp_path)[1].values()) == {"stopped"}


def test_stale_supervisor_pid_is_never_signalled_and_a_live_one_blocks_a_second_start(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(spawn_envs, "supervise", lambda cfg: pytest.fail("a second supervisor was started"))
    bystander = subprocess.Popen(["sleep", "60"], start_new_session=True)  # a stale pid file names it
    supervisor = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", "spawn-envs"])
    try:
        (tmp_path / "supervisor.pid").write_text(str(bystander.pid))
        assert spawn_envs.run(spawn_envs.SpawnEnvsConfig(out=tmp_path, stop=True)) == 1  # nothing to stop
        assert bystander.poll() is None and not (tmp_path / "supervisor.pid").exists()

        (tmp_path / "supervisor.pid").write_text(str(supervisor.pid))
        # Until the child has exec'd, /proc shows the forking parent's command line.
        deadline = time.monotonic() + 10
        while not is_supervisor(supervisor.pid) and time.monotonic() < deadline:
            time.sleep(0.01)
        with open(f"/proc/{supervisor.pid}/cmdline", "rb") as f:
            assert supervisor.poll() is None and is_supervisor(supervisor.pid), f.read()
        assert spawn_envs.run(spawn_envs.SpawnEnvsConfig(out=tmp_path, count=1)) == 1
        assert f"a supervisor (pid {supervisor.pid}) already runs" in capsys.readouterr().err
        assert not (tmp_path / "manifest").exists() and supervisor.poll() is None
    finally:
        bystander.kill()
        supervisor.kill()
        bystander.wait()
        supervisor.wait()


@pytest.mark.desktop
def test_spawn_envs_detach_then_stop(tmp_path):
    from computerrl.envs.fleet.backends.local import _alive
    from computerrl.envs.service.client import EnvClient
    from computerrl.envs.fleet.manifest import read_manifest

    out = tmp_path / "envs"
    cli = [sys.executable, "-m", "computerrl.cli.main", "spawn-envs", "--out", str(out)]
    started = subprocess.run(cli + ["--count", "2", "--detach", "--poll-s", "0.5"], capture_output=True, text=True,
                             timeout=600)
    assert started.returncode == 0, started.stderr + (out / "supervisor.log").read_text()
    handles, status = read_manifest(out)
    assert [h.env_id for h in handles] == ["env-000", "env-001"] and set(status.values()) == {"healthy"}
    for h in handles:
        client = EnvClient(h.address, h.token)
        assert h.token and client.health().healthy and h.address.startswith("127.0.0.1:")
        client.close()
    assert (out / "manifest").stat().st_mode & 0o777 == 0o700  # it holds the tokens
    assert json.loads((out / "spawn-envs.json").read_text())["count"] == 2
    assert json.loads((out / "manifest" / "lineage.json").read_text())["stage"] == "spawn-envs"

    stopped = subprocess.run(cli + ["--stop"], capture_output=True, text=True, timeout=120)
    assert stopped.returncode == 0, stopped.stderr
    handles, status = read_manifest(out)
    assert set(status.values()) == {"stopped"}
    assert not any(_alive(h.detail["pid"]) for h in handles)


@pytest.mark.desktop
def test_a_spawn_envs_killed_with_sigkill_leaves_nothing_behind(tmp_path):
    from conftest import descendants, wait_until
    from computerrl.envs.fleet.manifest import read_manifest

    out = tmp_path / "envs"
    pipes_before = set(Path("/tmp").glob("OSL_PIPE_*"))
    supervisor = subprocess.Popen([sys.executable, "-m", "computerrl.cli.main", "spawn-envs", "--out", str(out),
                                   "--count", "1", "--poll-s", "0.5"], stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL)
    try:
        assert wait_until(lambda: (out / "manifest").exists() and set(read_manifest(out)[1].values()) == {"healthy"},
                          timeout_s=300)
        tree = descendants([supervisor.pid])
        assert len(tree) >= 8  # the server, Xvfb, the sandbox and the desktop's processes in it
    finally:
        supervisor.kill()  # SIGKILL: no handler runs, nothing is stopped in order
        supervisor.wait()
    assert wait_until(lambda: not any(Path(f"/proc/{p}").exists() for p in tree), timeout_s=30)
    assert set(Path("/tmp").glob("OSL_PIPE_*")) <= pipes_before  # no sockets left on the host's /tmp
