"""`computerrl sft`: options → `SFTConfig` → `stages.sft.run`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from computerrl.cli.options import (Dtype, GradientCheckpointing, LoraAlpha, LoraRank, Lr, MaxGradNorm,
                                    MicroBatchTokens, Model, OutDir, Overwrite, SaveEvery, Seed, TrainDevice,
                                    TrainLayers, Warmup, WeightDecay)

HELP = ("Supervised fine-tuning on chats (loss on the answer's tokens only): behaviour cloning on expert replays, "
        "or Entropulse on the successes `filter-success` kept. Writes a checkpoint (or LoRA adapter) and its "
        "metrics. Interrupted, rerun the same command to resume.")


def command(
    model: Model = "embedded",
    out: OutDir = Path("runs/sft"),
    lr: Lr = 5e-5,
    warmup: Warmup = 0,
    weight_decay: WeightDecay = 0.0,
    max_grad_norm: MaxGradNorm = 1.0,
    micro_batch_tokens: MicroBatchTokens = 8192,
    lora_rank: LoraRank = 0,
    lora_alpha: LoraAlpha = 32,
    train_layers: TrainLayers = 0,
    gradient_checkpointing: GradientCheckpointing = False,
    device: TrainDevice = "",
    dtype: Dtype = "float32",
    save_every: SaveEvery = 1,
    seed: Seed = 0,
    overwrite: Overwrite = False,
    data: Annotated[list[Path], typer.Option(help="SFT dataset (filter-success) or step dataset (tasks build's "
                                             "expert replays, a rollout); repeat to pool several.")] = [],  # noqa: B006
    epochs: Annotated[int, typer.Option(help="Passes over the data.")] = 2,
    batch_rows: Annotated[int, typer.Option(help="Rows per optimizer step.")] = 16,
):
    options = dict(locals())
    from computerrl.stages.sft import SFTConfig, run

    try:
        cfg = SFTConfig(**options)
    except ValueError as e:
        raise typer.BadParameter(str(e)) from None
    run(cfg)
