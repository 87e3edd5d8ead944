"""`computerrl grpo`: options → `GRPOConfig` → `stages.grpo.run`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from computerrl.cli.options import with_training_options

HELP = ("Step-level GRPO update of the policy from rollouts: advantages over all steps of a task's G trajectories, "
        "clipped surrogate with clip-higher, optional k3 KL to a reference, several epochs over the batch. Writes "
        "the new checkpoint (or LoRA adapter) and per-update metrics. Interrupted, rerun the same command to resume.")


@with_training_options(out=Path("runs/policy"), lr=1e-5)
def command(
    rollouts: Annotated[list[Path], typer.Option(help="Step dataset written by `rollout` (normally sampled by "
                                                 "--model); repeat to pool several.")] = [],  # noqa: B006
    ref: Annotated[str, typer.Option(help="KL reference checkpoint ('' = --model); loaded only with --beta > 0.")] = "",
    beta: Annotated[float, typer.Option(help="KL weight (k3 estimator); 0 loads no reference model.")] = 0.0,
    eps_low: Annotated[float, typer.Option(help="Clip the ratio below at 1 - eps_low.")] = 0.2,
    eps_high: Annotated[float, typer.Option(help="Clip the ratio above at 1 + eps_high (clip-higher).")] = 0.28,
    epochs: Annotated[int, typer.Option(help="Optimisation passes over the rollout batch.")] = 2,
    updates_per_epoch: Annotated[int, typer.Option(help="Optimizer steps per pass.")] = 1,
    temperature: Annotated[float, typer.Option(help="The rows' sampling temperature (0 = from the rollouts' "
                                               "lineage).")] = 0.0,
    tis: Annotated[bool, typer.Option(help="Truncated importance sampling for rows another engine sampled "
                                      "(vLLM, a server).")] = True,
    tis_cap: Annotated[float, typer.Option(help="Cap of the truncated importance weight.")] = 2.0,
    **train,
):
    options = {k: v for k, v in locals().items() if k != "train"} | train
    from computerrl.stages.grpo import GRPOConfig, run

    try:
        cfg = GRPOConfig(**options)
    except ValueError as e:
        raise typer.BadParameter(str(e)) from None
    run(cfg)
