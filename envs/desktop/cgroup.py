"""A desktop's memory cap: a cgroup of its own holding everything it runs (X, network, sandbox).

Memory is the one limit a sandbox cannot set for itself: the files in its RAM-backed folders
(home, /tmp, /dev/shm) are charged to the cgroup of whoever wrote them, so one cap bounds the
apps and their files alike, and a desktop that outgrows it loses its own processes to the
kernel's OOM killer, never the host's. Making one takes root (or a delegated hierarchy): where
neither cgroup v1's memory controller nor v2's is writable, `make` says why and returns None.
"""

from __future__ import annotations

import contextlib
import functools
import os
import time
from pathlib import Path

CGROUP = Path("/sys/fs/cgroup")


@functools.cache  # as we started: a server that joined a cgroup of its own makes its desktops' beside it
def _own(controller: str) -> str:
    """Our cgroup in the v1 hierarchy of `controller` ("" for v2's unified one)."""
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, names, path = line.split(":", 2)
        if (controller in names.split(",")) if controller else names == "":
            return path
    raise OSError(f"no {controller or 'unified'} cgroup in /proc/self/cgroup")


def _remove_orphans(parent: Path) -> None:
    """Remove the empty cgroups that servers which died (their pid is in the name) left behind."""
    for path in parent.glob("computerrl-*-*"):
        pid = path.name.split("-")[1]
        if pid.isdigit() and not Path(f"/proc/{pid}").exists():
            with contextlib.suppress(OSError):
                os.rmdir(path)


class Cgroup:
    def __init__(self, path: Path):
        self.path = path

    @classmethod
    def make(cls, name: str, memory_bytes: int) -> "tuple[Cgroup | None, str]":
        """A new cgroup capped at `memory_bytes`, or (None, why not)."""
        problems = []
        for attempt in (cls._v1, cls._v2):
            try:
                return attempt(name, memory_bytes), ""
            except OSError as e:
                problems.append(str(e))
        return None, "; ".join(problems)

    @classmethod
    def _v1(cls, name: str, memory_bytes: int) -> "Cgroup":
        path = CGROUP / "memory" / _own("memory").lstrip("/") / name
        _remove_orphans(path.parent)
        path.mkdir(parents=True, exist_ok=True)
        (path / "memory.limit_in_bytes").write_text(str(memory_bytes))
        with contextlib.suppress(OSError):  # no swap accounting: nothing to cap
            (path / "memory.memsw.limit_in_bytes").write_text(str(memory_bytes))
        return cls(path)

    @classmethod
    def _v2(cls, name: str, memory_bytes: int) -> "Cgroup":
        # A process may not sit in a cgroup whose children have controllers, so ours sit beside the
        # server's, under the hierarchy's root: the one place a root server may always enable memory.
        if not (CGROUP / "cgroup.controllers").exists():
            raise OSError("no cgroup v2 hierarchy at /sys/fs/cgroup")
        parent = CGROUP / "computerrl"
        (CGROUP / "cgroup.subtree_control").write_text("+memory")
        parent.mkdir(exist_ok=True)
        _remove_orphans(parent)
        (parent / "cgroup.subtree_control").write_text("+memory")
        path = parent / name
        path.mkdir(exist_ok=True)
        (path / "memory.max").write_text(str(memory_bytes))
        with contextlib.suppress(OSError):  # no swap accounting: nothing to cap
            (path / "memory.swap.max").write_text("0")
        return cls(path)

    def join(self) -> None:
        """Move this process (and what it starts from now on) into the cgroup."""
        (self.path / "cgroup.procs").write_text(str(os.getpid()))

    def wrap(self, argv: list[str]) -> list[str]:
        """`argv` started inside this cgroup: a shell joins it, then becomes the command."""
        return ["sh", "-c", 'echo $$ > "$0" && exec "$@"', str(self.path / "cgroup.procs"), *argv]

    def remove(self, timeout_s: float = 5.0) -> None:
        """Remove the (emptied) cgroup; its last processes may take a moment to leave."""
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                os.rmdir(self.path)
                return
            except FileNotFoundError:
                return
            except OSError:
                if time.monotonic() > deadline:
                    return  # a stuck process: an empty cgroup left behind is harmless
                time.sleep(0.05)
