"""What a folder on disk is, told from the files the stages write: a stage given the wrong folder says in
one line what it expected, what it found, and what to pass instead (`WrongInput`, exit code 2)."""

from __future__ import annotations

import json
from pathlib import Path

# The kinds, as a message names them.
TASKS = "a task dataset"
TASK_FILES = "a folder of OSWorld task files"
SUITE = "a task suite"
STEPS = "a step dataset"
CHATS = "a chat dataset"
MANIFEST = "an env manifest"
ENVS = "a spawn-envs folder"
CHECKPOINT = "a checkpoint (a transformers model folder or a LoRA adapter)"
EVAL = "an eval folder"
FILE_CACHE = "a task file cache (the files a suite's tasks download, by index.json)"
# The columns that tell one dataset kind from another (data/schemas.py's features).
DATASET_COLUMNS = {TASKS: {"task_id", "task_json"}, STEPS: {"response", "reward", "group_id"},
                   CHATS: {"messages"}, MANIFEST: {"env_id", "address"}}  # in this order: a step dataset has messages
DATASET_FILES = {"dataset_info.json", "state.json", "lineage.json", "summary.json"}  # what a dataset folder holds


class WrongInput(ValueError):
    """A stage's input folder is not the kind it reads; the message is the one line a user sees."""


def kind(path: Path | str) -> str:
    """The kind of folder `path` is (one of the constants above), or what it is instead, in words."""
    path = Path(path)
    if not path.exists():
        return "nothing (no such file or folder)"
    if not path.is_dir():
        return "a file"
    if (path / "dataset_info.json").exists():
        try:
            columns = set(json.loads((path / "dataset_info.json").read_text()).get("features", {}))
        except (OSError, ValueError):
            return "a dataset whose dataset_info.json cannot be read"
        return next((k for k, needed in DATASET_COLUMNS.items() if needed <= columns),
                    f"a dataset with columns {', '.join(sorted(columns))}")
    if (path / "config.json").exists() or (path / "adapter_config.json").exists():
        return CHECKPOINT
    if (path / "steps" / "dataset_info.json").exists() and (path / "summary.json").exists():
        return EVAL
    if (path / "manifest" / "dataset_info.json").exists():
        return ENVS
    if kind(path / "train") == TASKS or kind(path / "test") == TASKS:
        return SUITE
    others = (f for f in path.iterdir() if f.name != "index.json")
    if (path / "index.json").is_file() and not any(f.suffix == ".json" for f in others):
        return FILE_CACHE
    names = {f.name for f in path.rglob("*.json")}
    if "dataset_info.json" in names:
        return "a folder of datasets"
    if names - DATASET_FILES:
        return TASK_FILES
    return "an empty folder" if not any(path.iterdir()) else "a folder holding none of the files a stage writes"


def expect(path: Path | str, option: str, *wanted: str) -> str:
    """The kind of `path` when it is one of `wanted`; else WrongInput naming what `option` takes, what the
    folder is, and the folders inside it that would do (a suite's splits, an eval's steps)."""
    path = Path(path)
    found = kind(path)
    if found in wanted:
        return found
    inside = sorted((sub for sub in path.iterdir() if sub.is_dir() and kind(sub) in wanted),
                    key=lambda sub: (ORDER.index(sub.name) if sub.name in ORDER else len(ORDER), sub.name)) \
        if path.is_dir() else []
    hint = f"; pass {' or '.join(map(str, inside))}" if inside else ""
    raise WrongInput(f"{option} {path}: expected {' or '.join(wanted)}, found {found}{hint}")


ORDER = ("train", "valid", "rl", "test", "expert", "steps")  # a suite's and an eval's folders, as a hint lists them
