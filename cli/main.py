"""`computerrl`: one subcommand per pipeline stage. This file only registers them."""

from __future__ import annotations

import typer

from computerrl.cli import eval as eval_cli
from computerrl.cli import async_rl, build_apis, console, entropulse, filter_success, grpo, rollout, sft, spawn_envs, tasks, view

app = typer.Typer(
    name="computerrl",
    help="Train computer-use agents with online RL on real desktops (ComputerRL, arXiv 2508.14040).\n\n"
         "Each subcommand is one stage that reads and writes Hugging Face datasets; chain them by hand or "
         "with the Justfile (`just --list`).",
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,
    add_completion=False,
)


@app.callback()
def main() -> None:
    """Keeps `computerrl` a group of subcommands (Typer collapses a lone command into the top level)."""


app.command("build-apis", help=build_apis.HELP)(build_apis.command)
app.command("spawn-envs", help=spawn_envs.HELP)(spawn_envs.command)
app.command("rollout", help=rollout.HELP)(rollout.command)
app.command("grpo", help=grpo.HELP)(grpo.command)
app.command("async-rl", help=async_rl.HELP)(async_rl.command)
app.command("filter-success", help=filter_success.HELP)(filter_success.command)
app.command("sft", help=sft.HELP)(sft.command)
app.command("eval", help=eval_cli.HELP)(eval_cli.command)
app.command("view", help=view.HELP)(view.command)
app.command("console", help=console.HELP)(console.command)
app.command("entropulse", help=entropulse.HELP)(entropulse.command)
app.add_typer(tasks.app, name="tasks")

if __name__ == "__main__":
    app()
