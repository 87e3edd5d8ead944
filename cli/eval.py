"""`computerrl eval`: options → `EvalConfig` → `stages.eval.run`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from computerrl.cli.options import Apis, Device, Engine, EnvsDir, LlmUrl, MaxNewTokens, Model, OutDir, Seed, Tasks

HELP = ("Success rate per domain (and in- vs out-of-distribution) on held-out tasks, with 95% intervals, pass@k, "
        "steps, invalid actions and entropies: a table, summary.json, per-task results, step rows and plots.")


def command(
    tasks: Tasks = Path("runs/tasks/test"),
    envs: EnvsDir = Path("runs/envs"),
    model: Model = "embedded",
    samples: Annotated[int, typer.Option(help="K: trajectories per task; pass@K is reported when K > 1.")] = 1,
    max_steps: Annotated[int, typer.Option(help="Steps per trajectory before it is cut.")] = 15,
    out: OutDir = Path("runs/eval"),
    engine: Engine = "transformers",
    temperature: Annotated[float, typer.Option(help="Sampling temperature (0 = greedy; K > 1 needs > 0).")] = 0.0,
    max_new_tokens: MaxNewTokens = 96,
    budgets: Annotated[str, typer.Option(help="Prompt budgets: small or paper (default: by the model's size).")] = "",
    max_batch: Annotated[int, typer.Option(help="Answers generated per model call at most.")] = 8,
    limit: Annotated[int, typer.Option(help="Evaluate only the first N tasks (0 = all).")] = 0,
    seed: Seed = 0,
    screenshots: Annotated[bool, typer.Option(help="Keep every step's screenshot (for `computerrl view`).")] = True,
    device: Device = "cpu",
    llm_url: LlmUrl = "",
    apis: Apis = None,
    overwrite: Annotated[bool, typer.Option(help="Evaluate again even if --out holds a finished evaluation.")] = False,
):
    options = dict(locals())
    from computerrl.stages.eval import EvalConfig, run

    try:
        cfg = EvalConfig(**options)
    except ValueError as e:
        raise typer.BadParameter(str(e)) from None
    run(cfg)
