"""`computerrl eval`: options → `EvalConfig` → `stages.eval.run`."""

from __future__ import annotations

from computerrl.cli.options import stage_command
from computerrl.stages.eval import EvalConfig, run

HELP = ("Success rate per domain (and in- vs out-of-distribution) on held-out tasks, with 95% intervals, pass@k, "
        "steps, invalid actions and entropies: a table, summary.json, per-task results, step rows and plots.")

command = stage_command(EvalConfig, run)
