"""Many trajectories at once: one worker per desktop of a pool, through the one driver of journaled
work (data/journal.py), so a run is resumable and shows its progress. `rollout` and `eval` both play
through here.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Sequence

from computerrl.data.files import write_atomic
from computerrl.data.journal import Journal, work_through
from computerrl.play.episode import play
from computerrl.tasks.task_set import TaskItem


def plan(tasks: Path, *, limit: int, samples: int, journal_dir: Path, key: dict, console, restart: bool = False):
    """(all task items, the playable ones, the run's journal, the (task, sample) jobs to play).

    Prints the tasks skipped (with why). `restart`: a journal of other settings is removed, not refused."""
    from computerrl.tasks.task_set import load_task_set, playable as playable_items

    items = load_task_set(tasks, limit)
    playable = playable_items(items, tasks, console)
    journal = Journal(journal_dir, key, restart=restart)
    return items, playable, journal, [(t, s) for t in playable for s in range(samples)]


def trajectory_name(task_id: str, sample: int) -> str:
    return f"{task_id}#{sample}"


def play_tasks(cfg, stage: str, console, **options) -> tuple[list[TaskItem], list[TaskItem], Journal]:
    """What `rollout` and `eval` do before writing their outputs: check `cfg`'s inputs (a PlayConfig), plan its
    (task, sample) jobs against its journal (a killed run resumes: only what it had not finished is played), open
    the policy and play them on the desktops. Returns (every task item, the playable ones, the journal)."""
    cfg.check_inputs()
    items, playable, journal, jobs = plan(cfg.tasks, limit=cfg.limit, samples=cfg.samples, journal_dir=cfg.journal,
                                          key=cfg.key(), console=console, restart=cfg.overwrite)
    if jobs:
        policy = cfg.open_policy()
        play_on_envs(cfg.envs, policy, jobs, journal, stage=stage, out=cfg.out, max_steps=cfg.max_steps,
                     screenshots=cfg.screenshots or policy.sees_screen, console=console, **options)
    return items, playable, journal


def play_on_envs(envs: Path, policy, jobs: Sequence[tuple[TaskItem, int]], journal: Journal, *, stage: str,
                 out: Path, max_steps: int, screenshots: bool = False, **options) -> None:
    """`play_all` on a pool over a `spawn-envs` run folder, announced to the fleet's console as `stage`
    writing `out`; the pool and the policy are closed after."""
    from computerrl.envs.fleet.pool import EnvPool
    from computerrl.envs.fleet.work import WorkCard

    try:
        pool = EnvPool.from_manifest(envs, max_steps=max_steps, screenshot=screenshots)
        try:
            left = sum(not journal.has(trajectory_name(t.task_id, s)) for t, s in jobs)
            with WorkCard(envs, stage, str(out), total=left) as card:
                play_all(pool, policy, jobs, journal, screenshots=screenshots, on_played=card.update, **options)
        finally:
            pool.close()
    finally:
        policy.close()


def step_dataset(journal: Journal, items: Sequence[TaskItem], samples: int, screenshots: bool):
    """(trajectory records, step dataset) of every (task, sample) in the journal, in task order."""
    trajectories = [journal.get(trajectory_name(t.task_id, s)) for t in items for s in range(samples)]
    return trajectories, rows_dataset([r for t in trajectories for r in t["rows"]], screenshots)


def rows_dataset(rows: list[dict], screenshots: bool, extra: dict | None = None):
    """A step dataset of journaled rows (their screenshots read back), with `extra` features beside the schema's."""
    import datasets

    from computerrl.data.schemas import STEP_FEATURES, STEP_WITH_SCREENSHOT_FEATURES

    rows = [with_screenshots(r) for r in rows]
    # a vision model's rows carry their screenshots whether or not --screenshots asked for them
    features = STEP_WITH_SCREENSHOT_FEATURES if screenshots or any("screenshot" in r for r in rows) else STEP_FEATURES
    features = datasets.Features({**features, **(extra or {})})
    if not rows:
        return datasets.Dataset.from_dict({k: [] for k in features}, features=features)
    return datasets.Dataset.from_list(rows, features=features)


def play_all(pool, policy, jobs: Sequence[tuple[TaskItem, int]], journal: Journal, *, iteration: int = 0,
             screenshots: bool = False, console=None, label: str = "trajectories",
             on_played=lambda **stats: None) -> None:
    """Play every (task, sample) job on the pool's desktops, journaling each finished trajectory (its
    screenshots as PNG files beside it). Shows steps/s, success and aborted so far (and tells
    `on_played` those figures after each); raises if a job could not be played (a rerun resumes)."""

    def one(job: tuple[TaskItem, int]) -> dict:
        item, sample = job
        return play_for_journal(pool, policy, item, sample, f"{item.task_id}:{iteration}", journal,
                                trajectory_name(item.task_id, sample), screenshots=screenshots)

    def tally(t: dict) -> dict:
        return {"steps": len(t["rows"]), "success": bool(t["success"]), "aborted": bool(t["error"])}

    def shown(n: dict, seconds: float) -> str:
        return (f"{n.get('steps', 0) / max(seconds, 1e-9):.2f} steps/s · success {n.get('success', 0)}/{n['done']}"
                f" · aborted {n.get('aborted', 0)}")

    work_through(journal, [(trajectory_name(t.task_id, s), (t, s)) for t, s in jobs], one, workers=pool.size,
                 label=label, console=console, tally=tally, shown=shown,
                 on_done=lambda n: on_played(played=n["done"], **{k: v for k, v in n.items() if k != "done"}),
                 serve=policy.serve if getattr(policy, "needs_serving", False) else None)


def play_for_journal(pool, policy, item: TaskItem, sample: int, group_id: str, journal: Journal, name: str, *,
                     screenshots: bool = False, reset_holds_batch: bool = True) -> dict:
    """One episode on a desktop of the pool, as the record the journal keeps under `name` (its screenshots
    written beside it as PNG files)."""
    with pool.lease() as env:
        t = play(env, policy, item.task, domain=item.domain, group_id=group_id, sample=sample,
                 task_dir=item.task_dir, screenshots=screenshots, reset_holds_batch=reset_holds_batch)
    record = dataclasses.asdict(t)
    for row in record["rows"]:
        shot = row.pop("screenshot", None)
        if shot and shot.get("bytes"):
            png = journal.path(name, f"-step{row['step']}.png")
            write_atomic(png, shot["bytes"])
            row["screenshot_file"] = str(png)
    return record


def with_screenshots(row: dict) -> dict:
    """A journaled row with its screenshot read back from its PNG file."""
    if "screenshot_file" in row:
        row = dict(row)
        row["screenshot"] = {"bytes": Path(row.pop("screenshot_file")).read_bytes(), "path": None}
    return row
