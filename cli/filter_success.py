"""`computerrl filter-success`: options → `FilterSuccessConfig` → `stages.filter_success.run`."""

from __future__ import annotations

from computerrl.cli.options import stage_command
from computerrl.stages.filter_success import FilterSuccessConfig, run

HELP = ("Pool step datasets and keep the steps of successful, non-aborted trajectories (at most k per task, drawn "
        "with the seed) as chat rows for `sft`.")

command = stage_command(FilterSuccessConfig, run)
