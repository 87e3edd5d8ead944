"""`computerrl sft`: options → `SFTConfig` → `stages.sft.run`."""

from __future__ import annotations

from computerrl.cli.options import stage_command
from computerrl.stages.sft import SFTConfig, run

HELP = ("Supervised fine-tuning on chats (loss on the answer's tokens only): behaviour cloning on expert replays, "
        "or Entropulse on the successes `filter-success` kept. Writes a checkpoint (or LoRA adapter) and its "
        "metrics. Interrupted, rerun the same command to resume.")

command = stage_command(SFTConfig, run)
