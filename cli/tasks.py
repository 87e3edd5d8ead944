"""`computerrl tasks …`: look after task files (OSWorld JSON format)."""

from __future__ import annotations

import json

import typer

from computerrl.cli.options import REQUIRED, stage_command
from computerrl.stages import tasks_check, tasks_fetch
from computerrl.stages.tasks_build import BuildConfig, run
from computerrl.stages.tasks_check import CheckConfig
from computerrl.stages.tasks_fetch import FetchConfig

app = typer.Typer(help="Task files in OSWorld's JSON format: check what this build can run.", no_args_is_help=True)


def _check(cfg: CheckConfig) -> None:
    try:
        passed = tasks_check.run(cfg)
    except ValueError as e:  # FOLDER unreadable, or --envs not a usable spawn-envs run
        raise typer.BadParameter(str(e)) from None
    raise typer.Exit(0 if passed else 1)


def _fetch(cfg: FetchConfig) -> None:
    try:
        failed = tasks_fetch.run(cfg)
    except ValueError as e:
        raise typer.BadParameter(str(e), param_hint="FOLDER") from None
    raise typer.Exit(1 if failed else 0)


app.command("check", help="Load every task file under FOLDER and report what loads, what is malformed (file and "
            "field) and which setup steps, getters and metrics the rest need that this build lacks. With --run, "
            "also reset every supported task on the desktops of a spawn-envs run and score it untouched (the "
            "agent's first answer is 'done'): a task that scores above 0 then rewards doing nothing, and RL learns "
            "exactly that. Exit code 1 when any file is malformed or unsupported, or (--run) any task scores "
            "untouched.")(stage_command(CheckConfig, _check, folder=REQUIRED))
app.command("fetch", help="Download every file a folder of task files needs (download steps, cloud_file getters) "
            "into a file cache for env servers' --cache: atomic, resumable (a rerun fetches only what is missing), "
            "a clear error per URL. Task files are treated as hostile: http(s) only, every hop (redirects too) to "
            "public addresses only (loopback, link-local and private ones are refused unless --allow-host names "
            "them with their port), a size cap per file, one deadline per URL; only regular *.json files inside "
            "FOLDER are read.")(stage_command(FetchConfig, _fetch, folder=REQUIRED, cache=REQUIRED))


def _build(cfg: BuildConfig) -> None:
    typer.echo(json.dumps({k: v for k, v in run(cfg).items() if k != "dropped"}))


build = app.command("build", help="Generate a task suite offline from templates x parameters (train, test and valid "
                    "never share an instance), write its files cache, and (with --replay) replay every reference "
                    "solution on real desktops, keeping only tasks that score 1.0 solved and 0 untouched, and "
                    "writing the replays as an expert step dataset.")(stage_command(BuildConfig, _build, out=REQUIRED))
