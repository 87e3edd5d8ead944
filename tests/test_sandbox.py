"""The sandbox, tried from inside as an agent and a task file would: what runs there cannot touch the host.

One env server with two real desktops; the probes run through the agent's own actions (a terminal
and typed commands) and through task `execute` steps, and the test reads what they wrote.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import computerrl
from conftest import act, home_of, descendants, wait_until
from computerrl.envs.fleet.pool import wait_healthy
from computerrl.envs.service.client import DesktopEnv, EnvClient, EnvError
from computerrl.envs.service.server import EnvServer

pytestmark = pytest.mark.desktop
PROJECT = Path(computerrl.__file__).resolve().parent
SANDBOX_PROCESSES = {"bwrap", "python3", "dbus-daemon", "openbox", "at-spi2-registr", "soffice.bin", "xterm", "bash",
                     "sh", "ps", "sort", "tr", "sleep", "dconf-service"}


@pytest.fixture(scope="module")
def two(tmp_path_factory):
    cache = tmp_path_factory.mktemp("cache")
    (cache / "a.txt").write_text("from the cache\n")
    (cache / "index.json").write_text('{"http://example.test/a.txt": "a.txt"}')
    srv = EnvServer(desktops=2, workdir=tmp_path_factory.mktemp("sandboxed"), settle_s=0.2, file_cache=cache).start()
    client = EnvClient(f"127.0.0.1:{srv.port}", timeout_s=90)
    assert wait_healthy(client, 180) == ""
    yield srv, client
    client.close()
    srv.stop()


def probe_script(srv: EnvServer) -> str:
    """Shell lines that try what an escaping agent would, one `name=answer` line each."""
    other_home = home_of(srv.slots[1].desktop)
    return "; ".join([
        "touch /usr/probe 2>/dev/null && echo usr=written || echo usr=refused",
        "touch /etc/probe 2>/dev/null && echo etc=written || echo etc=refused",
        "touch /probe 2>/dev/null && echo root=written || echo root=refused",
        "touch ~/probe-home && echo home=written || echo home=refused",
        f"ls {PROJECT} >/dev/null 2>&1 && echo project=visible || echo project=hidden",
        f"ls {srv.workdir} >/dev/null 2>&1 && echo state=visible || echo state=hidden",
        f"ls {other_home} >/dev/null 2>&1 && echo other_home=visible || echo other_home=hidden",
        "cat /etc/shadow >/dev/null 2>&1 && echo shadow=read || echo shadow=refused",
        f"kill -9 {os.getpid()} 2>/dev/null && echo kill_server=done || echo kill_server=failed",
        f"test -e /proc/{os.getpid()}/environ && echo server_proc=visible || echo server_proc=hidden",
        "echo processes=$(ps -eo comm= | sort -u | tr '\\n' ,)",
        "echo uid=$(id -u) user=$(id -un) home_dir=$HOME",
        "echo python=$(which python3)",
        "python3 -c 'import grpc' 2>/dev/null && echo project_packages=importable || echo project_packages=absent",
        "echo sudo_uid=$(echo password | sudo -S id -u 2>/dev/null)",
        "echo password | sudo -S touch /etc/sudo-probe 2>/dev/null && echo sudo_etc=written || echo sudo_etc=refused",
        "echo wrong | sudo -S id -u >/dev/null 2>&1 && echo sudo_wrong=accepted || echo sudo_wrong=refused",
        f"python3 -c \"import socket; socket.create_connection(('127.0.0.1', {srv.port}), 2)\" 2>/dev/null "
        "&& echo server_port=reachable || echo server_port=unreachable",
        "setsid env -i sleep 777 >/dev/null 2>&1 < /dev/null &",
    ])


def answers(text: str) -> dict[str, str]:
    return dict(part.split("=", 1) for line in text.splitlines() for part in line.split() if "=" in part)


def assert_sealed(a: dict[str, str], srv: EnvServer) -> None:
    assert a["usr"] == a["etc"] == a["root"] == "refused"  # the system is read-only
    assert a["home"] == "written"  # the agent's own home is its to write
    assert a["project"] == a["state"] == a["other_home"] == "hidden"
    assert a["shadow"] == "refused"
    assert a["kill_server"] == "failed" and a["server_proc"] == "hidden"
    assert set(a["processes"].strip(",").split(",")) <= SANDBOX_PROCESSES, a["processes"]  # nothing of the host
    assert a["uid"] == "1000" and a["user"] == "user" and a["home_dir"] == "/home/user"
    assert a["python"] == "/usr/bin/python3"  # Debian's, never the project's virtualenv
    assert a["project_packages"] == "absent"
    assert a["sudo_uid"] == "0" and a["sudo_etc"] == "refused" and a["sudo_wrong"] == "refused"
    assert a["server_port"] == "unreachable"  # no network by default, not even the host's loopback
    assert not Path("/etc/sudo-probe").exists() and not Path("/usr/probe").exists()


def sandbox_sleepers(srv: EnvServer) -> list[int]:
    """Host pids of the `sleep 777` the probe left running, in any desktop."""
    roots = [s.desktop.sandbox.proc.pid for s in srv.slots]
    return [p for p in descendants(roots) if _cmdline(p) == [b"sleep", b"777"]]


def _cmdline(pid: int) -> list[bytes]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[:-1]
    except OSError:
        return []


def test_an_agent_in_the_terminal_cannot_reach_the_host(two):
    srv, client = two
    env = DesktopEnv(client, 0, max_steps=50)
    env.reset()
    act(env, "Agent.open_app('terminal')")
    script = probe_script(srv).replace("\\", "\\\\").replace("'", "\\'")  # as a Python string literal
    act(env, f"Agent.type(text='( {script} ) > ~/probe.txt 2>&1; echo done >> ~/probe.txt', enter=True)")
    out = home_of(srv.slots[0].desktop) / "probe.txt"
    assert wait_until(lambda: out.exists() and "done" in out.read_text(), timeout_s=60), out.read_text()
    assert_sealed(answers(out.read_text()), srv)
    # On the host, what the agent runs is an unprivileged user, never root.
    sleepers = wait_until(lambda: sandbox_sleepers(srv))
    assert sleepers and all(os.stat(f"/proc/{p}").st_uid != 0 for p in sleepers)
    # A process hidden in a new session with a cleared environment does not outlive the episode.
    env.reset()
    assert wait_until(lambda: not sandbox_sleepers(srv), timeout_s=5)
    assert not (home_of(srv.slots[0].desktop) / "probe.txt").exists()


def test_task_commands_run_in_the_sandbox(two):
    srv, client = two
    task = {"id": "probe", "instruction": "nothing", "config": [
        {"type": "execute", "parameters": {"command": ["bash", "-c", f"( {probe_script(srv)} ) > /home/user/probe.txt"]}},
        {"type": "execute", "parameters": {"command": "mkdir /home/test1"}},  # OSWorld's os/5812b315 does this
    ], "evaluator": {"func": "exact_match", "result": {"type": "vm_command_line", "command": "cat /home/user/probe.txt"},
                     "expected": {"type": "rule", "rules": {"expected": "x"}}}}
    env = DesktopEnv(client, 1, max_steps=5)
    _, info = env.reset(options={"task": task})
    assert_sealed(answers((home_of(srv.slots[1].desktop) / "probe.txt").read_text()), srv)
    assert not Path("/home/test1").exists()
    # The failed mkdir is reported with Reset's reply, not silently ignored.
    assert any("mkdir /home/test1" in n and "exited with code 1" in n and "Read-only" in n
               for n in info["setup_notes"]), info["setup_notes"]


def test_files_come_only_from_the_cache_or_the_task_folder(two, tmp_path):
    srv, client = two

    def task(steps, getter=None):
        return {"id": "files", "instruction": "x", "config": steps,
                "evaluator": {"func": "exact_match", "result": getter or {"type": "vm_file", "path": "/home/user/a"},
                              "expected": {"type": "rule", "rules": {"expected": "x"}}}}

    env = DesktopEnv(client, 0, max_steps=5)
    env.reset(options={"task": task([{"type": "download", "parameters": {"files": [
        {"url": "http://example.test/a.txt", "path": "/home/user/a.txt"}]}}])})
    assert (home_of(srv.slots[0].desktop) / "a.txt").read_text() == "from the cache\n"
    for steps, getter, named in (
        ([{"type": "download", "parameters": {"files": [{"url": "http://example.test/missing.xlsx",
                                                          "path": "/home/user/m.xlsx"}]}}], None,
         "http://example.test/missing.xlsx"),
        ([], {"type": "cloud_file", "path": "http://example.test/gold.docx"}, "http://example.test/gold.docx"),
        ([{"type": "download", "parameters": {"files": [{"url": "file:///etc/hostname", "path": "/home/user/h"}]}}],
         None, "file:///etc/hostname"),
        ([{"type": "upload_file", "parameters": {"files": [{"local_path": "/etc/hostname", "path": "/home/user/h"}]}}],
         None, "/etc/hostname"),
    ):
        with pytest.raises(EnvError, match="FAILED_PRECONDITION") as e:
            env.reset(options={"task": task(steps, getter)})
        assert named in str(e.value)
    # The task's own folder is fine, for file:// and relative upload paths alike.
    (tmp_path / "input.txt").write_text("mine\n")
    env.reset(options={"task": task([{"type": "upload_file", "parameters": {"files": [
        {"local_path": "input.txt", "path": "~/Documents/input.txt"}]}}]), "task_dir": str(tmp_path)})
    assert (home_of(srv.slots[0].desktop) / "Documents" / "input.txt").read_text() == "mine\n"


def test_a_planted_link_cannot_make_the_server_read_host_files(two, tmp_path):
    from computerrl.tasks.getters import vm_file
    from computerrl.tasks.setup import Budget

    srv, client = two
    secret = home_of(srv.slots[1].desktop) / "secret.txt"  # another desktop's file, as the host sees it
    srv.slots[1].desktop.sandbox.write("/home/user/secret.txt", b"not yours")
    env = DesktopEnv(client, 0, max_steps=5)
    env.reset(options={"task": {"id": "link", "instruction": "x", "config": [{"type": "execute", "parameters": {
        "command": f"ln -s {secret} ~/stolen.txt; ln -s /etc/shadow ~/shadow"}}],
        "evaluator": {"func": "infeasible"}}})
    desktop = srv.slots[0].desktop
    # The server reads the desktop's files through the sandbox: links resolve in the desktop's view.
    budget = Budget.of(trusted=True)
    assert vm_file(desktop, {"path": "/home/user/stolen.txt"}, tmp_path, budget) is None
    assert vm_file(desktop, {"path": "~/shadow"}, tmp_path, budget) is None


X_SERVER_PROBE = """
import os, signal, socket, sys
port, abstract, state, server = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
def attempt(name, do):
    try:
        do(); print(name + "=done")
    except OSError:
        print(name + "=refused")
