"""Starts a fleet of env servers through a backend and keeps it alive."""

from __future__ import annotations

import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from computerrl.envs.fleet.backends.base import Backend, EnvHandle
from computerrl.envs.fleet.manifest import DRAINED, HEALTHY, REMOVED
from computerrl.envs.fleet.pool import wait_healthy
from computerrl.envs.service.client import EnvClient, EnvError

log = logging.getLogger("computerrl.envs.fleet.supervisor")


class Supervisor:
    """Env servers env-000 … env-(count-1): started, watched, restarted, stopped."""

    def __init__(self, backend: Backend, count: int, *, desktops: int = 1, start_timeout_s: float = 180.0,
                 unhealthy_grace_s: float = 20.0, parallel_starts: int = 4):
        self.backend, self.desktops = backend, desktops
        self.start_timeout_s, self.unhealthy_grace_s, self.parallel_starts = start_timeout_s, unhealthy_grace_s, parallel_starts
        self.ids = [f"env-{i:03d}" for i in range(count)]
        self.handles: dict[str, EnvHandle] = {}
        self.status: dict[str, str] = {i: "starting" for i in self.ids}
        self.restarts: dict[str, int] = {i: 0 for i in self.ids}
        self.episodes: dict[str, int] = {i: 0 for i in self.ids}
        self._sick_since: dict[str, float] = {}
        self._last_restart: dict[str, float] = {}  # monotonic time of each env's last restart
        self._stopping = threading.Event()  # set on Ctrl-C: starts under way stop waiting for health
        self.drained: set[str] = set()
        self.removed: dict[str, EnvHandle] = {}  # servers taken out of the fleet, listed as such in the manifest

    def start_all(self, on_change=lambda: None) -> None:
        """Start every server, a few at a time (each desktop's LibreOffice start is CPU-heavy)."""
        def start(env_id: str) -> None:
            self._start_one(env_id)
            on_change()

        ex = ThreadPoolExecutor(self.parallel_starts)
        try:
            list(ex.map(start, self.ids))
        except KeyboardInterrupt:
            # Drop the queued starts; wait only for those under way, so stop_all() sees their handles.
            self._stopping.set()
            raise
        finally:
            ex.shutdown(cancel_futures=True)

    def _start_one(self, env_id: str) -> None:
        self.status[env_id] = "starting"
        try:
            handle = self.backend.start(env_id, desktops=self.desktops)
        except Exception as e:  # noqa: BLE001 - reported in the table, retried by check()
            self.status[env_id] = f"failed: {e}"
            return
        self.handles[env_id] = handle
        client = EnvClient(handle.address, handle.token)
        try:
            problem = wait_healthy(client, self.start_timeout_s,
                                   alive=lambda: not self._stopping.is_set() and self.backend.alive(handle))
        finally:
            client.close()
        self.status[env_id] = (DRAINED if env_id in self.drained else HEALTHY) if not problem else \
            f"unhealthy: {problem}"

    def check(self, restart: bool = True) -> bool:
        """One supervision round; returns whether anything changed."""
        changed = False
        for env_id in self.ids:
            handle = self.handles.get(env_id)
            problem = self._probe(handle)
            before = self.status[env_id]
            if not problem:
                self.status[env_id] = DRAINED if env_id in self.drained else HEALTHY
                self._sick_since.pop(env_id, None)
            else:
                if not (handle is None and before.startswith("failed:")):  # keep why its start failed
                    self.status[env_id] = f"unhealthy: {problem}"
                now = time.monotonic()
                since = self._sick_since.setdefault(env_id, now)
                dead = handle is None or not self.backend.alive(handle)
                # A live server gets a grace period: its own watchdog rebuilds crashed desktops. And
                # one restart per grace period at most: a restart blocks this loop for up to
                # start_timeout_s, and a server that keeps failing must not starve the others.
                backed_off = now - self._last_restart.get(env_id, -float("inf")) >= self.unhealthy_grace_s
                if restart and backed_off and (dead or now - since > self.unhealthy_grace_s):
                    log.warning("%s: %s; restarting", env_id, self.status[env_id])  # a failed start says why
                    self.restart(env_id)
                    changed = True  # a new address at least: the manifest must follow
            changed |= self.status[env_id] != before
        return changed

    def _probe(self, handle: EnvHandle | None) -> str:
        if handle is None:
            return "not started"
        if not self.backend.alive(handle):
            return "server exited"
        client = EnvClient(handle.address, handle.token)
        try:
            reply = client.health(timeout_s=5.0)
            self.episodes[handle.env_id] = sum(d.episodes for d in reply.desktops)
            return "" if reply.healthy else "; ".join(d.problem for d in reply.desktops if not d.healthy)
        except EnvError as e:
            return str(e)
        finally:
            client.close()

    def restart(self, env_id: str) -> None:
        if env_id in self.handles:
            self.backend.stop(self.handles.pop(env_id))
        self.restarts[env_id] += 1
        self._sick_since.pop(env_id, None)
        self._last_restart[env_id] = time.monotonic()
        self._start_one(env_id)

    def command(self, action: str, env_id: str = "", count: int = 0) -> str:
        """Change the fleet as asked (by the console): `drain` / `undrain` / `remove` a server, or `scale`
        to `count` servers (new ones get the next free ids; the highest ids go first). Says what it did."""
        if action == "scale":
            if not 1 <= count <= 2 * len(self.ids) + 8:  # at most about doubling at once: a typo starts no thousands
                raise ValueError(f"{count} servers: between 1 and {2 * len(self.ids) + 8} from {len(self.ids)}")
            while len(self.ids) > count:
                self.remove(self.ids[-1])
            new, n = [], 0
            while len(self.ids) < count:
                while f"env-{n:03d}" in self.ids:
                    n += 1
                new.append(f"env-{n:03d}")
                self.removed.pop(new[-1], None)
                self.ids.append(new[-1])
                self.status[new[-1]], self.restarts[new[-1]], self.episodes[new[-1]] = "starting", 0, 0
            self.ids.sort()
            with ThreadPoolExecutor(self.parallel_starts) as ex:
                list(ex.map(self._start_one, new))
            failed = sum(self.status[i] not in (HEALTHY, DRAINED) for i in new)
            return f"{len(self.ids)} servers ({len(new)} started" + (f", {failed} of them not healthy)" if failed else ")")
        if env_id not in self.ids:
            raise ValueError(f"no server {env_id!r} in this fleet")
        if action == "drain":
            self.drained.add(env_id)
            if self.status[env_id] == HEALTHY:
                self.status[env_id] = DRAINED
        elif action == "undrain":
            self.drained.discard(env_id)
            if self.status[env_id] == DRAINED:
                self.status[env_id] = HEALTHY
        elif action == "remove":
            if len(self.ids) == 1:
                raise ValueError("a fleet keeps at least one server")
            self.remove(env_id)
        else:
            raise ValueError(f"unknown action {action!r}: drain, undrain, remove or scale")
        return f"{env_id}: {action} done"

    def remove(self, env_id: str) -> None:
        """Take a server out of the fleet and stop it (an episode on it is lost)."""
        self.ids.remove(env_id)
        self.drained.discard(env_id)
        for table in (self.status, self.restarts, self.episodes, self._sick_since, self._last_restart):
            table.pop(env_id, None)
        if env_id in self.handles:
            self.removed[env_id] = self.handles.pop(env_id)
            self.backend.stop(self.removed[env_id])

    def manifest(self) -> tuple[list[EnvHandle], dict[str, str]]:
        """(handles, status by env id) for the manifest: every server with a handle, the removed ones too."""
        handles = [self.handles[i] for i in self.ids if i in self.handles] + \
            [h for i, h in self.removed.items() if i not in self.ids]
        return handles, {**self.status, **{i: REMOVED for i in self.removed}}

    def stop_all(self) -> None:
        for env_id, handle in list(self.handles.items()):
            self.backend.stop(handle)
            self.status[env_id] = "stopped"
        if hasattr(self.backend, "sweep"):  # servers replaced while their host did not answer, if it is back
            self.backend.sweep()
