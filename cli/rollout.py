"""`computerrl rollout`: options → `RolloutConfig` → `stages.rollout.run`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from computerrl.cli.options import Apis, Device, Engine, EnvsDir, LlmUrl, MaxNewTokens, Model, OutDir, Seed, Tasks

HELP = ("The policy plays every task G times (--samples) on the desktops of a spawn-envs run and writes the step "
        "dataset GRPO trains on (one row per step, with rewards). Interrupted, rerun the same command to resume.")


def command(
    tasks: Tasks = Path("runs/tasks/train"),
    envs: EnvsDir = Path("runs/envs"),
    model: Model = "embedded",
    samples: Annotated[int, typer.Option(help="G: trajectories per task (the GRPO group).")] = 4,
    max_steps: Annotated[int, typer.Option(help="Steps per trajectory before it is cut (truncated).")] = 8,
    out: OutDir = Path("runs/rollout"),
    engine: Engine = "transformers",
    temperature: Annotated[float, typer.Option(help="Sampling temperature (0 = greedy).")] = 1.0,
    max_new_tokens: MaxNewTokens = 96,
    budgets: Annotated[str, typer.Option(help="Prompt budgets: small or paper (default: by the model's size).")] = "",
    max_batch: Annotated[int, typer.Option(help="Answers generated per model call at most.")] = 8,
    iteration: Annotated[int, typer.Option(help="RL iteration number (group ids are <task>:<iteration>).")] = 0,
    limit: Annotated[int, typer.Option(help="Play only the first N tasks (0 = all).")] = 0,
    seed: Seed = 0,
    screenshots: Annotated[bool, typer.Option(help="Store every step's screenshot in the dataset.")] = False,
    device: Device = "cpu",
    llm_url: LlmUrl = "",
    apis: Apis = None,
    overwrite: Annotated[bool, typer.Option(help="Replace a finished output instead of stopping.")] = False,
):
    options = dict(locals())
    from computerrl.stages.rollout import RolloutConfig, run

    try:
        cfg = RolloutConfig(**options)
    except (ValueError, KeyError) as e:
        raise typer.BadParameter(str(e)) from None
    run(cfg)
