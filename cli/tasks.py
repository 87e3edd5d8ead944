"""`computerrl tasks …`: look after task files (OSWorld JSON format)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Annotated, Optional

import typer

from computerrl.cli.options import REQUIRED, stage_command
from computerrl.stages.tasks_build import BuildConfig, run

app = typer.Typer(help="Task files in OSWorld's JSON format: check what this build can run.", no_args_is_help=True)


@app.command("check", help="Load every task file under FOLDER and report what loads, what is malformed (file and "
             "field) and which setup steps, getters and metrics the rest need that this build lacks. With --run, "
             "also reset every supported task on the desktops of a spawn-envs run and score it untouched (the "
             "agent's first answer is 'done'): a task that scores above 0 then rewards doing nothing, and RL learns "
             "exactly that. Exit code 1 when any file is malformed or unsupported, or (--run) any task scores "
             "untouched.")
def check(
    folder: Annotated[Path, typer.Argument(help="Folder searched recursively for *.json task files.")],
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="List every problem, not only a summary.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="End with one JSON line: files, supported, unsupported "
                                          "by reason, malformed, needs-account, agent-code (supported, but scored "
                                          "by running a file the agent can rewrite); with --run, untouched: "
                                          "played, scored (the tasks above 0), not set up.")] = False,
    run_them: Annotated[bool, typer.Option("--run", help="Score every supported task untouched on real desktops "
                                           "(--envs); resumable: rerun the same command.")] = False,
    envs: Annotated[Path, typer.Option(help="With --run: a spawn-envs run whose desktops play (give it --cache with "
                                            "the files the tasks download).")] = Path("runs/envs"),
    out: Annotated[Path, typer.Option("--out", "-o", help="With --run: where untouched.json (task, score, "
                                      "detail, error) and the resumable plays go.")] = Path("runs/untouched"),
):
    from rich.console import Console
    from rich.table import Table

    from computerrl.cli.options import refuse
    from computerrl.data.folders import TASK_FILES, WrongInput, expect
    from computerrl.envs.tasks.check import check_folder

    try:
        expect(folder, "FOLDER", TASK_FILES)
    except WrongInput as e:
        refuse(e)
    try:
        report = check_folder(folder)
    except ValueError as e:
        raise typer.BadParameter(str(e), param_hint="FOLDER") from None
    console = Console(soft_wrap=True)  # long paths stay on one line: greppable
    console.print(f"[bold]{len(report.files)}[/] task files: [green]{len(report.supported)} load and are supported[/], "
                  f"[yellow]{len(report.unsupported)} need what this build lacks[/], "
                  f"{len(report.needs_account)} need a network account, [red]{len(report.malformed)} malformed[/]")
    if report.agent_code:
        console.print(f"{len(report.agent_code)} of the supported score by running a file the agent can rewrite: "
                      "their scores are marked (agent_code), never the desktop's word")
    if report.missing:
        table = Table("unsupported", "tasks needing it", title="what is missing")
        for what, count in report.missing.most_common():
            table.add_row(what, str(count))
        console.print(table)
    listed = report.unsupported + report.needs_account + report.agent_code
    for line in report.malformed + (listed if verbose else []):
        typer.echo(line)  # unwrapped: one problem per line, easy to grep
    if listed and not verbose:
        console.print("(--verbose lists these files one by one)")
    summary, starts_solved = report.summary(), []
    if run_them:
        from computerrl.stages.tasks_untouched import score_untouched

        try:
            records = score_untouched(folder, envs, out, console=console)
        except ValueError as e:
            raise typer.BadParameter(str(e)) from None
        starts_solved = [r for r in records if r["score"] > 0]
        not_set_up = Counter(r["error"].partition(":")[0] for r in records if r["error"])
        console.print(f"untouched: played {len(records)}, [red]{len(starts_solved)} score above 0 with no action[/], "
                      f"{sum(not_set_up.values())} could not be set up here"
                      + (f" ({', '.join(f'{k}: {v}' for k, v in not_set_up.most_common())})" if not_set_up else "")
                      + f"; every score in {out / 'untouched.json'}")
        for r in starts_solved:
            typer.echo(f"starts solved: {r['task_id']}: scores {r['score']:g} untouched ({r['detail'][:200]})")
        summary["untouched"] = {"played": len(records), "scored": {r["task_id"]: r["score"] for r in starts_solved},
                                "not_set_up": sum(not_set_up.values())}
    if as_json:
        typer.echo(json.dumps(summary))
    raise typer.Exit(0 if report.all_supported and not starts_solved else 1)


@app.command("fetch", help="Download every file a folder of task files needs (download steps, cloud_file getters) "
             "into a file cache for env servers' --cache: atomic, resumable (a rerun fetches only what is missing), "
             "a clear error per URL. Task files are treated as hostile: http(s) only, every hop (redirects too) to "
             "public addresses only (loopback, link-local and private ones are refused unless --allow-host names "
             "them with their port), a size cap per file, one deadline per URL; only regular *.json files inside "
             "FOLDER are read.")
def fetch(
    folder: Annotated[Path, typer.Argument(help="Folder searched recursively for *.json task files (regular files "
                                           "only: a FIFO, socket or device is skipped, never opened).")],
    cache: Annotated[Path, typer.Option(help="The file cache: a folder whose index.json maps each URL to a file.")],
    timeout_s: Annotated[float, typer.Option(help="Seconds one URL may take in all (redirects, headers and body; "
                                             "not per read) before it counts as failed.")] = 60.0,
    max_mb: Annotated[float, typer.Option(help="Largest file to keep, in MiB: a bigger one is refused and nothing "
                                          "of it kept.")] = 512.0,
    allow_host: Annotated[Optional[list[str]], typer.Option(
        metavar="ADDRESS:PORT", help="An address or network with its port (192.168.1.20:8080, 10.0.0.0/8:443, "
                                     "[::1]:8000) to fetch from although it is not public, e.g. a mirror on your "
                                     "LAN; repeat for more. Every redirect is still checked: other ports of the "
                                     "same host stay refused.")] = None,
):
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from computerrl.envs.tasks.fetch import Cache, allowed_hosts, download, folder_urls

    try:
        allow = allowed_hosts(allow_host or [])
    except ValueError as e:
        raise typer.BadParameter(str(e), param_hint="--allow-host") from None
    if not all(0 < x < float("inf") for x in (timeout_s, max_mb)):
        raise typer.BadParameter("--timeout-s and --max-mb must be positive numbers")
    files, urls, skipped = folder_urls(folder)
    for line in skipped:
        typer.echo(f"skipped {line}", err=True)
    if not files:
        raise typer.BadParameter(f"no regular *.json files under {folder}", param_hint="FOLDER")
    store = Cache(cache)
    todo = [u for u in urls if not store.has(u)]
    console = Console(soft_wrap=True)
    console.print(f"{len(files)} task files need {len(urls)} files: {len(urls) - len(todo)} already in {cache}, "
                  f"{len(todo)} to fetch")
    failed = {}
    with Progress(TextColumn("[bold]fetch"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=console) as progress:
        files_bar = progress.add_task("files", total=len(todo))
        for url in todo:
            try:
                store.add(url, download(url, timeout_s=timeout_s, max_bytes=int(max_mb * 2**20), allow=allow))
            except OSError as e:
                failed[url] = str(e)
                progress.console.print(f"[red]failed[/] {url}: {e}", highlight=False)
            progress.advance(files_bar)
    console.print(f"fetched {len(todo) - len(failed)}, failed {len(failed)}; serve them with --cache {cache}")
    raise typer.Exit(1 if failed else 0)


def _build(cfg: BuildConfig) -> None:
    typer.echo(json.dumps({k: v for k, v in run(cfg).items() if k != "dropped"}))


build = app.command("build", help="Generate a task suite offline from templates x parameters (train, test and valid "
                    "never share an instance), write its files cache, and (with --replay) replay every reference "
                    "solution on real desktops, keeping only tasks that score 1.0 solved and 0 untouched, and "
                    "writing the replays as an expert step dataset.")(stage_command(BuildConfig, _build, out=REQUIRED))
