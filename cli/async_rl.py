"""`computerrl async-rl`: options → `AsyncRLConfig` → `stages.async_rl.run`."""

from __future__ import annotations

import dataclasses

from computerrl.cli.options import stage_command
from computerrl.stages.async_rl import AsyncRLConfig, run
from computerrl.stages.grpo import update_settings

HELP = ("Rollout and training at once: every desktop keeps playing with the newest policy version while GRPO "
        "trains on groups at most --max-lag versions old, and each new version is switched into the live engine "
        "in place. Writes the same step datasets and checkpoints as rollout and grpo. --sync runs the alternating "
        "loop to compare. Interrupted, rerun the same command to resume.")

@dataclasses.dataclass
class CheckedAsyncRLConfig(AsyncRLConfig):
    """The command's config: its --grpo settings checked by grpo's own names, types and rules before any desktop
    plays (a stage does not import another; the schedule checks its own `grpo` settings the same way)."""

    def __post_init__(self):
        super().__post_init__()
        update_settings(self.grpo, "--grpo ")


command = stage_command(CheckedAsyncRLConfig, run)
