"""`computerrl eval`: options → `EvalConfig` → `stages.eval.run`."""

from __future__ import annotations

from pathlib import Path

import typer

from computerrl.cli.options import with_play_options

HELP = ("Success rate per domain (and in- vs out-of-distribution) on held-out tasks, with 95% intervals, pass@k, "
        "steps, invalid actions and entropies: a table, summary.json, per-task results, step rows and plots.")


@with_play_options(tasks=Path("runs/tasks/test"), out=Path("runs/eval"), screenshots=True)
def command(**play):
    from computerrl.stages.eval import EvalConfig, run

    try:
        cfg = EvalConfig(**play)
    except (ValueError, KeyError) as e:
        raise typer.BadParameter(str(e)) from None
    run(cfg)
