"""Commands to a running `spawn-envs` supervisor (from the console): one small file each in
ENVS/control/, taken in order and deleted by the supervisor on its next round."""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path

from computerrl.data.files import write_atomic

CONTROL_DIR = "control"


def send(envs: Path | str, action: str, **args) -> None:
    folder = Path(envs) / CONTROL_DIR
    folder.mkdir(mode=0o700, exist_ok=True)
    write_atomic(folder / f"{time.time_ns()}-{uuid.uuid4().hex[:8]}.json", json.dumps({"action": action, **args}))


def take(envs: Path | str) -> list[dict]:
    """The commands sent since the last call, oldest first; each is taken once."""
    commands = []
    for path in sorted((Path(envs) / CONTROL_DIR).glob("[0-9]*.json")):
        try:
            commands.append(json.loads(path.read_text()))
        except ValueError:
            pass  # not a command: dropped below all the same
        path.unlink(missing_ok=True)
    return commands
