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
    """The pid of another process supervising the envs of the run folder `out`, if one runs."""
    pid = _recorded(out)
    return pid if pid and is_supervisor(pid) else None


def is_supervised(out: Path) -> bool:
    """Whether a supervisor runs for `out`: another process, or this one (a console beside it)."""
    return _recorded(out) == os.getpid() or supervisor_pid(out) is not None


def _recorded(out: Path) -> int | None:
    try:
        return int((Path(out) / PID_FILE).read_text())
    except (FileNotFoundError, ValueError):
        return None
