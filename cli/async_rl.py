"""`computerrl async-rl`: options → `AsyncRLConfig` → `stages.async_rl.run`."""

from __future__ import annotations

from computerrl.cli.options import stage_command
from computerrl.stages.async_rl import AsyncRLConfig, run

HELP = ("Rollout and training at once: every desktop keeps playing with the newest policy version while GRPO "
        "trains on groups at most --max-lag versions old, and each new version is switched into the live engine "
        "in place. Writes the same step datasets and checkpoints as rollout and grpo. --sync runs the alternating "
        "loop to compare. Interrupted, rerun the same command to resume.")

command = stage_command(AsyncRLConfig, run)
