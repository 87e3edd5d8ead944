"""A pristine desktop kept warm beside each desktop in use, swapped in at a reset.

A reset must give the next episode the desktop a clean start made, before any agent or task touched it: the X
server (its properties, selections, keyboard map), the window manager, both D-Bus daemons, the AT-SPI registry
and an office started on its pristine profile. Restoring a checkpoint of those processes (CRIU) cannot work for
this sandbox: CRIU dumps a tree whose processes share its root's pid, user, uts and ipc namespaces (only mount
and network ones may nest; criu/namespaces.c, 4.1), while a desktop's session runs in a user and pid namespace
nested in its sandbox's; and no Landlock domain can be read back from the kernel, so an app restored by CRIU
would run outside the domain that keeps the agent's programs from tracing it. (Debian 12's CRIU 3.17 does not
even start on this kernel: it cannot parse a vDSO with a vvar_vclock mapping.)

So the pristine desktop is made, not restored: built on a thread of its own while an episode runs on the desktop
in use, it takes that desktop's place at the next reset, and the one it replaced is closed in the background.
A reset then costs the swap in time; in CPU it still costs a desktop's start. Two folders take turns: the
desktop in use lives in one, its spare is built in the other.
"""

from __future__ import annotations

import logging
import queue
import threading
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # imported where a spare is built: spawn-envs reads RESETS without the desktop's modules
    from computerrl.envs.desktop.desktop import Desktop

log = logging.getLogger("computerrl.envs.service.spare")
# How a desktop gets clean for the next episode (`--reset`), as spawn-envs tells a user at start.
RESETS = {
    "in-place": "each reset kills the desktop's processes and empties its folders (--reset in-place)",
    "spare": "each reset swaps in a pristine desktop built in the background, its office running (--reset spare)",
}
NO_RESTORE = ("no reset restores a checkpoint: CRIU cannot dump the sandbox's nested namespaces nor give back its "
              "Landlock domains (envs/service/spare.py)")
CLOSE_WAIT_S = 120.0  # how long closing waits for a build in flight (a desktop starts in seconds)
WARM_APPS = ("calc", "writer", "impress")  # the office apps whose code a spare loads before any episode
BUILD_WAIT_S = 60.0  # how long a reset waits for the spare being built before it resets in place


class Spare:
    """The next desktop of one slot: started, reset once, its office running, never yet used. Built by a thread
    that lives as long as the spare: a desktop's processes die with the thread that started them
    (bubblewrap's --die-with-parent is the kernel's parent-death signal, which follows the thread)."""

    def __init__(self, options: dict):
        self.options = options
        self.lock = threading.Condition()
        self.ready: Desktop | None = None
        self.building = False  # a build is queued or in flight
        self.closing = False
        self.problem = ""  # why the latest build failed ("" once one succeeds)
        self._jobs: queue.Queue = queue.Queue()  # (folder to build in or None, desktop to close or None)
        self._builder = threading.Thread(target=self._work, daemon=True, name="spare-builder")
        self._builder.start()

    def refill(self, folder: Path, retired: Desktop | None = None) -> None:
        """In the background: close `retired` (the desktop the spare replaced, or a spare found broken), then
        build the next spare in `folder`, unless one is ready or being built already."""
        with self.lock:
            build = not (self.closing or self.ready is not None or self.building)
            self.building = self.building or build
        if build or retired is not None:
            self._jobs.put((folder if build else None, retired))

    def _work(self) -> None:
        while (job := self._jobs.get()) is not None:
            folder, retired = job
            if retired is not None:
                retired.close()  # first: its folder may be the one the next spare is built in
            if folder is not None:
                desktop = None if self.closing else self._build(folder)
                with self.lock:
                    self.building = False
                    if desktop is not None and not self.closing:
                        self.ready, self.problem, desktop = desktop, "", None
                    self.lock.notify_all()
                if desktop is not None:
                    desktop.close()

    def _build(self, folder: Path) -> Desktop | None:
        from computerrl.envs.desktop.desktop import Desktop

        try:
            desktop = Desktop(folder, **self.options).start()
        except Exception as e:  # noqa: BLE001 - the slot resets in place meanwhile; the next reset tries again
            self.problem = f"the spare did not start: {type(e).__name__}: {e}"
            log.warning("%s", self.problem)
            return None
        try:
            desktop.reset()
            desktop.office.start()  # the office a reset gives is already running, on its pristine profile,
            desktop.office.warm(WARM_APPS)  # with its apps' code loaded
        except Exception as e:  # noqa: BLE001
            desktop.close()
            self.problem = f"the spare did not get ready: {type(e).__name__}: {e}"
            log.warning("%s", self.problem)
            return None
        return desktop

    def take(self, network: bool, wait_s: float) -> Desktop | None:
        """The spare, once ready (waiting for a build in flight: a reset in place would keep what the agent set
        in the X server and on the buses), if healthy and with the network the episode needs; else None."""
        with self.lock:
            self.lock.wait_for(lambda: not self.building, min(wait_s, BUILD_WAIT_S))
            desktop = self.ready
            if desktop is None or desktop.network != network:
                return None
            self.ready = None
        why = desktop.health()
        if why:
            self.problem = f"the spare broke while it waited: {why}"
            log.warning("%s", self.problem)
            self.refill(desktop.workdir, desktop)
            return None
        return desktop

    def close(self) -> None:
        """Stop building and close the spare; safe twice."""
        with self.lock:
            self.closing = True
            desktop, self.ready = self.ready, None
        self._jobs.put((None, desktop))
        self._jobs.put(None)  # the builder ends once the jobs before are done
        self._builder.join(CLOSE_WAIT_S)
