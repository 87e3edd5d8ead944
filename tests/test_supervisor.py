"""spawn-envs' supervisor: a crashed server is restarted under its id, and not in a tight loop."""

from __future__ import annotations

import os
import signal
import time

import pytest

from computerrl.envs.fleet.backends.local import LocalBackend
from computerrl.envs.fleet.manifest import read_manifest, write_manifest
from computerrl.envs.fleet.manifest import HEALTHY
from computerrl.envs.fleet.supervisor import Supervisor


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


def test_a_fleet_whose_servers_never_started_is_read_and_stopped(tmp_path, capsys):
    from computerrl.stages.spawn_envs import SpawnEnvsConfig, run

    sup = Supervisor(FailingBackend(), 2)
    sup.start_all()
    write_manifest(tmp_path, *sup.manifest(), sup.restarts)  # no server has a handle: a manifest of no rows
    assert read_manifest(tmp_path) == ([], {})
    assert run(SpawnEnvsConfig(out=tmp_path, stop=True)) == 0
    assert "stopped already" in capsys.readouterr().out


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


def test_scaling_takes_the_lowest_free_ids_and_removing_forgets_a_server_with_a_failing_backend():
    sup = Supervisor(FailingBackend(), 1)
    sup.start_all()
    assert sup.command("scale", count=3) == "3 servers (2 started, 2 of them not healthy)" and sup.ids == ["env-000", "env-001", "env-002"]
    sup.command("remove", "env-001")
    assert sup.ids == ["env-000", "env-002"] and "env-001" not in sup.status
    sup.command("scale", count=3)
    assert sup.ids == ["env-000", "env-001", "env-002"] and sup.restarts["env-001"] == 0
    sup.command("scale", count=1)
    assert sup.ids == ["env-000"]  # the highest ids go first
    for bad in (lambda: sup.command("remove", "env-000"), lambda: sup.command("scale", count=0),
                lambda: sup.command("drain", "env-007"), lambda: sup.command("explode", "env-000"),
                lambda: sup.command("scale", count=11)):  # from 1: at most 2 × 1 + 8
        with pytest.raises(ValueError):
            bad()
    assert sup.ids == ["env-000"]


def test_control_commands_are_taken_once_and_in_the_order_sent(tmp_path):
    from computerrl.envs.fleet import control

    control.send(tmp_path, "drain", env_id="env-001")
    control.send(tmp_path, "scale", count=4)
    assert control.take(tmp_path) == [{"action": "drain", "env_id": "env-001"}, {"action": "scale", "count": 4}]
    assert control.take(tmp_path) == []


def test_work_cards_show_what_plays_on_a_fleet_until_it_ends_or_its_process_dies(tmp_path):
    import json
    import subprocess

    from computerrl.envs.fleet.work import WORK_DIR, WorkCard, read_work

    with WorkCard(tmp_path, "eval", "runs/eval-bc", total=96) as card:
        card.update(played=3, success=2, steps=17, aborted=0)
        [seen] = read_work(tmp_path)
        assert (seen["stage"], seen["out"], seen["total"], seen["played"], seen["success"]) == \
            ("eval", "runs/eval-bc", 96, 3, 2)
    assert read_work(tmp_path) == []
    dead = subprocess.Popen(["true"])  # a process that has exited: its pid names nobody now
    dead.wait()
    card = {"stage": "rollout", "out": "x", "pid": dead.pid, "started": 0.0, "total": 1, "played": 0, "success": 0,
            "aborted": 0, "steps": 0}
    (tmp_path / WORK_DIR / "rollout-1.json").write_text(json.dumps(card))
    (tmp_path / WORK_DIR / "eval-2.json").write_text(json.dumps({**card, "pid": os.getpid(), "played": "<b>"}))
    assert read_work(tmp_path) == []  # neither a card left by a killed run nor one that is not ours
