"""`computerrl spawn-envs`: options → `SpawnEnvsConfig` → `stages.spawn_envs.run`."""

from __future__ import annotations

import typer

from computerrl.cli.options import stage_command
from computerrl.stages.spawn_envs import SpawnEnvsConfig, run

HELP = "Start and supervise real desktops behind gRPC env servers; writes the env manifest."


def run_and_exit(cfg: SpawnEnvsConfig) -> None:
    raise typer.Exit(run(cfg))  # the stage's exit code (0: all started, and stopped cleanly unless detached)


command = stage_command(SpawnEnvsConfig, run_and_exit)
