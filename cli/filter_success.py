"""`computerrl filter-success`: options → `FilterSuccessConfig` → `stages.filter_success.run`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from computerrl.cli.options import OutDir, Seed

HELP = ("Pool step datasets and keep the steps of successful, non-aborted trajectories (at most k per task, drawn "
        "with the seed) as chat rows for `sft`.")


def command(
    rollouts: Annotated[list[Path], typer.Option(help="Step dataset (a rollout); repeat to pool several.")] = [],  # noqa: B006
    out: OutDir = Path("runs/successes"),
    k: Annotated[int, typer.Option(help="Trajectories kept per task at most (-1 = all).")] = 4,
    seed: Seed = 0,
    overwrite: Annotated[bool, typer.Option(help="Replace an existing output (filtering is cheap).")] = True,
):
    options = dict(locals())
    from computerrl.stages.filter_success import FilterSuccessConfig, run

    try:
        cfg = FilterSuccessConfig(**options)
    except ValueError as e:
        raise typer.BadParameter(str(e)) from None
    run(cfg)
