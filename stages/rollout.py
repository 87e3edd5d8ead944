"""`computerrl rollout`: the policy plays every task G times on the desktops of a `spawn-envs` run.

For each task its G samples start together, spread over the pool's desktops; each desktop has a
worker thread running the episode loop (`envs.episode.play`), and the policy's batcher gathers the
answers pending on all desktops into one generate call, so the model works on one batch while the
desktops carry out the last one. Rows follow DESIGN.md's step schema; rewards are the step-level
rule (`envs.episode.step_reward`). A trajectory whose desktop was lost is kept with `error` set
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
import hashlib
import json
import os
import threading
import time
from pathlib import Path

from computerrl.envs.tasks.task_set import TaskItem, load_task_set


@dataclasses.dataclass
class RolloutConfig:
    tasks: Path = Path("runs/tasks/train")  # task dataset (`tasks build`) or folder of OSWorld JSON files
    envs: Path = Path("runs/envs")  # spawn-envs run folder (its manifest is followed)
    model: str = "embedded"  # checkpoint folder (full or LoRA adapter), or "embedded"
    samples: int = 4  # G: trajectories per task
    max_steps: int = 8  # steps per trajectory before it is truncated
    out: Path = Path("runs/rollout")  # the step dataset
    engine: str = "transformers"  # generation engine: transformers, vllm, openai
    temperature: float = 1.0  # sampling temperature (0 = greedy)
    max_new_tokens: int = 96  # answer length cap, tokens
    budgets: str = ""  # prompt budgets: small or paper ("" = by the model's size)
    max_batch: int = 8  # answers generated per call at most
    iteration: int = 0  # RL iteration: group_id = "<task_id>:<iteration>"
    limit: int = 0  # play only the first N tasks (0 = all)
    seed: int = 0  # sampling seed
    screenshots: bool = False  # store each step's screenshot (Image column)
    device: str = "cpu"  # torch device of the transformers engine
    overwrite: bool = False  # replace a finished output (and an unrelated journal) instead of stopping

    def __post_init__(self):
        self.tasks, self.envs, self.out = Path(self.tasks), Path(self.envs), Path(self.out)
        if self.samples < 1 or self.max_steps < 1 or self.max_batch < 1:
            raise ValueError("--samples, --max-steps and --max-batch must be at least 1")
        if self.budgets:
            from computerrl.policy.prompt import BUDGETS

            BUDGETS[self.budgets]

    @property
    def journal(self) -> Path:
        return self.out.with_name(f".{self.out.name}.journal")


def run(cfg: RolloutConfig, console=None) -> dict:
    from rich.console import Console

    console = console or Console(soft_wrap=True)
    if cfg.out.exists() and not cfg.journal.exists() and not cfg.overwrite:
        console.print(f"{cfg.out} is already complete (--overwrite replaces it)")
        return json.loads((cfg.out / "summary.json").read_text())
    items = load_task_set(cfg.tasks, cfg.limit)
    playable = [i for i in items if not i.skip]
    for i in items:
        if i.skip:
            console.print(f"skipped {i.task_id}: {i.skip}", markup=False, highlight=False)
    if not playable:
        raise ValueError(f"none of the {len(items)} tasks under {cfg.tasks} can be played here")
    journal = Journal(cfg.journal, _key(cfg))
    jobs = [(t, s) for t in playable for s in range(cfg.samples) if not journal.has(t.task_id, s)]
    if len(jobs) < len(playable) * cfg.samples:
        console.print(f"resuming: {len(playable) * cfg.samples - len(jobs)} trajectories already played")
    if jobs:
        _play_all(cfg, jobs, journal, len(playable), console)
    return _assemble(cfg, playable, items, journal, console)


def _play_all(cfg: RolloutConfig, jobs: list[tuple[TaskItem, int]], journal: "Journal", n_tasks: int,
              console) -> None:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from computerrl.envs.pool import EnvPool
    from computerrl.policy.session import open_policy

    pool = EnvPool.from_manifest(cfg.envs, max_steps=cfg.max_steps, screenshot=cfg.screenshots)
    policy = open_policy(cfg.model, engine=cfg.engine, temperature=cfg.temperature,
                         max_new_tokens=cfg.max_new_tokens, budgets=cfg.budgets, max_batch=cfg.max_batch,
                         seed=cfg.seed, device=cfg.device)
    queue_lock, pending = threading.Lock(), list(jobs)
    stats = {"steps": 0, "success": 0, "aborted": 0, "played": 0}
    left = {t.task_id: sum(1 for j in jobs if j[0].task_id == t.task_id) for t, _ in jobs}
    t0 = time.monotonic()
    columns = (TextColumn("tasks"), BarColumn(), MofNCompleteColumn(),
               TextColumn("{task.fields[rate]:.2f} steps/s · success {task.fields[success]}/{task.fields[played]}"
                          " · aborted {task.fields[aborted]}"), TimeElapsedColumn())
    with Progress(*columns, console=console) as bar:
        job = bar.add_task("rollout", total=n_tasks, completed=n_tasks - len(left), rate=0.0, **stats)

        def worker() -> None:
            from computerrl.envs.episode import play

            while True:
                with queue_lock:
                    if not pending:
                        return
                    item, sample = pending.pop(0)
                with pool.lease() as env:
                    t = play(env, policy, item.task, domain=item.domain, group_id=f"{item.task_id}:{cfg.iteration}",
                             sample=sample, task_dir=item.task_dir, screenshots=cfg.screenshots)
                journal.add(item.task_id, sample, t)
                with queue_lock:
                    stats["steps"] += len(t.rows)
                    stats["played"] += 1
                    stats["success"] += t.success
                    stats["aborted"] += t.aborted
                    left[item.task_id] -= 1
                    bar.update(job, advance=left[item.task_id] == 0,
                               rate=stats["steps"] / (time.monotonic() - t0), **stats)

        threads = [threading.Thread(target=worker, name=f"rollout-{k}", daemon=True) for k in range(pool.size)]
        try:
            for th in threads:
                th.start()
            for th in threads:
                th.join()
        finally:
            policy.close()
            pool.close()
    if any(left.values()):
        raise RuntimeError("some trajectories were not played (see the errors above); rerun to resume")


def _assemble(cfg: RolloutConfig, playable: list[TaskItem], items: list[TaskItem], journal: "Journal",
              console) -> dict:
    import shutil

    import datasets

    from computerrl.data.datasets_io import lineage, save_atomic
    from computerrl.data.schemas import STEP_FEATURES, STEP_WITH_SCREENSHOT_FEATURES

    features = STEP_WITH_SCREENSHOT_FEATURES if cfg.screenshots else STEP_FEATURES
    trajectories = [journal.get(t.task_id, s) for t in playable for s in range(cfg.samples)]
    rows = [journal.with_screenshots(r) for t in trajectories for r in t["rows"]]
    ds = datasets.Dataset.from_list(rows, features=features) if rows else \
        datasets.Dataset.from_dict({k: [] for k in features}, features=features)
    summary = {"tasks": len(playable), "trajectories": len(trajectories), "steps": len(rows),
               "success": sum(t["success"] for t in trajectories), "aborted": sum(bool(t["error"]) for t in trajectories),
               "skipped": {i.task_id: i.skip for i in items if i.skip}}
    card = lineage("rollout", cfg, {"tasks": str(cfg.tasks), "envs": str(cfg.envs), "model": cfg.model})
    path = save_atomic(ds, cfg.out, lineage=card)
    (path / "summary.json").write_text(json.dumps(summary, indent=2))
    shutil.rmtree(cfg.journal, ignore_errors=True)  # the output is whole: nothing to resume
    console.print(f"wrote {cfg.out}: {summary['trajectories']} trajectories, {summary['steps']} steps, "
                  f"success {summary['success']}, aborted {summary['aborted']}, skipped tasks {len(summary['skipped'])}")
    return summary


def _key(cfg: RolloutConfig) -> dict:
    """What makes two runs the same run (a journal of another one is not resumed)."""
    return {k: str(v) for k, v in dataclasses.asdict(cfg).items() if k not in ("max_batch", "device", "overwrite")}


class Journal:
    """One file per finished trajectory (written to a temporary name, then renamed: a kill leaves
    a whole file or none), screenshots as PNG files beside them."""

    def __init__(self, folder: Path, key: dict):
        self.folder = folder
        card = folder / "run.json"
        if card.exists() and json.loads(card.read_text()) != key:
            raise ValueError(f"{folder} holds an interrupted rollout with other options "
                             f"({card}); rerun with those options to resume it, or remove the folder")
        folder.mkdir(parents=True, exist_ok=True)
        _atomic_write(card, json.dumps(key, indent=1).encode())

    def _name(self, task_id: str, sample: int) -> Path:
        return self.folder / f"{hashlib.sha256(task_id.encode()).hexdigest()[:16]}-{sample}.json"

    def has(self, task_id: str, sample: int) -> bool:
        return self._name(task_id, sample).exists()

    def get(self, task_id: str, sample: int) -> dict:
        return json.loads(self._name(task_id, sample).read_text())

    def add(self, task_id: str, sample: int, trajectory) -> None:
        record = dataclasses.asdict(trajectory)
        stem = self._name(task_id, sample).with_suffix("")
        for row in record["rows"]:
            shot = row.pop("screenshot", None)
            if shot and shot.get("bytes"):
                png = Path(f"{stem}-step{row['step']}.png")
                _atomic_write(png, shot["bytes"])
                row["screenshot_file"] = str(png)
        _atomic_write(self._name(task_id, sample), json.dumps(record).encode())

    @staticmethod
    def with_screenshots(row: dict) -> dict:
        if "screenshot_file" in row:
            row = dict(row)
            row["screenshot"] = {"bytes": Path(row.pop("screenshot_file")).read_bytes(), "path": None}
        return row


def _atomic_write(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)
