"""`computerrl sft`: options → `SFTConfig` → `stages.sft.run`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from computerrl.cli.options import with_training_options

HELP = ("Supervised fine-tuning on chats (loss on the answer's tokens only): behaviour cloning on expert replays, "
        "or Entropulse on the successes `filter-success` kept. Writes a checkpoint (or LoRA adapter) and its "
        "metrics. Interrupted, rerun the same command to resume.")


@with_training_options(out=Path("runs/sft"), lr=5e-5)
def command(
    data: Annotated[list[Path], typer.Option(help="SFT dataset (filter-success) or step dataset (tasks build's "
                                             "expert replays, a rollout); repeat to pool several.")] = [],  # noqa: B006
    epochs: Annotated[int, typer.Option(help="Passes over the data.")] = 2,
    batch_rows: Annotated[int, typer.Option(help="Rows per optimizer step.")] = 16,
    **train,
):
    options = {k: v for k, v in locals().items() if k != "train"} | train
    from computerrl.stages.sft import SFTConfig, run

    try:
        cfg = SFTConfig(**options)
    except ValueError as e:
        raise typer.BadParameter(str(e)) from None
    run(cfg)
