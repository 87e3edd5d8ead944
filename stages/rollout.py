"""`computerrl rollout`: the policy plays every task G times on the desktops of a `spawn-envs` run.

For each task its G samples start together, spread over the pool's desktops; each desktop has a
worker thread running the episode loop (`play.episode.play`), and the policy's batcher gathers the
answers pending on all desktops into one generate call, so the model works on one batch while the
desktops carry out the last one. Rows follow the step schema (`data.schemas.STEP_FEATURES`); rewards are
the step-level rule (`play.episode.step_reward`). A trajectory whose desktop was lost is kept with `error` set
(aborted, never a failure) and the stage goes on: the pool replaces the desktop from the manifest
that `spawn-envs` rewrites.

Departure from a textbook rollout: finished trajectories are journaled one file each (written
atomically) beside the output, and the dataset is assembled at the end; a run that was killed
resumes from the journal, replaying only the trajectories that had not finished.

Reads:  --tasks (task dataset or folder of OSWorld JSON), --envs (spawn-envs run folder), --model.
Writes: --out, a step dataset (schemas.STEP_FEATURES [+ screenshot]) with lineage.json, and
        summary.json beside it (trajectories, success, aborted, skipped tasks).

    computerrl rollout --tasks runs/tasks/train --envs runs/envs --samples 2 --max-steps 4 --limit 2 --out runs/rollout-0
    computerrl rollout --tasks runs/tasks/train --envs runs/envs --model runs/sft-bc --samples 8 --max-steps 15 \\
        --temperature 1.0 --iteration 3 --out runs/rollout-3
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import TYPE_CHECKING

from computerrl.data.config import setting
from computerrl.play.config import PlayConfig

if TYPE_CHECKING:  # the episode loop (gRPC) loads when the stage runs: `computerrl --help` builds this config
    from computerrl.data.journal import Journal
    from computerrl.tasks.task_set import TaskItem


@dataclasses.dataclass
class RolloutConfig(PlayConfig):
    tasks: Path = Path("runs/tasks/train")
    samples: int = 4  # G: trajectories per task
    out: Path = Path("runs/rollout")  # the step dataset
    temperature: float = 1.0
    iteration: int = setting(0, "RL iteration number (group ids are <task>:<iteration>).")


def run(cfg: RolloutConfig, console=None) -> dict:
    from rich.console import Console

    from computerrl.play.trajectories import play_tasks

    console = console or Console(soft_wrap=True)
    if cfg.finished:
        console.print(f"{cfg.out} is already complete (--overwrite replaces it)")
        return json.loads((cfg.out / "summary.json").read_text())
    items, playable, journal = play_tasks(cfg, "rollout", console, iteration=cfg.iteration)
    return _assemble(cfg, playable, items, journal, console)


def _assemble(cfg: RolloutConfig, playable: list[TaskItem], items: list[TaskItem], journal: Journal,
              console) -> dict:
    import shutil

    from computerrl.data.datasets_io import lineage, save_atomic
    from computerrl.play.trajectories import step_dataset

    trajectories, ds = step_dataset(journal, playable, cfg.samples, cfg.screenshots)
    summary = {"tasks": len(playable), "trajectories": len(trajectories), "steps": len(ds),
               "success": sum(t["success"] for t in trajectories), "aborted": sum(bool(t["error"]) for t in trajectories),
               "skipped": {i.task_id: i.skip for i in items if i.skip}}
    if "screenshot" in ds.column_names and len(ds):  # what storing the screenshots costs (PNG, once a step)
        import datasets

        shots = ds.cast_column("screenshot", datasets.Image(decode=False))["screenshot"]
        summary["screenshot_bytes_per_step"] = sum(len(s["bytes"] or b"") for s in shots if s) / len(ds)
    card = lineage("rollout", cfg, {"tasks": str(cfg.tasks), "envs": str(cfg.envs), "model": cfg.model})
    path = save_atomic(ds, cfg.out, lineage=card)
    (path / "summary.json").write_text(json.dumps(summary, indent=2))
    shutil.rmtree(cfg.journal, ignore_errors=True)  # the output is whole: nothing to resume
    console.print(f"wrote {cfg.out}: {summary['trajectories']} trajectories, {summary['steps']} steps, "
                  f"success {summary['success']}, aborted {summary['aborted']}, skipped tasks {len(summary['skipped'])}"
                  + (f", screenshots {summary['screenshot_bytes_per_step'] / 1e3:.0f} kB a step"
                     if "screenshot_bytes_per_step" in summary else ""))
    return summary

