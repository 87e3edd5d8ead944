"""Datasets on disk: atomic writes and the lineage card every output carries."""

from __future__ import annotations

import dataclasses
import datetime
import json
import os
import shutil
import subprocess
import uuid
from pathlib import Path
from typing import Any

import datasets

from computerrl import __version__

LINEAGE_FILE = "lineage.json"
# Stages draw their own progress (rich); datasets' per-write tqdm bars would only add noise.
datasets.disable_progress_bars()


def save_atomic(ds: datasets.Dataset, path: Path | str, *, lineage: dict[str, Any] | None = None,
                mode: int | None = None) -> Path:
    """Write `ds` to `path` so a reader sees the old dataset or the new one, never half of one.

    `mode`: permission bits of the dataset folder (None = the umask's); 0o700 keeps a dataset
    holding secrets to its owner — the folder alone suffices, its files cannot be reached.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{uuid.uuid4().hex[:8]}")
    if mode is not None:  # set before any file is written, so there is no readable moment
        tmp.mkdir()
        tmp.chmod(mode)
    ds.save_to_disk(str(tmp))
    if lineage is not None:
        (tmp / LINEAGE_FILE).write_text(json.dumps(lineage, indent=2, default=str))
    old = path.with_name(f".{path.name}.old-{uuid.uuid4().hex[:8]}")
    if path.exists():
        os.rename(path, old)  # two renames: the gap between them is microseconds, never a torn dataset
    os.rename(tmp, path)
    shutil.rmtree(old, ignore_errors=True)
    return path


def load(path: Path | str) -> datasets.Dataset:
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"no dataset at {path}")
    state = path / "state.json"
    if state.exists() and not json.loads(state.read_text()).get("_data_files", True):
        # datasets saves a dataset of no rows as no data file, then cannot load it back (IndexError).
        features = datasets.DatasetInfo.from_directory(str(path)).features
        return datasets.Dataset.from_dict({name: [] for name in features}, features=features)
    return datasets.load_from_disk(str(path))


def step_rows(paths: list[Path], columns: list[str], *, screens: bool = False) -> list[dict]:
    """These columns of every row of these step datasets, checked present. With `screens`, a vision
    policy's rows bring what rebuilds their prompts: messages, step, screens, the screenshot (PNG bytes)
    and `dataset`, the index of their path (trajectories are told apart by it, group_id and sample)."""
    from computerrl.data.schemas import SCREENS, SCREENSHOT, check_columns

    rows = []
    for k, path in enumerate(paths):
        ds = load(path)
        check_columns(ds, columns, f"step dataset {path}")
        vision = screens and SCREENS in ds.column_names and any(ds[SCREENS])  # 0: a text model's, --screenshots
        wanted = list(dict.fromkeys(columns + (["messages", "step", SCREENS, SCREENSHOT] if vision else [])))
        rows += [dict(r, dataset=k) if vision else r for r in ds.select_columns(wanted).to_list()]
    return rows


def lineage(stage: str, config: Any, inputs: dict[str, str] | None = None) -> dict[str, Any]:
    """Which stage made an output, from what, with which options, at which code version."""
    options = dataclasses.asdict(config) if dataclasses.is_dataclass(config) else dict(config)
    return {"stage": stage, "inputs": inputs or {}, "options": options, "computerrl": __version__,
            "git": _git_revision(), "created": datetime.datetime.now(datetime.timezone.utc).isoformat()}


def _git_revision() -> str:
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=Path(__file__).parent,
                             capture_output=True, text=True, timeout=5)
        return out.stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        return ""
