"""The pool over real local env servers: leasing, and replacing a server that died."""

from __future__ import annotations

import json
import os
import signal

import pytest

from computerrl.envs.fleet.backends.base import make_backend
from computerrl.envs.fleet.pool import EnvPool, wait_healthy
from computerrl.envs.service.client import EnvClient
from computerrl.play.episode import play
from computerrl.play.scripted import ScriptedPolicy, calc_episode, response

pytestmark = pytest.mark.desktop


@pytest.fixture
def pool(tmp_path):
    backend = make_backend("local", workdir=tmp_path)
    handle = backend.start("env-000")
    client = EnvClient(handle.address, handle.token)
    assert wait_healthy(client, 120) == ""
    client.close()
    p = EnvPool([handle], backend, call_timeout_s=30)
    yield p
    p.close()
    for h in p.handles.values():
        backend.stop(h)
        assert not backend.alive(h)


def test_scripted_episode_runs_through_the_pool(pool):
    with pool.lease(timeout_s=5) as env:
        t = play(env, ScriptedPolicy(calc_episode("Pooled 7")), {})
    assert not t.aborted and len(t.rows) == 7 and all(r["action_valid"] for r in t.rows) and t.rows[-1]["done"]
    assert any("Pooled 7" in json.loads(r["observation"])["a11y_tree"] for r in t.rows)


def test_a_dead_server_aborts_the_episode_and_is_replaced(pool):
    old = pool.handles["env-000"]
    with pool.lease(timeout_s=5) as env:
        env.reset()
        os.killpg(old.detail["pid"], signal.SIGKILL)  # the server and all its desktop processes
        _, reward, terminated, truncated, info = env.step(response("Agent.open_app('calc')"))
        assert info["aborted"] and truncated and not terminated and reward == 0.0
    assert pool.replaced == 1
    new = pool.handles["env-000"]
    assert new.address != old.address and pool.backend.alive(new)
    with pool.lease(timeout_s=5) as env:
        t = play(env, ScriptedPolicy(calc_episode("after the crash")), {})
    assert not t.aborted and t.rows[-1]["done"]


def test_lease_times_out_when_every_desktop_is_taken(pool):
    with pool.lease(timeout_s=5):
        with pytest.raises(TimeoutError, match="no free desktop"):
            with pool.lease(timeout_s=0.2):
                pass
