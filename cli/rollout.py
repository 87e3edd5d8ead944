"""`computerrl rollout`: options → `RolloutConfig` → `stages.rollout.run`."""

from __future__ import annotations

from computerrl.cli.options import stage_command
from computerrl.stages.rollout import RolloutConfig, run

HELP = ("The policy plays every task G times (--samples) on the desktops of a spawn-envs run and writes the step "
        "dataset GRPO trains on (one row per step, with rewards). Interrupted, rerun the same command to resume.")

command = stage_command(RolloutConfig, run)
