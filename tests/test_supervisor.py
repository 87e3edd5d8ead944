"""spawn-envs' supervisor on real local servers: a crashed server is restarted under its id."""

from __future__ import annotations

import os
import signal

import pytest

from computerrl.envs.backends.local import LocalBackend
from computerrl.envs.manifest import read_manifest, write_manifest
from computerrl.envs.supervisor import HEALTHY, Supervisor

pytestmark = pytest.mark.desktop


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
