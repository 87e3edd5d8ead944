"""`computerrl spawn-envs`: options → `SpawnEnvsConfig` → `stages.spawn_envs.run`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from computerrl.cli.options import Backend, OutDir
from computerrl.envs.desktop.sandbox import Limits
from computerrl.stages.spawn_envs import SpawnEnvsConfig, run

HELP = "Start and supervise real desktops behind gRPC env servers; writes the env manifest."


def command(
    out: OutDir = Path("runs/envs"),
    count: Annotated[int, typer.Option(help="Env servers to start.")] = 2,
    desktops_per_env: Annotated[int, typer.Option(help="Desktops each server hosts.")] = 1,
    backend: Backend = "local",
    start_timeout_s: Annotated[float, typer.Option(help="Seconds a server may take to become healthy.")] = 180.0,
    poll_s: Annotated[float, typer.Option(help="Seconds between health checks.")] = 2.0,
    restart: Annotated[bool, typer.Option(help="Restart servers that die or stay unhealthy.")] = True,
    unhealthy_grace_s: Annotated[float, typer.Option(help="Seconds a live server may stay unhealthy.")] = 20.0,
    parallel_starts: Annotated[int, typer.Option(help="Servers started at once.")] = 4,
    docker_image: Annotated[str, typer.Option(help="Desktop image for --backend docker.")] = "computerrl-desktop:latest",
    docker_hosts: Annotated[str, typer.Option(help="Comma-separated Docker engine URLs (default: $DOCKER_HOST, "
                                                   "else the local socket).")] = "",
    publish_ip: Annotated[str, typer.Option(help="Interface docker publishes server ports on; 0.0.0.0 for remote "
                                                 "engines (the token guards them).")] = "127.0.0.1",
    cache: Annotated[Path | None, typer.Option(help="Task file cache for every server: a folder whose index.json "
                                                    "maps URLs to its files (tasks' downloads read only it).")] = None,
    network: Annotated[bool, typer.Option(help="Desktops get outbound network, each in a namespace of its own "
                                               "without the host's loopback (default: none; a task with "
                                               "\"network\": true still gets it).")] = False,
    apis: Annotated[Path | None, typer.Option(help="A `build-apis` output folder: its accepted APIs join the "
                                                   "built-in ones on every desktop, run inside its sandbox.")] = None,
    home_mb: Annotated[int, typer.Option(help="Size of each desktop's /home/user, MiB (in RAM).")] = Limits.home_mb,
    tmp_mb: Annotated[int, typer.Option(help="Size of each desktop's /tmp, MiB (in RAM).")] = Limits.tmp_mb,
    shm_mb: Annotated[int, typer.Option(help="Size of each desktop's /dev/shm, MiB (in RAM).")] = Limits.shm_mb,
    max_processes: Annotated[int, typer.Option(help="Processes and threads each desktop's user may have.")
                             ] = Limits.processes,
    memory_mb: Annotated[int, typer.Option(help="Memory cap of each desktop, its RAM folders included (a cgroup: "
                                                "needs root); 0 = none.")] = Limits.memory_mb,
    console: Annotated[int, typer.Option(help="Serve the fleet's web console (as `computerrl console`) on this "
                                              "loopback port beside the supervisor; 0 = none.")] = 0,
    detach: Annotated[bool, typer.Option(help="Supervise in the background; return once all are healthy.")] = False,
    stop: Annotated[bool, typer.Option(help="Stop the envs recorded in --out.")] = False,
):
    try:
        cfg = SpawnEnvsConfig(**{k: v for k, v in locals().items()})
    except ValueError as e:
        raise typer.BadParameter(str(e)) from None
    raise typer.Exit(run(cfg))
