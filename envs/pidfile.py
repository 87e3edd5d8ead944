"""Who supervises a `spawn-envs` run folder: the pid file its supervisor keeps there while it runs."""

from __future__ import annotations

import os
from pathlib import Path

PID_FILE = "supervisor.pid"


def is_supervisor(pid: int) -> bool:
    """Whether `pid` is a live spawn-envs process: a pid file left by a crash or a reboot may name
    an unrelated process by now, which must never be signalled."""
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")  # empty for a zombie
    except OSError:
        return False
    return pid != os.getpid() and b"spawn-envs" in argv


def supervisor_pid(out: Path) -> int | None:
    """The pid of the supervisor running the envs of the run folder `out`, if one runs."""
    try:
        pid = int((Path(out) / PID_FILE).read_text())
    except (FileNotFoundError, ValueError):
        return None
    return pid if is_supervisor(pid) else None