attempt("env_server", lambda: socket.create_connection(("127.0.0.1", int(port)), 2).close())
attempt("abstract", lambda: socket.socket(socket.AF_UNIX).connect("\\0" + abstract))
attempt("state", lambda: os.listdir(state))
attempt("signal", lambda: os.kill(server, 0))
"""


def test_what_the_x_server_runs_in_reaches_nothing_of_the_servers(two, tmp_path):
    """A stand-in for an X server the agent's clients took over (no flaw in Xvfb is at hand): a program in
    the very jail Xvfb runs in tries the env server on loopback, an abstract socket of the host, the
    server's state folder (the desktops' keeper sockets) and signalling the server. The same program
    outside reaches all four, so the test can fail."""
    import socket
    import subprocess

    from computerrl.envs.desktop.sandbox import x_server_jail

    srv, _ = two
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(f"\0computerrl-test-{os.getpid()}")
    listener.listen()
    (tmp_path / "x11").mkdir()
    (tmp_path / "xauth").write_bytes(b"")
    probe = ["/usr/bin/python3", "-c", X_SERVER_PROBE, str(srv.port), f"computerrl-test-{os.getpid()}",
             str(srv.workdir), str(os.getpid())]
    outside = answers(subprocess.run(probe, capture_output=True, text=True, timeout=30).stdout)
    assert outside == dict.fromkeys(("env_server", "abstract", "state", "signal"), "done")
    jailed = subprocess.run(x_server_jail(tmp_path, tmp_path / "xauth") + probe, capture_output=True, text=True,
                            timeout=30)
    assert answers(jailed.stdout) == dict.fromkeys(("env_server", "abstract", "state", "signal"), "refused"), \
        jailed.stdout + jailed.stderr
    listener.close()
    # And the desktops' own X servers run in it: their root shows neither the state folder nor the project.
    xvfbs = [p for p in descendants([s.desktop._xvfb.pid for s in srv.slots])
             if Path(f"/proc/{p}/comm").read_text().strip() == "Xvfb"]
    assert len(xvfbs) == 2
    assert all(not Path(f"/proc/{p}/root{where}").exists() for p in xvfbs for where in (srv.workdir, PROJECT))
    assert all(Path(f"/proc/{p}/root/usr/bin/Xvfb").exists() for p in xvfbs)  # the path is read as it sees it
