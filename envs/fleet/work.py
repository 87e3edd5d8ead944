"""What is using a fleet now: each rollout or eval over a `spawn-envs` run folder keeps a small card in
ENVS/work/ (its stage, output folder, trajectories done and left, success so far) while it plays, and
removes it when done. The console reads them; a card whose process is gone is ignored.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from computerrl.data.files import write_atomic

WORK_DIR = "work"
FIGURES = ("pid", "total", "played", "success", "aborted", "steps")


class WorkCard:
    def __init__(self, envs: Path | str, stage: str, out: str, total: int):
        self.path = Path(envs) / WORK_DIR / f"{stage}-{os.getpid()}.json"
        self.card = {"stage": stage, "out": out, "pid": os.getpid(), "started": time.time(), "total": total,
                     "played": 0, "success": 0, "aborted": 0, "steps": 0}

    def __enter__(self) -> "WorkCard":
        self.update()
        return self

    def update(self, **figures: int) -> None:
        if self.path is None:
            return
        self.card.update(figures, updated=time.time())
        try:
            self.path.parent.mkdir(exist_ok=True)
            write_atomic(self.path, json.dumps(self.card))
        except OSError:  # a folder the fleet's owner made read-only, a full disk: the work goes on unannounced
            self.path = None

    def __exit__(self, *exc) -> None:
        if self.path is not None:
            self.path.unlink(missing_ok=True)


def read_work(envs: Path | str) -> list[dict]:
    """The cards of the work in flight on the fleet of `envs`, oldest first."""
    cards = []
    for path in sorted((Path(envs) / WORK_DIR).glob("*.json")):
        try:
            card = json.loads(path.read_text())
            whole = isinstance(card, dict) and all(isinstance(card.get(k), int) for k in FIGURES) and \
                isinstance(card.get("started"), (int, float)) and isinstance(card.get("stage"), str) and \
                isinstance(card.get("out"), str)
        except (OSError, ValueError, RecursionError):
            continue
        if whole and _alive(card["pid"]):  # else: not a card of ours, or its run was killed
            cards.append(card)
    return sorted(cards, key=lambda c: c["started"])


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, OverflowError):  # gone, or no pid at all
        return False
    except PermissionError:  # another user's process
        return True
    return True
