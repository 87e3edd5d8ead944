"""`computerrl build-apis`: options → `BuildApisConfig` → `stages.build_apis.run`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from computerrl.cli.options import Device, Engine, EnvsDir, LlmUrl, MaxNewTokens, Model, OutDir, Seed, Tasks

HELP = ("A model reads example tasks of an app and the app's API, proposes the functions that are missing, writes "
        "them and their tests; each runs in a live desktop's sandbox, failures go back to the model (--rounds), and "
        "only what passes joins the action space: load OUT with `--apis OUT` on spawn-envs, rollout and eval. "
        "Every exchange is kept in OUT/transcript.jsonl; --replay reruns a build from one with no model. "
        "Give it desktops of its own (--envs): each test resets the desktop it runs on. "
        "Interrupted, rerun the same command to resume.")


def command(
    app: Annotated[str, typer.Option(help="The app whose API grows: calc, writer or impress.")] = "calc",
    tasks: Tasks = Path("runs/tasks/train"),
    envs: EnvsDir = Path("runs/envs"),
    out: OutDir = Path("runs/apis-calc"),
    model: Model = "embedded",
    engine: Engine = "transformers",
    llm_url: LlmUrl = "",
    temperature: Annotated[float, typer.Option(help="Sampling temperature (0 = greedy).")] = 0.0,
    max_new_tokens: MaxNewTokens = 768,
    rounds: Annotated[int, typer.Option(help="Attempts per API: the first, then corrections with the error.")] = 3,
    sample_tasks: Annotated[int, typer.Option(help="Example tasks the requirement analysis reads.")] = 12,
    max_apis: Annotated[int, typer.Option(help="New functions asked for.")] = 10,
    timeout_s: Annotated[float, typer.Option(help="Seconds one API's tests may take together before it is "
                                             "rejected as hung (its desktop is then reset).")] = 60.0,
    replay: Annotated[Path | None, typer.Option(help="Answer from this transcript (a build's transcript.jsonl) "
                                                "instead of a model: reruns that build exactly.")] = None,
    seed: Seed = 0,
    device: Device = "cpu",
    overwrite: Annotated[bool, typer.Option(help="Build again even if --out holds a finished build.")] = False,
):
    options = dict(locals())
    from computerrl.stages.build_apis import BuildApisConfig, ReplayError, run

    try:
        cfg = BuildApisConfig(**options)
    except ValueError as e:
        raise typer.BadParameter(str(e)) from None
    try:
        summary = run(cfg)
    except (ReplayError, ValueError) as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(1) from None
    raise typer.Exit(0 if summary["proposed"] else 1)  # the model proposed nothing that could be read
