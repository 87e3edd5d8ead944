"""`computerrl build-apis`: options → `BuildApisConfig` → `stages.build_apis.run`."""

from __future__ import annotations

import typer

from computerrl.cli.options import stage_command
from computerrl.data.folders import WrongInput
from computerrl.stages.build_apis import BuildApisConfig, ReplayError, run

HELP = ("A model reads example tasks of an app and the app's API, proposes the functions that are missing, writes "
        "them and their tests; each runs in a live desktop's sandbox, failures go back to the model (--rounds), and "
        "only what passes joins the action space: load OUT with `--apis OUT` on spawn-envs, rollout and eval. "
        "Every exchange is kept in OUT/transcript.jsonl; --replay reruns a build from one with no model. "
        "Give it desktops of its own (--envs): each test resets the desktop it runs on. "
        "Interrupted, rerun the same command to resume.")


def build(cfg: BuildApisConfig) -> None:
    try:
        summary = run(cfg)
    except WrongInput:
        raise  # a usage error: stage_command says so in one line, exit code 2
    except (ReplayError, ValueError) as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(1) from None
    raise typer.Exit(0 if summary["proposed"] else 1)  # the model proposed nothing that could be read


command = stage_command(BuildApisConfig, build)
