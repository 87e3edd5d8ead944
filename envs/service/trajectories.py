"""Many trajectories at once: one worker thread per desktop of a pool, a journal that makes the
run resumable, and the progress a person watches. `rollout` and `eval` both play through here.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import threading
import time
from pathlib import Path
from typing import Sequence

from computerrl.data.files import write_atomic
from computerrl.envs.service.episode import play
from computerrl.envs.tasks.task_set import TaskItem


def plan(tasks: Path, *, limit: int, samples: int, journal_dir: Path, key: dict, console):
    """(all task items, the playable ones, the run's journal, the (task, sample) jobs still to play).

    Prints the tasks skipped (with why) and, on a resumed run, how much was already played."""
    from computerrl.envs.tasks.task_set import load_task_set

    items = load_task_set(tasks, limit)
    playable = [i for i in items if not i.skip]
    for i in items:
        if i.skip:
            console.print(f"skipped {i.task_id}: {i.skip}", markup=False, highlight=False)
    if not playable:
        raise ValueError(f"none of the {len(items)} tasks under {tasks} can be played here")
    journal = Journal(journal_dir, key)
    jobs = [(t, s) for t in playable for s in range(samples) if not journal.has(t.task_id, s)]
    if len(jobs) < len(playable) * samples:
        console.print(f"resuming: {len(playable) * samples - len(jobs)} trajectories already played")
    return items, playable, journal, jobs


def play_on_envs(envs: Path, policy, jobs: Sequence[tuple[TaskItem, int]], journal: "Journal", *, stage: str,
                 out: Path, max_steps: int, screenshots: bool = False, **options) -> None:
    """`play_all` on a pool over a `spawn-envs` run folder, announced to the fleet's console as `stage`
    writing `out`; the pool and the policy are closed after."""
    from computerrl.envs.fleet.pool import EnvPool
    from computerrl.envs.fleet.work import WorkCard

    try:
        pool = EnvPool.from_manifest(envs, max_steps=max_steps, screenshot=screenshots)
        try:
            with WorkCard(envs, stage, str(out), total=len(jobs)) as card:
                play_all(pool, policy, jobs, journal, screenshots=screenshots, on_played=card.update, **options)
        finally:
            pool.close()
    finally:
        policy.close()


def step_dataset(journal: "Journal", items: Sequence[TaskItem], samples: int, screenshots: bool):
    """(trajectory records, step dataset) of every (task, sample) in the journal, in task order."""
    import datasets

    from computerrl.data.schemas import STEP_FEATURES, STEP_WITH_SCREENSHOT_FEATURES

    features = STEP_WITH_SCREENSHOT_FEATURES if screenshots else STEP_FEATURES
    trajectories = [journal.get(t.task_id, s) for t in items for s in range(samples)]
    rows = [journal.with_screenshots(r) for t in trajectories for r in t["rows"]]
    ds = datasets.Dataset.from_list(rows, features=features) if rows else \
        datasets.Dataset.from_dict({k: [] for k in features}, features=features)
    return trajectories, ds


def play_all(pool, policy, jobs: Sequence[tuple[TaskItem, int]], journal: "Journal", *, iteration: int = 0,
             screenshots: bool = False, n_tasks: int, console=None, label: str = "tasks",
             on_played=lambda **stats: None) -> None:
    """Play every (task, sample) job on the pool's desktops, journaling each finished trajectory.

    Shows tasks done, steps/s, success and aborted so far (and tells `on_played` those figures after
    each trajectory); raises if a job could not be played (a rerun resumes from the journal)."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    queue_lock, pending = threading.Lock(), list(jobs)
    stats = {"steps": 0, "success": 0, "aborted": 0, "played": 0}
    left = {t.task_id: sum(1 for j in jobs if j[0].task_id == t.task_id) for t, _ in jobs}
    t0 = time.monotonic()
    columns = (TextColumn(label), BarColumn(), MofNCompleteColumn(),
               TextColumn("{task.fields[rate]:.2f} steps/s · success {task.fields[success]}/{task.fields[played]}"
                          " · aborted {task.fields[aborted]}"), TimeElapsedColumn())
    with Progress(*columns, console=console) as bar:
        job = bar.add_task(label, total=n_tasks, completed=n_tasks - len(left), rate=0.0, **stats)

        def worker() -> None:
            while True:
                with queue_lock:
                    if not pending:
                        return
                    item, sample = pending.pop(0)
                with pool.lease() as env:
                    t = play(env, policy, item.task, domain=item.domain, group_id=f"{item.task_id}:{iteration}",
                             sample=sample, task_dir=item.task_dir, screenshots=screenshots)
                journal.add(item.task_id, sample, t)
                with queue_lock:
                    stats["steps"] += len(t.rows)
                    stats["played"] += 1
                    stats["success"] += t.success
                    stats["aborted"] += t.aborted
                    left[item.task_id] -= 1
                    bar.update(job, advance=left[item.task_id] == 0,
                               rate=stats["steps"] / (time.monotonic() - t0), **stats)
                    on_played(**stats)

        threads = [threading.Thread(target=worker, name=f"play-{k}", daemon=True) for k in range(pool.size)]
        for th in threads:
            th.start()
        if getattr(policy, "needs_serving", False):  # a model policy answered from this (the main) thread
            policy.serve(until=lambda: not any(th.is_alive() for th in threads))
        for th in threads:
            th.join()
    if any(left.values()):
        raise RuntimeError("some trajectories were not played (see the errors above); rerun to resume")


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
        write_atomic(card, json.dumps(key, indent=1).encode())

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
                write_atomic(png, shot["bytes"])
                row["screenshot_file"] = str(png)
        write_atomic(self._name(task_id, sample), json.dumps(record).encode())

    @staticmethod
    def with_screenshots(row: dict) -> dict:
        if "screenshot_file" in row:
            row = dict(row)
            row["screenshot"] = {"bytes": Path(row.pop("screenshot_file")).read_bytes(), "path": None}
        return row

