"""`computerrl tasks …`: look after task files (OSWorld JSON format)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

app = typer.Typer(help="Task files in OSWorld's JSON format: check what this build can run.", no_args_is_help=True)


@app.command("check", help="Load every task file under FOLDER and report what loads, what is malformed (file and "
             "field) and which setup steps, getters and metrics the rest need that this build lacks. Exit code 1 "
             "when any file is malformed or unsupported.")
def check(
    folder: Annotated[Path, typer.Argument(help="Folder searched recursively for *.json task files.")],
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="List every problem, not only a summary.")] = False,
):
    from collections import Counter

    from rich.console import Console
    from rich.table import Table

    from computerrl.envs.tasks.task import TaskError, load_task

    files = sorted(folder.rglob("*.json"))
    if not files:
        raise typer.BadParameter(f"no *.json files under {folder}", param_hint="FOLDER")
    ok, malformed, unsupported, needs = [], [], [], Counter()
    for f in files:
        try:
            task = load_task(f)
        except TaskError as e:
            malformed.append(str(e))
            continue
        missing = task.unsupported()
        if missing:
            unsupported.append(f"{f}: needs {', '.join(missing)}")
            needs.update(missing)
        else:
            ok.append(task)
    console = Console(soft_wrap=True)  # long paths stay on one line: greppable
    console.print(f"[bold]{len(files)}[/] task files: [green]{len(ok)} load and are supported[/], "
                  f"[yellow]{len(unsupported)} need what this build lacks[/], [red]{len(malformed)} malformed[/]")
    if needs:
        table = Table("unsupported", "tasks needing it", title="what is missing")
        for what, count in needs.most_common():
            table.add_row(what, str(count))
        console.print(table)
    for line in malformed + (unsupported if verbose else []):
        typer.echo(line)  # unwrapped: one problem per line, easy to grep
    if unsupported and not verbose:
        console.print("(--verbose lists the unsupported files one by one)")
    raise typer.Exit(0 if len(ok) == len(files) else 1)
