"""The tasks a stage plays: a task dataset from `tasks build`, or a folder of OSWorld JSON files.

A task this build cannot run (unsupported step, getter or metric; a malformed file) is kept in
the list with `skip` saying why, so `rollout` and `eval` report it instead of counting it as a
failure. OSWorld files take their domain from their folder (`osworld/libreoffice_calc/…`) and
may read files beside them (`task_dir`); their task id is the file's path under the folder without
`.json` (`chrome/06fe7178-…`), because OSWorld files the same task under two domains.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from computerrl.data.folders import TASK_FILES, TASKS, WrongInput, expect
from computerrl.tasks.task import TaskError, load_task, parse_task


@dataclasses.dataclass
class TaskItem:
    task_id: str
    domain: str
    task: dict[str, Any]  # the OSWorld-format JSON the env server gets
    task_dir: str = ""  # the task file's folder ("" for generated tasks: their files are in the cache)
    template: str = ""  # generating template ("" for hand-written tasks)
    ood: bool = False  # its template was held out of train (`tasks build --holdout-templates`)
    skip: str = ""  # why it cannot be played here ("" = it can)


def load_task_set(path: Path | str, limit: int = 0) -> list[TaskItem]:
    """Every task under `path` (--tasks), in a stable order; `limit` > 0 keeps the first ones. A folder of
    another kind is refused (WrongInput names what it is, and the splits to pass for a suite)."""
    path = Path(path)
    if expect(path, "--tasks", TASKS, TASK_FILES) == TASKS:
        items = _from_dataset(path)
    else:
        items = [_from_file(f, path) for f in sorted(path.rglob("*.json"))]
    ids = [i.task_id for i in items]
    if len(set(ids)) != len(ids):
        dup = next(i for i in ids if ids.count(i) > 1)
        raise ValueError(f"task id {dup!r} appears twice under {path}")
    return items[:limit] if limit > 0 else items


def _from_dataset(path: Path) -> list[TaskItem]:
    from computerrl.data.datasets_io import load
    from computerrl.data.schemas import check_columns

    ds = load(path)
    check_columns(ds, ["task_id", "domain", "task_json"], f"task dataset {path}")
    items = []
    for row in ds:
        data = json.loads(row["task_json"])
        item = TaskItem(row["task_id"], row["domain"], data, template=row.get("template") or "",
                        ood=bool(row.get("ood")))
        try:
            item.skip = "; ".join(parse_task(data, f"{path}[{row['task_id']}]").unsupported())
        except TaskError as e:
            item.skip = f"malformed: {e}"
        items.append(item)
    return items


def _from_file(f: Path, root: Path) -> TaskItem:
    rel = f.relative_to(root)
    task_id, domain = str(rel.with_suffix("")), rel.parts[0] if len(rel.parts) > 1 else ""
    try:
        task = load_task(f)
    except TaskError as e:
        return TaskItem(task_id, domain, {}, str(f.parent), skip=f"malformed: {e}")
    missing = task.unsupported()
    return TaskItem(task_id, domain or task.snapshot, json.loads(f.read_text()), str(f.parent.resolve()),
                    skip=f"needs {', '.join(missing)}" if missing else "")


def playable(items: list[TaskItem], path: Path | str, console) -> list[TaskItem]:
    """The items that can be played here, each skipped one printed with why; WrongInput when none can."""
    for i in items:
        if i.skip:
            console.print(f"skipped {i.task_id}: {i.skip}", markup=False, highlight=False)
    kept = [i for i in items if not i.skip]
    if not items:
        raise WrongInput(f"{path} holds no task")
    if not kept:
        raise WrongInput(f"none of the {len(items)} tasks under {path} can be played here (the first: "
                         f"{items[0].task_id}: {items[0].skip})")
    return kept
