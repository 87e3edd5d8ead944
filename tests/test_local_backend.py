"""The local backend: stale pids are never signalled; every server gets its own token and folder."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import descendants
from computerrl.envs.fleet.backends.base import EnvHandle
from computerrl.envs.fleet.backends.local import TOKEN_ENV, LocalBackend


def test_a_stale_pid_naming_another_process_is_not_killed(tmp_path):
    # After a crash or a reboot the manifest's pid may name an unrelated session leader.
    bystander = subprocess.Popen(["sleep", "60"], start_new_session=True)
    state = tmp_path / "env-000-abc123"
    state.mkdir()
    handle = EnvHandle("env-000", "127.0.0.1:1", "local", detail={"pid": bystander.pid, "workdir": str(state)})
    backend = LocalBackend(tmp_path)
    try:
        assert not backend.alive(handle)
        backend.stop(handle)
        assert bystander.poll() is None, "stop() killed a process that is not an env server"
        assert not state.exists()  # the dead server's state is still cleaned up
    finally:
        bystander.kill()
        bystander.wait()


@pytest.mark.desktop
def test_each_start_gets_its_own_token_and_state_folder(tmp_path):
    from computerrl.envs.service.client import EnvClient, EnvError

    backend = LocalBackend(tmp_path)
    first, second = backend.start("env-000"), backend.start("env-000")  # e.g. a restart under the same id
    try:
        assert first.token and second.token and first.token != second.token
        assert first.detail["workdir"] != second.detail["workdir"]
        pid = first.detail["pid"]
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            assert first.token.encode() not in f.read()  # `ps` must not show it
        with open(f"/proc/{pid}/environ", "rb") as f:
            assert f"{TOKEN_ENV}={first.token}".encode() in f.read().split(b"\0")
        anonymous, client = EnvClient(first.address), EnvClient(first.address, first.token)
        with pytest.raises(EnvError, match="UNAUTHENTICATED"):  # enforced on loopback too
            anonymous.health(timeout_s=10)
        assert client.health(timeout_s=10).pid == pid
        anonymous.close()
        client.close()
    finally:
        backend.stop(first)
        backend.stop(second)
    for h in (first, second):
        assert not backend.alive(h) and not Path(h.detail["workdir"]).exists()


def test_servers_started_by_a_desktop_serving_process_keep_their_own_x_cookies(tmp_path):
    # A process serving desktops hands $XAUTHORITY to the servers it starts. Were they to write their
    # cookies into that same file, each rewrite would drop the others' displays: screenshots of the
    # desktops of all but the last to write failed with "Cannot connect to display".
    script = ("import os, sys; from computerrl.envs.desktop.x11 import grant; grant(sys.argv[1], bytes(16)); "
              "path = os.environ['XAUTHORITY']; print(path, open(path, 'rb').read().count(b'MIT-MAGIC-COOKIE-1'))")
    from computerrl.envs.desktop.x11 import grant

    grant(":97", bytes(16))
    parents = Path(os.environ["XAUTHORITY"]).read_bytes()
    children = [subprocess.run([sys.executable, "-c", script, display], capture_output=True, text=True,
                               check=True).stdout.split() for display in (":98", ":99")]
    assert Path(os.environ["XAUTHORITY"]).read_bytes() == parents
    assert len({*(path for path, _ in children), os.environ["XAUTHORITY"]}) == 3
    assert all(cookies == "2" for _, cookies in children)  # its own display (for local and any host)
    assert not any(Path(path).exists() for path, _ in children)  # each removed its file on exit
    grant(":97", None)


def memory_cgroup(pid: int) -> str:
    """The v1 memory cgroup (or v2's one) a process is in, as /proc names it."""
    lines = Path(f"/proc/{pid}/cgroup").read_text().splitlines()
    return next((line.split(":", 2)[2] for line in lines if "memory" in line.split(":")[1].split(",")), None) \
        or next(line.split(":", 2)[2] for line in lines if line.startswith("0::"))


@pytest.mark.desktop
@pytest.mark.skipif(os.geteuid() != 0, reason="a cgroup of its own needs root")
def test_a_server_runs_under_its_own_memory_cap_beside_its_desktops(tmp_path):
    from computerrl.envs.service.client import EnvClient
    from computerrl.envs.fleet.pool import wait_healthy

    backend = LocalBackend(tmp_path, server_args=("--server-memory-mb", "768"))
    handle = backend.start("env-000")
    try:
        client = EnvClient(handle.address, handle.token)
        assert wait_healthy(client, 120) == ""
        pid = handle.detail["pid"]
        own = memory_cgroup(pid)
        assert own.endswith(f"/computerrl-{pid}-server"), own
        limit = next(p for p in (Path("/sys/fs/cgroup/memory") / own.lstrip("/") / "memory.limit_in_bytes",
                                 Path("/sys/fs/cgroup") / own.lstrip("/") / "memory.max") if p.exists())
        assert int(limit.read_text()) == 768 << 20
        # Its desktops' processes are in cgroups of their own, beside the server's, not counted in it.
        desktop = [p for p in descendants([pid]) if Path(f"/proc/{p}/comm").read_text().strip()
                   in ("Xvfb", "dbus-daemon", "openbox")]
        assert len(desktop) >= 4 and all(not memory_cgroup(p).startswith(own) for p in desktop)
        client.close()
    finally:
        backend.stop(handle)
