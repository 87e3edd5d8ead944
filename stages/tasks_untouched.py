"""`computerrl tasks check FOLDER --run`: which tasks reward doing nothing.

A task whose untouched start already scores rewards an agent that only says "done", and RL learns
exactly that. Each supported task is reset on a real desktop of a `spawn-envs` run and scored after
the agent's first answer, `Agent.exit(success=True)`, with no action before it (`tasks_build.NO_ACTION`,
the same play `tasks build` gives every generated instance). A task that cannot be set up here (its
input files are not in the desktops' `--cache`) is counted apart, with the reason.

Writes OUT/untouched.json: one record per task (task_id, score, detail, error), and journals each play
in OUT/.plays, so a run killed half-way resumes.
"""

from __future__ import annotations

import json
from pathlib import Path

JOURNAL = ".plays"


def score_untouched(folder: Path, envs: Path, out: Path, *, model: str = "embedded", console=None) -> list[dict]:
    """Every task under `folder` (task files or a task dataset) that this build supports, scored untouched
    on the desktops of `envs`, in the order of the task set."""
    from computerrl.data.files import write_atomic
    from computerrl.data.journal import Journal
    from computerrl.envs.fleet.pool import EnvPool
    from computerrl.envs.tasks.task_set import load_task_set
    from computerrl.policy.checkpoint import prompt_settings, resolve
    from computerrl.stages.playing import NO_ACTION, ScriptedPlay, play_scripted

    items = [i for i in load_task_set(folder) if not i.skip]
    if not items:
        raise ValueError(f"no task under {folder} is supported here: nothing to play")
    journal = Journal(Path(out) / JOURNAL, {"tasks": str(Path(folder).resolve()), "envs": str(Path(envs).resolve())},
                      restart=True)
    plays = [ScriptedPlay(i.task_id, i.task, i.domain, NO_ACTION, i.task_dir) for i in items]
    pool = EnvPool.from_manifest(envs, max_steps=len(NO_ACTION))
    try:
        played = play_scripted(pool, plays, prompt_settings(resolve(model)), journal, label="untouched",
                               console=console)
    finally:
        pool.close()
    records = [{"task_id": i.task_id, "domain": i.domain, "score": t.score, "detail": t.detail, "error": t.error}
               for i, t in zip(items, played)]
    write_atomic(Path(out) / "untouched.json", json.dumps(records, indent=1))
    journal.remove()  # whole: its records are in untouched.json
    return records
