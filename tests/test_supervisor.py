"""spawn-envs' supervisor: a crashed server is restarted under its id, and not in a tight loop."""

from __future__ import annotations

import os
import signal
import time

import pytest

from computerrl.envs.backends.local import LocalBackend
from computerrl.envs.manifest import read_manifest, write_manifest
from computerrl.envs.supervisor import HEALTHY, Supervisor


class FailingBackend:
    """A backend whose servers never start (a missing image, a full disk…)."""

    def __init__(self):
        self.starts = 0

    def start(self, env_id, *, desktops=1):
        self.starts += 1
        raise RuntimeError("no desktop for you")

    def stop(self, handle):
        pass

    def alive(self, handle):
        return False


def test_a_server_that_keeps_failing_is_restarted_once_per_grace_period():
    backend = FailingBackend()
    sup = Supervisor(backend, 1, unhealthy_grace_s=0.5)
    sup.start_all()
    assert backend.starts == 1 and sup.status["env-000"] == "failed: no desktop for you"
    sup.check()
    sup.check()  # right after a restart: backing off
    assert backend.starts == 2 and sup.restarts["env-000"] == 1
    assert sup.status["env-000"] == "failed: no desktop for you"  # the reason stays visible
    time.sleep(0.6)
    sup.check()
    assert backend.starts == 3


@pytest.mark.desktop
def test_a_crashed_server_is_restarted_and_the_manifest_follows(tmp_path):
    sup = Supervisor(LocalBackend(tmp_path / "state"), 1, start_timeout_s=120)
    try:
        sup.start_all()
        assert sup.status == {"env-000": HEALTHY}
        old = sup.handles["env-000"]
        os.killpg(old.detail["pid"], signal.SIGKILL)
        assert sup.check(restart=True)
        new = sup.handles["env-000"]
        assert sup.status["env-000"] == HEALTHY and sup.restarts["env-000"] == 1
        assert new.address != old.address and sup.backend.alive(new)
        write_manifest(tmp_path, [new], sup.status, sup.restarts)
        handles, status = read_manifest(tmp_path)
        assert handles[0].address == new.address and status == {"env-000": HEALTHY}
    finally:
        sup.stop_all()
    assert sup.status == {"env-000": "stopped"} and not sup.backend.alive(new)
