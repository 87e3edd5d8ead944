"""A look at a whole fleet at once: every server a `spawn-envs` manifest lists, each of its desktops as its
server's Health reports it (task, step, latencies, last error), and the work in flight on it. The console
renders it as a page and as Prometheus metrics.
"""

from __future__ import annotations

import dataclasses
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from computerrl.envs.service.client import EnvClient, EnvError
from computerrl.envs.fleet.manifest import handle_of, manifest_rows
from computerrl.envs.fleet.pidfile import is_supervised
from computerrl.envs.fleet.manifest import REMOVED
from computerrl.envs.fleet.work import read_work

HEALTH_TIMEOUT_S = 3.0  # a server slower than this to answer Health shows as not answering


@dataclasses.dataclass
class DesktopView:
    index: int
    healthy: bool
    problem: str
    task_id: str
    step: int
    in_episode: bool
    episodes: int
    steps: int
    replacements: int
    reset_s: float
    step_s: float
    last_error: str
    steps_per_s: float = 0.0  # since the previous look
    restored: int = 0  # resets that swapped in its pristine spare
    reset_in_place: int = 0  # resets done in place (no spare ready, or --reset in-place)
    spare: str = ""  # why its spare could not be built


@dataclasses.dataclass
class ServerView:
    env_id: str
    address: str
    host: str
    backend: str
    status: str  # as the supervisor wrote it in the manifest
    restarts: int
    uptime_s: float | None  # None: the server did not answer
    error: str  # why it did not answer
    desktops: list[DesktopView]


@dataclasses.dataclass
class FleetView:
    envs: Path
    servers: list[ServerView]
    work: list[dict]  # the cards of envs/fleet/work.py
    supervised: bool  # a supervisor runs for this fleet (it carries out drain, remove and scale)
    taken_at: float


def host_of(handle) -> str:
    """Where a server runs: its Docker engine for the docker backend, else its address's host."""
    return handle.detail.get("docker_host") or handle.address.rsplit(":", 1)[0]


class Fleet:
    """The fleet of one `spawn-envs` run folder, looked at on demand (`look`)."""

    def __init__(self, envs: Path | str):
        self.envs = Path(envs)
        self._last: dict[tuple[str, str, int], tuple[int, float]] = {}  # (env, address, desktop) -> (steps, when)
        self._pool = ThreadPoolExecutor(16, thread_name_prefix="fleet-health")
        self._handles: dict = {}  # env id -> handle, as the manifest read last listed the servers

    def _read(self) -> list[dict]:
        """The manifest's rows of servers in the fleet (not removed); their handles kept for `client`."""
        rows = [r for r in manifest_rows(self.envs) if r["status"] != REMOVED]
        self._handles = {r["env_id"]: handle_of(r) for r in rows}
        return rows

    def look(self) -> FleetView:
        rows = self._read()
        handles = [self._handles[r["env_id"]] for r in rows]
        replies = list(self._pool.map(_health, handles))
        now = time.monotonic()
        servers = []
        for row, handle, (reply, error) in zip(rows, handles, replies):
            desktops = [self._desktop(handle, d, now) for d in reply.desktops] if reply else []
            servers.append(ServerView(handle.env_id, handle.address, host_of(handle), handle.backend, row["status"],
                                      row["restarts"], reply.uptime_s if reply else None, error, desktops))
        return FleetView(self.envs, servers, read_work(self.envs), is_supervised(self.envs), time.time())

    def _desktop(self, handle, d, now: float) -> DesktopView:
        key = (handle.env_id, handle.address, d.desktop)
        before = self._last.get(key)
        self._last[key] = (d.steps, now)
        rate = (d.steps - before[0]) / (now - before[1]) if before and now > before[1] and d.steps >= before[0] else 0.0
        return DesktopView(d.desktop, d.healthy, d.problem, d.task_id, d.step, d.in_episode, d.episodes, d.steps,
                           d.replacements, d.reset_s, d.step_s, d.last_error, rate, d.restored, d.reset_in_place,
                           d.spare)

    def client(self, env_id: str) -> EnvClient:
        """A client of that server as the latest look saw it (the manifest is read again for one it did not)."""
        if env_id not in self._handles:
            self._read()
        handle = self._handles[env_id]  # KeyError: no such server in the fleet
        return EnvClient(handle.address, handle.token)

    def close(self) -> None:
        self._pool.shutdown(cancel_futures=True)


def _health(handle):
    """(Health reply, "") or (None, why not)."""
    client = EnvClient(handle.address, handle.token)
    try:
        return client.health(timeout_s=HEALTH_TIMEOUT_S), ""
    except EnvError as e:
        return None, str(e)
    finally:
        client.close()
