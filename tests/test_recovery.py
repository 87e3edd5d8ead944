"""What keeps a fleet serving when a desktop goes bad: a Reset that fails rebuilds the desktop,
Health says when one cannot reset, the pool stops leasing a desktop that keeps losing
episodes, and bad task files are answered clearly, within the client's deadline, leaving
nothing behind."""

from __future__ import annotations

import time

import grpc
import pytest

from conftest import home_of
from computerrl.envs.desktop import desktop as desktop_module
from computerrl.envs.fleet.backends.base import EnvHandle
from computerrl.envs.fleet.pool import MAX_LOST_IN_A_ROW, EnvPool, wait_healthy
from computerrl.envs.service.client import DesktopEnv, EnvClient, EnvError, EnvLost
from computerrl.envs.service.proto import env_pb2
from computerrl.envs.service.server import EnvServer
from computerrl.play.episode import play
from computerrl.play.scripted import ScriptedPolicy, calc_episode, response
from computerrl.tasks import setup

pytestmark = pytest.mark.desktop


@pytest.fixture
def served(tmp_path):
    """An in-process server with one desktop: the tests break it from the host, as a failure would."""
    srv = EnvServer(desktops=1, workdir=tmp_path / "server", settle_s=0.1).start()
    client = EnvClient(f"127.0.0.1:{srv.port}", timeout_s=90)
    assert wait_healthy(client, 120) == ""
    yield srv, client
    client.close()
    srv.stop()


def test_a_reset_that_breaks_on_a_live_desktop_rebuilds_it(served, monkeypatch):
    srv, client = served
    real_reset, broken = desktop_module.Desktop.reset, {"times": 1}

    def reset(self):  # stands for the UNO DisposedException a hijacked office pipe used to cause
        if broken["times"]:
            broken["times"] -= 1
            raise RuntimeError("DisposedException")
        real_reset(self)

    monkeypatch.setattr(desktop_module.Desktop, "reset", reset)
    before = srv.slots[0].replacements
    obs = client.reset(0)  # the desktop is rebuilt and the second attempt serves the episode
    assert obs.episode and srv.slots[0].replacements == before + 1
    broken["times"] = 10  # now it breaks every time: the episode is lost, and Health says why
    with pytest.raises(EnvLost, match="could not reset .*DisposedException"):
        client.reset(0)
    health = client.health()
    assert not health.healthy and "cannot reset: RuntimeError: DisposedException" in health.desktops[0].problem
    broken["times"] = 0
    assert client.rebuild(0, "fixed").healthy and client.health().healthy


def test_a_desktop_that_keeps_losing_episodes_is_rebuilt_then_set_aside(served, monkeypatch):
    srv, client = served
    real_reset, broken = desktop_module.Desktop.reset, {"times": 0}

    def reset(self):  # stands for a desktop that cannot reset (the office's pipe hijack used to do it)
        if broken["times"]:
            broken["times"] -= 1
            raise RuntimeError("DisposedException")
        real_reset(self)

    monkeypatch.setattr(desktop_module.Desktop, "reset", reset)
    pool = EnvPool([EnvHandle("env-000", f"127.0.0.1:{srv.port}", "local")], call_timeout_s=60)

    def lose_one():
        with pool.lease(timeout_s=30) as env:
            with pytest.raises(EnvLost):
                env.reset()

    try:
        # Its first Reset fails twice (then its rebuild's own check): the desktop is out until the
        # back-off ends, so the next Resets are lost at once; the third loss in a row has the pool ask
        # for a fresh desktop, which now resets.
        broken["times"] = 2
        for _ in range(MAX_LOST_IN_A_ROW):
            lose_one()
        assert pool.lost_in_a_row[("env-000", 0)] == 0 and not pool.set_aside
        with pool.lease(timeout_s=30) as env:
            assert not play(env, ScriptedPolicy(calc_episode("fresh")), {}).aborted
        broken["times"] = 10 ** 6  # now nothing it does can reset it: set aside
        for _ in range(MAX_LOST_IN_A_ROW):
            lose_one()
        assert pool.set_aside == {("env-000", 0)}
        with pytest.raises(EnvError, match="no desktop of the pool is left"):
            with pool.lease(timeout_s=30):
                pass
    finally:
        pool.close()


def test_a_task_nested_too_deeply_is_named(served):
    _, client = served
    request = env_pb2.ResetRequest(desktop=0, task_json="[" * 100_000 + "]" * 100_000)
    with pytest.raises(grpc.RpcError) as e:
        client._stub.Reset(request, timeout=30)
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "nested too deeply" in e.value.details()


def test_setup_sleeps_end_within_the_budget_and_a_failed_setup_leaves_nothing(served, monkeypatch):
    srv, client = served
    monkeypatch.setattr(setup, "SETUP_BUDGET_S", 4.0)  # 40 s by default: the test would take that long
    env = DesktopEnv(client, 0)
    sleepy = {"id": "sleepy", "instruction": "x", "evaluator": {"func": "infeasible"},
              "config": [{"type": "execute", "parameters": {"command": "touch ~/left-behind; sleep 300 >/dev/null 2>&1 &",
                                                            "shell": True}},
                         *[{"type": "sleep", "parameters": {"seconds": 30}}] * 5]}
    start = time.monotonic()
    with pytest.raises(EnvError, match="FAILED_PRECONDITION: task setup failed: the task's steps ran past"):
        env.reset(options={"task": sleepy})
    assert time.monotonic() - start < 4.0 + 10.0  # the budget, and a clean reset after it
    assert not (home_of(srv.slots[0].desktop) / "left-behind").exists()
    running = srv.slots[0].desktop.sandbox.run(["ps", "-eo", "args="], env={"PATH": "/usr/bin:/bin"}).stdout
    assert "sleep 300" not in running, running
    assert client.health().healthy
