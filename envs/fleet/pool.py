"""EnvPool: lease desktops across many env servers; replace the ones that die.

A rollout worker leases one desktop, runs an episode on it and gives it back. When an
episode was lost (the server's watchdog rebuilt a crashed desktop, or the server itself died
or hung past a call's deadline), the pool probes the server: a healthy server keeps serving,
a dead or unhealthy one is retired and replaced under the same env id: started afresh by the
pool's backend, or — for a pool made from a `spawn-envs` manifest — taken from the manifest once
the supervisor has replaced it there (the pool never starts a second one). A desktop that
loses `MAX_LOST_IN_A_ROW` episodes in a row is not leased again until its server has rebuilt
it (the other desktops of that server go on); one that cannot be rebuilt is set aside.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
import time
from pathlib import Path
from typing import Iterator

from computerrl.data.config import DEFAULT_MAX_STEPS
from computerrl.envs.fleet.backends.base import Backend, EnvHandle
from computerrl.envs.service.client import DesktopEnv, EnvClient, EnvError

log = logging.getLogger("computerrl.envs.fleet.pool")
MAX_LOST_IN_A_ROW = 3  # lost episodes in a row after which a desktop is rebuilt before its next lease


def wait_healthy(client: EnvClient, timeout_s: float, *, alive=lambda: True) -> str:
    """Poll Health until every desktop is up; returns '' or the last problem seen."""
    deadline, problem = time.monotonic() + timeout_s, "no answer"
    while time.monotonic() < deadline and alive():
        try:
            reply = client.health(timeout_s=2.0)
            if reply.healthy:
                return ""
            problem = "; ".join(f"desktop {d.desktop}: {d.problem}" for d in reply.desktops if not d.healthy)
            if "failed to start" in problem:
                break
        except EnvError as e:
            problem = str(e)
        time.sleep(0.2)
    return problem or "server exited"


class EnvPool:
    def __init__(self, handles: list[EnvHandle], backend: Backend | None = None, *, call_timeout_s: float = 60.0,
                 start_timeout_s: float = 120.0, max_steps: int = DEFAULT_MAX_STEPS, screenshot: bool = False,
                 manifest: Path | None = None):
        self.backend, self.call_timeout_s, self.start_timeout_s = backend, call_timeout_s, start_timeout_s
        self.manifest = manifest  # a spawn-envs run folder whose manifest the pool follows
        self.max_steps, self.screenshot = max_steps, screenshot
        self.handles: dict[str, EnvHandle] = {h.env_id: h for h in handles}
        self.clients = {h.env_id: EnvClient(h.address, h.token, timeout_s=call_timeout_s) for h in handles}
        self.free: queue.Queue[tuple[str, int]] = queue.Queue()
        self.replaced = 0  # servers replaced since the pool was made
        self.lost_in_a_row: dict[tuple[str, int], int] = {}  # (env id, desktop) -> lost episodes since one played
        self.set_aside: set[tuple[str, int]] = set()  # desktops that could not be rebuilt: never leased again
        self._lock = threading.Lock()
        self.parked: set[tuple[str, int]] = set()  # desktops of servers the fleet drained or removed
        self._unwanted: set[str] = set()
        self._manifest_seen: tuple = ()  # (inode, mtime) of the manifest last read
        self._parking = threading.Lock()  # parked and _unwanted (not _lock: a replacement holds it for minutes)
        for h in handles:
            for d in range(h.desktops):
                self.free.put((h.env_id, d))

    @classmethod
    def from_manifest(cls, run_dir: Path | str, **options) -> "EnvPool":
        """A pool over the healthy servers of a `spawn-envs` run folder (or manifest dataset)."""
        from computerrl.envs.fleet.manifest import read_manifest

        handles, status = read_manifest(run_dir)
        healthy = [h for h in handles if status[h.env_id] == "healthy"]
        if not healthy:
            raise EnvError(f"no healthy env server in the manifest of {run_dir} "
                           f"({', '.join(f'{h.env_id}: {status[h.env_id]}' for h in handles) or 'empty'}); "
                           "start some with `computerrl spawn-envs --detach`")
        return cls(healthy, manifest=Path(run_dir), **options)

    @property
    def size(self) -> int:
        return sum(h.desktops for h in self.handles.values())

    @contextlib.contextmanager
    def lease(self, timeout_s: float | None = 600.0) -> Iterator[DesktopEnv]:
        """A desktop for one or more episodes; given back (and checked if it lost one) on exit."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while True:
            if self.size <= sum(1 for k in self.set_aside | self.parked if k[0] in self.handles):
                raise EnvError("no desktop of the pool is left: every env was retired, drained or removed, or its "
                               "desktops set aside (see the log for why)")
            if deadline is not None and time.monotonic() > deadline:
                raise TimeoutError(f"no free desktop within {timeout_s} s ({self.size} in the pool)")
            left = 1.0 if deadline is None else min(1.0, deadline - time.monotonic())
            self._follow_manifest()
            try:
                env_id, desktop = self.free.get(timeout=max(0.0, left))  # a second at most: desktops may be set aside
            except queue.Empty:
                continue
            if self._park((env_id, desktop)):
                continue
            if env_id in self.handles and (env_id, desktop) not in self.set_aside:  # else: retired
                break
        env = DesktopEnv(self.clients[env_id], desktop, max_steps=self.max_steps, screenshot=self.screenshot)
        env.env_id = env_id
        lost = False
        try:
            yield env
            lost = bool(env.aborted)
        except EnvError:
            lost = True
            raise
        finally:
            if lost:
                self._recover(env_id)
            key = (env_id, desktop)
            self.lost_in_a_row[key] = self.lost_in_a_row.get(key, 0) + 1 if lost else 0
            if self.lost_in_a_row[key] >= MAX_LOST_IN_A_ROW and env_id in self.handles:
                self._rebuild(key)
            if env_id in self.handles and key not in self.set_aside:
                self.free.put(key)

    def _follow_manifest(self) -> None:
        """No new lease on a server the fleet's supervisor has drained or removed since (the console's
        doing); its desktops come back if it is undrained."""
        from computerrl.envs.fleet.manifest import DRAINED, REMOVED, manifest_path, read_manifest

        if self.manifest is None:
            return
        try:
            stat = manifest_path(self.manifest).stat()
            if (stat.st_ino, stat.st_mtime_ns) == self._manifest_seen:
                return
            handles, status = read_manifest(self.manifest)
            self._manifest_seen = (stat.st_ino, stat.st_mtime_ns)
        except (OSError, ValueError):  # mid-rewrite: read it next time
            return
        wanted = {h.env_id for h in handles if status[h.env_id] not in (DRAINED, REMOVED)}
        with self._parking:
            self._unwanted = set(self.handles) - wanted
            for key in [k for k in self.parked if k[0] not in self._unwanted]:
                self.parked.discard(key)
                self.free.put(key)

    def _park(self, key: tuple[str, int]) -> bool:
        """Keep aside a desktop of a drained or removed server (until an undrain); whether it was."""
        with self._parking:
            if key[0] in self._unwanted:
                self.parked.add(key)
                return True
            return False

    def _rebuild(self, key: tuple[str, int]) -> None:
        """Ask the desktop's server for a fresh one; set the desktop aside if none comes."""
        env_id, desktop = key
        why = f"{self.lost_in_a_row[key]} episodes lost in a row"
        log.warning("env %s desktop %d: %s; asking for a fresh desktop", env_id, desktop, why)
        try:
            health = self.clients[env_id].rebuild(desktop, why, timeout_s=self.start_timeout_s)
            problem = health.problem if not health.healthy else ""
        except EnvError as e:
            problem = str(e)
        if problem:
            log.error("env %s desktop %d set aside: no working replacement (%s)", env_id, desktop, problem)
            self.set_aside.add(key)
        self.lost_in_a_row[key] = 0

    def _recover(self, env_id: str) -> None:
        """After a lost episode: keep a server that answers (its desktops are rebuilt by it, and by
        `_rebuild` when one keeps failing), replace a dead or hung one, retire what fails."""
        handle = self.handles.get(env_id)
        if handle is None:
            return
        if self.backend is not None and not self.backend.alive(handle):
            problem = "server exited"
        else:
            try:
                self.clients[env_id].health(timeout_s=10.0)
                return
            except EnvError as e:
                problem = str(e)
        with self._lock:
            if self.handles.get(env_id) is not handle:  # another lease of this server dealt with it
                return
            log.warning("env %s at %s is unhealthy (%s): replacing it", env_id, handle.address, problem)
            try:
                new, client = self._replacement(handle)
            except Exception as e:  # noqa: BLE001 - a lease must not fail for the env it leaves behind
                log.error("env %s retired: %s", env_id, e)
                del self.handles[env_id]
                self.clients.pop(env_id).close()
                return
            old_client = self.clients[env_id]
            self.handles[env_id], self.clients[env_id] = new, client  # swapped only once healthy
            old_client.close()
            self.replaced += 1
            for key in [k for k in self.set_aside if k[0] == env_id]:  # a new server: new desktops
                self.set_aside.discard(key)
                self.free.put(key)

    def _replacement(self, old: EnvHandle) -> tuple[EnvHandle, EnvClient]:
        if self.backend is None and self.manifest is not None:
            return self._from_manifest(old)
        if self.backend is None:
            raise EnvError("the pool has no backend to replace it")
        self.backend.stop(old)
        new = self.backend.start(old.env_id, desktops=old.desktops)
        client = EnvClient(new.address, new.token, timeout_s=self.call_timeout_s)
        problem = wait_healthy(client, self.start_timeout_s, alive=lambda: self.backend.alive(new))
        if problem:
            client.close()
            self.backend.stop(new)
            raise EnvError(f"its replacement did not become healthy: {problem}")
        return new, client

    def _from_manifest(self, old: EnvHandle) -> tuple[EnvHandle, EnvClient]:
        """Wait for the supervisor to list a healthy replacement (new address or token) of `old`."""
        from computerrl.envs.fleet.manifest import DRAINED, HEALTHY, REMOVED, read_manifest

        deadline = time.monotonic() + self.start_timeout_s
        while time.monotonic() < deadline:
            try:
                handles, status = read_manifest(self.manifest)
            except (OSError, ValueError):  # mid-rewrite: read again
                handles, status = [], {}
            new = next((h for h in handles if h.env_id == old.env_id), None)
            if new is not None and status[new.env_id] == REMOVED:
                raise EnvError(f"{old.env_id} was removed from the fleet of {self.manifest}")
            fresh = new is not None and (new.address, new.token) != (old.address, old.token)
            if fresh and status[new.env_id] in (HEALTHY, DRAINED):
                client = EnvClient(new.address, new.token, timeout_s=self.call_timeout_s)
                if not wait_healthy(client, 30.0):
                    return new, client
                client.close()
            time.sleep(1.0)
        raise EnvError(f"the manifest of {self.manifest} listed no healthy replacement within {self.start_timeout_s} s")

    def close(self) -> None:
        for c in self.clients.values():
            c.close()
