"""`computerrl grpo`: options → `GRPOConfig` → `stages.grpo.run`."""

from __future__ import annotations

from computerrl.cli.options import stage_command
from computerrl.stages.grpo import GRPOConfig, run

HELP = ("Step-level GRPO update of the policy from rollouts: advantages over all steps of a task's G trajectories, "
        "clipped surrogate with clip-higher, optional k3 KL to a reference, several epochs over the batch. Writes "
        "the new checkpoint (or LoRA adapter) and per-update metrics. Interrupted, rerun the same command to resume.")

command = stage_command(GRPOConfig, run)
