"""`computerrl rollout`: options → `RolloutConfig` → `stages.rollout.run`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from computerrl.cli.options import with_play_options

HELP = ("The policy plays every task G times (--samples) on the desktops of a spawn-envs run and writes the step "
        "dataset GRPO trains on (one row per step, with rewards). Interrupted, rerun the same command to resume.")


@with_play_options(tasks=Path("runs/tasks/train"), out=Path("runs/rollout"), samples=4, max_steps=8, temperature=1.0)
def command(
    iteration: Annotated[int, typer.Option(help="RL iteration number (group ids are <task>:<iteration>).")] = 0,
    **play,
):
    from computerrl.stages.rollout import RolloutConfig, run

    try:
        cfg = RolloutConfig(iteration=iteration, **play)
    except (ValueError, KeyError) as e:
        raise typer.BadParameter(str(e)) from None
    run(cfg)
