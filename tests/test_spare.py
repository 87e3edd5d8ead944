"""Resets that swap in a pristine spare desktop (`--reset spare`, envs/service/spare.py), tried as an agent would:
what it sets in the X server and on the buses is gone after a reset, a spare that broke while it waited is never
used, and how each reset went is counted where the fleet is watched. (That a reset waits for the spare being built
rather than reset in place: bench_envs' smoke test, whose back-to-back resets all swap.)"""

from __future__ import annotations

import subprocess

import pytest

from conftest import act, home_of, wait_until
from computerrl.bench.bench_envs import resets_by_spare
from computerrl.envs.fleet.pool import wait_healthy
from computerrl.envs.service.client import DesktopEnv, EnvClient
from computerrl.envs.service.server import EnvServer

pytestmark = pytest.mark.desktop


@pytest.fixture(scope="module")
def spared(tmp_path_factory):
    srv = EnvServer(desktops=1, workdir=tmp_path_factory.mktemp("spared"), reset="spare").start()
    client = EnvClient(f"127.0.0.1:{srv.port}", timeout_s=120)
    assert wait_healthy(client, 180) == ""
    yield srv, client
    client.close()
    srv.stop()


def x_client(desktop, *argv: str) -> str:
    """What an X client run by the server (with the desktop's cookie) prints about the desktop's display."""
    return subprocess.run(argv, env=desktop.x_env, capture_output=True, text=True, timeout=30).stdout


PLANT = ("xprop -root -f CRL_PLANTED 8s -set CRL_PLANTED yes; setxkbmap fr; "
         "dbus-update-activation-environment LD_PRELOAD=/home/user/evil.so; echo done > ~/planted")


def test_what_the_agent_set_in_the_x_server_and_on_the_buses_is_gone_after_a_reset(spared):
    """A property on the root window and the keyboard's layout live in the X server, and the session bus keeps
    what it was told to give the services it starts: an in-place reset keeps all three (its X server and buses
    run on). After a reset with a spare, the episode's X server and buses are gone with its desktop."""
    srv, client = spared
    env = DesktopEnv(client, 0, max_steps=100)
    env.reset()
    played = srv.slots[0].desktop
    act(env, "Agent.open_app('terminal')")
    act(env, f"Agent.type(text={PLANT!r}, enter=True)")
    assert wait_until(lambda: (home_of(played) / "planted").exists(), 30)
    assert 'CRL_PLANTED(STRING) = "yes"' in x_client(played, "xprop", "-root", "CRL_PLANTED")  # it took
    assert "fr" in x_client(played, "setxkbmap", "-query")
    before = resets_by_spare(client)
    env.reset()
    fresh = srv.slots[0].desktop
    assert fresh is not played and resets_by_spare(client) == (before[0] + 1, before[1])
    assert "CRL_PLANTED(" not in x_client(fresh, "xprop", "-root", "CRL_PLANTED")  # no such property, or atom
    assert "fr" not in x_client(fresh, "setxkbmap", "-query")
    assert fresh.x_env["DISPLAY"] != played.x_env["DISPLAY"] and fresh.sandbox.pid != played.sandbox.pid
    assert not (home_of(fresh) / "planted").exists()  # a sandbox of its own: none of the episode's files
    # the desktop the episode ran on is closed behind it: its X server and sandbox are gone
    assert wait_until(lambda: played.sandbox is None or not played.sandbox.alive(), 60)
    assert fresh.office.running  # started before the episode, on its pristine profile
    obs, _ = act(env, "Agent.open_app('calc')")
    assert obs["focused_app"] == "calc"
    env.close()


def test_a_spare_that_broke_while_it_waited_is_never_used(spared):
    srv, client = spared
    slot = srv.slots[0]
    env = DesktopEnv(client, 0, max_steps=100)
    env.reset()
    assert wait_until(lambda: slot.spare.ready is not None, 120), slot.spare.problem
    broken = slot.spare.ready
    broken.kill()  # its X server and sandbox die: it is found dead when a reset would take it
    before = resets_by_spare(client)
    env.reset()
    assert slot.desktop is not broken and resets_by_spare(client) == (before[0], before[1] + 1)  # in place instead
    assert "broke while it waited" in client.health().desktops[0].spare
    assert wait_until(lambda: slot.spare.ready is not None, 120), slot.spare.problem  # another was built
    assert client.health().desktops[0].spare == ""
    env.reset()
    assert resets_by_spare(client) == (before[0] + 1, before[1] + 1)
    env.close()
