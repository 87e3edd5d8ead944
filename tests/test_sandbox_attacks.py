"""The ways through the sandbox that were found, each tried again as an agent would: with the
agent's own actions only (a terminal, typed commands, programs it writes there), on real desktops.

1. take over the keeper (copy its control socket, stop it, answer in its place) and forge a score;
2. from a desktop with network, reach another desktop's display (or the env server);
3. put a link in place of the office's pipe, so that the server, as root, connects elsewhere; take the
   pipe's path first and never answer; stop the office as it starts (each must end the episode as a
   failure, in time, never as a lost one);
4. fill the disk, fork without end, eat memory;
5. leave files behind for the next episode, anywhere the desktop can write.
And the desktop the agent wedges is rebuilt alone, the other desktops of its server carrying on.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import signal
import socket
import subprocess
import threading
import time

import pytest

from conftest import act, descendants, home_of, wait_until
from computerrl.envs.desktop.sandbox import Limits
from computerrl.envs.fleet.pool import wait_healthy
from computerrl.envs.service.client import DesktopEnv, EnvClient
from computerrl.envs.service.server import EnvServer
from computerrl.play.scripted import response

pytestmark = pytest.mark.desktop
CHUNK = 1500  # characters per Agent.type: the parser takes at most 2,000


@pytest.fixture(scope="module")
def two(tmp_path_factory):
    srv = EnvServer(desktops=2, workdir=tmp_path_factory.mktemp("attacked"), settle_s=0.2,
                    limits=Limits(processes=300, memory_mb=3072)).start()
    client = EnvClient(f"127.0.0.1:{srv.port}", timeout_s=90)
    assert wait_healthy(client, 180) == ""
    yield srv, client
    client.close()
    srv.stop()


@pytest.fixture
def env0(two):
    srv, client = two
    assert wait_healthy(client, 120) == ""  # a test before may have wedged a desktop on purpose
    env = DesktopEnv(client, 0, max_steps=100)
    yield env
    env.close()


def agent_runs(env: DesktopEnv, program: str, output: str, runner: str = "python3 ~/.p.py") -> None:
    """The agent writes `program` (Python) in its terminal, in base64 chunks it types, and starts it
    (`runner`) in the background with its output in ~/<output>."""
    blob = base64.b64encode(program.encode()).decode()
    act(env, "Agent.open_app('terminal')")
    for i in range(0, len(blob), CHUNK):
        act(env, f"Agent.type(text={f'echo -n {blob[i:i + CHUNK]} >> ~/.p.b64'!r}, enter=True)")
    line = f"base64 -d ~/.p.b64 > ~/.p.py && rm ~/.p.b64 && ({runner} > ~/{output} 2>&1 &)"
    act(env, f"Agent.type(text={line!r}, enter=True)")


def read_output(desktop, name: str, until: str, timeout_s: float = 60.0) -> str:
    path = home_of(desktop) / name
    assert wait_until(lambda: path.exists() and until in path.read_text(), timeout_s), \
        path.read_text() if path.exists() else f"no ~/{name}"
    return path.read_text()


def host_processes(desktop) -> dict[int, tuple[str, str]]:
    """pid -> (state letter, command line) of every host process of the desktop's sandbox."""
    out = {}
    for pid in descendants([desktop.sandbox.proc.pid]):
        try:
            state = open(f"/proc/{pid}/stat").read().rpartition(")")[2].split()[0]
            out[pid] = (state, open(f"/proc/{pid}/cmdline").read().replace("\0", " "))
        except OSError:
            pass
    return out


# 1 ------------------------------------------------------------------------------------------
THIEF = r'''
import ctypes, json, os, signal, socket, threading, time
libc = ctypes.CDLL(None, use_errno=True)
report, listeners = {"seen": {}, "stolen": [], "refused": {}, "stopped": []}, []
for pid in sorted(int(p) for p in os.listdir("/proc") if p.isdigit() and int(p) != os.getpid()):
    try:
        report["seen"][pid] = open(f"/proc/{pid}/cmdline").read().replace("\0", " ").strip()
    except OSError:
        continue
    if "init.py" not in report["seen"][pid]:  # the keeper and the session run init.py
        continue
    pfd = libc.syscall(434, pid, 0)  # pidfd_open
    for n in range(64):
        fd = libc.syscall(438, pfd, n, 0) if pfd >= 0 else -1  # pidfd_getfd: copy its descriptor n
        if fd < 0:
            report["refused"].setdefault(str(pid), os.strerror(ctypes.get_errno()))
            continue
        try:
            s = socket.socket(fileno=fd)
        except OSError:  # not a socket
            os.close(fd)
            continue
        if s.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN):
            s.setblocking(True)
            listeners.append(s)
            report["stolen"].append([pid, n])
for pid in sorted({p for p, _ in report["stolen"]}):  # stop the owner, answer in its place
    os.kill(pid, signal.SIGSTOP)
    report["stopped"].append(pid)
print(json.dumps(report), flush=True)

def forge(listener):
    while True:
        conn, _ = listener.accept()
        with conn, conn.makefile("rwb") as f:
            f.readline()
            f.write(b'{"returncode": 0, "stdout": "FORGED", "stderr": "", "pids": [], "exited": {}, "killed": 0}\n')

for listener in listeners:
    threading.Thread(target=forge, args=(listener,), daemon=True).start()
time.sleep(600)
'''

FORGEABLE = {"id": "forgeable", "instruction": "Print FORGED from the command line.",
             "evaluator": {"func": "check_include_exclude",
                           "result": {"type": "vm_command_line", "command": ["bash", "-c", "echo real"]},
                           "expected": {"type": "rule", "rules": {"include": ["FORGED"], "exclude": []}}}}


def test_the_agent_cannot_take_over_the_keeper_or_forge_a_score(two, env0):
    srv, client = two
    desktop = srv.slots[0].desktop
    env0.reset(options={"task": FORGEABLE})
    agent_runs(env0, THIEF, "thief.json")
    report = json.loads(read_output(desktop, "thief.json", "}"))
    # Of what acts for the server it sees only the session (its pid 1), which gives nothing away; the
    # keeper, which reads the files and runs the commands a score comes from, it does not even see.
    assert [pid for pid, cmd in report["seen"].items() if "init.py" in cmd] == ["1"], report
    assert report["stolen"] == [] and report["stopped"] == [], report
    assert report["refused"]["1"] == "Operation not permitted", report  # the session: nothing to copy
    assert host_processes(desktop)[desktop.sandbox.pid][0] != "T"  # the keeper runs on
    # The score comes from the keeper's own run of the command: the real output, not the thief's.
    _, reward, terminated, _, info = env0.step("```python\nAgent.exit(True)\n```")
    assert terminated and reward == 0.0 and info["score"] == 0.0, info
    assert client.health().healthy
    env0.reset()  # the thief does not survive the episode
    assert not any("/.p.py" in cmd for _, cmd in host_processes(desktop).values())


# 2 ------------------------------------------------------------------------------------------
NETWORK_PROBE = r'''
import json, os, socket, subprocess
out = {}
def xdotool(display):
    env = {**os.environ, "DISPLAY": display}
    return subprocess.run(["xdotool", "getmouselocation"], env=env, capture_output=True).returncode == 0
def reaches(address, family=socket.AF_INET):
    try:
        with socket.socket(family) as s:
            s.settimeout(3)
            s.connect(address)
            return s.recv(64).decode() or "connected"
    except OSError as e:
        return f"refused: {e.strerror}"
out["own_display"] = xdotool(os.environ["DISPLAY"])
out["other_display"] = xdotool(OTHER)
out["other_abstract"] = reaches("\0/tmp/.X11-unix/X" + OTHER[1:], socket.AF_UNIX)
out["server_loopback"] = reaches(("127.0.0.1", PORT))
out["server_host"] = reaches(("10.0.2.2", PORT))
out["outside"] = reaches((HOST, OUTSIDE)) if HOST else "no address"
out["interfaces"] = sorted(name for _, name in socket.if_nameindex())
print(json.dumps(out), flush=True)
'''


def host_address() -> str:
    """An address of this machine beyond loopback ("" when it has none)."""
    r = subprocess.run(["ip", "-4", "-o", "addr", "show", "scope", "global"], capture_output=True, text=True)
    return r.stdout.split()[3].split("/")[0] if r.returncode == 0 and r.stdout.split() else ""


def test_a_desktop_with_network_reaches_out_but_not_another_desktop_or_the_server(two, env0):
    srv, client = two
    other = srv.slots[1].desktop.x_env["DISPLAY"]
    outside = socket.socket()
    outside.bind(("0.0.0.0", 0))  # stands for the internet: reachable over this machine's own address
    outside.listen(8)
    threading.Thread(target=lambda: [c.sendall(b"hello from outside") or c.close()
                                     for c, _ in iter(outside.accept, None)], daemon=True).start()
    try:
        env0.reset(options={"task": {"id": "net", "instruction": "x", "network": True,
                                     "evaluator": {"func": "infeasible"}}})
        desktop = srv.slots[0].desktop
        assert desktop.network
        probe = NETWORK_PROBE.replace("OTHER", repr(other)).replace("PORT", str(srv.port)) \
            .replace("HOST", repr(host_address())).replace("OUTSIDE", str(outside.getsockname()[1]))
        agent_runs(env0, probe, "net.json")
        seen = json.loads(read_output(desktop, "net.json", "}"))
    finally:
        outside.close()
    assert seen["own_display"] and not seen["other_display"], seen
    assert seen["other_abstract"].startswith("refused"), seen  # another desktop's X is not even a socket away
    assert seen["server_loopback"].startswith("refused") and seen["server_host"].startswith("refused"), seen
    assert seen["interfaces"] == ["lo", "tap0"], seen  # a namespace of its own, never the host's
    if host_address():
        assert seen["outside"] == "hello from outside", seen
    # And from the host, a display admits only its own desktop's cookie.
    for auth in ("/nonexistent", srv.slots[0].desktop.x_env["XAUTHORITY"]):
        r = subprocess.run(["xdotool", "getmouselocation"], capture_output=True,
                           env={"PATH": os.environ["PATH"], "DISPLAY": other, "XAUTHORITY": auth})
        assert r.returncode != 0 and b"Can't open display" in r.stderr, r.stderr
    env0.reset()
    assert not srv.slots[0].desktop.network  # the next task without network gets none


# 3 ------------------------------------------------------------------------------------------
def test_a_link_in_place_of_the_office_pipe_is_never_followed(two, env0, tmp_path):
    srv, client = two
    trap = tmp_path / "trap.sock"  # a socket of the host's, where the agent wants the server to go
    connections = []
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(trap))
    listener.listen(8)
    threading.Thread(target=lambda: [connections.append(c) for c, _ in iter(listener.accept, None)],
                     daemon=True).start()
    # Replace the office's pipe, and any new one, for as long as the episode runs.
    swap = f"while true; do for p in /tmp/OSL_PIPE_*; do [ -L $p ] || ln -sfn {trap} $p; done; sleep 0.02; done &"
    desktop = srv.slots[0].desktop
    env0.reset()
    act(env0, "Agent.open_app('calc')")
    pipe = desktop.office.pipe_path
    act(env0, "Agent.open_app('terminal')")
    act(env0, f"Agent.type(text={swap!r}, enter=True)")
    assert wait_until(lambda: os.path.islink(f"/proc/{desktop.sandbox.pid}/root{pipe}"))
    with pytest.raises(Exception, match="not a socket of the desktop's user"):
        desktop.sandbox.open_socket(pipe)
    env0.reset()  # the office restarts (on a new pipe), the agent's loop is gone
    # And the office's start while the loop runs: the link is refused, never followed.
    act(env0, "Agent.open_app('terminal')")
    act(env0, f"Agent.type(text={swap!r}, enter=True)")
    act(env0, "Agent.wait()")
    env0.step("```python\nAgent.open_app('calc')\n```")  # fails, or wins the race: either way, no link taken
    env0.reset()
    act(env0, "Agent.open_app('calc')")
    obs, info = act(env0, "CalcTools.set_cell_value('A1', 'works')")
    assert info["exec_result"] == "Done" and desktop.office.pipe_path != pipe
    listener.close()
    assert connections == []  # never once did the server, as root, dial the agent's target
    assert client.health().healthy


SQUATTER = r'''
import os, socket, threading, time
# Read the office's pipe name off soffice's command line, take the path (first, or from soffice if late),
# accept every connection and never answer a byte.
taken = set()
def hold(listener):
    held = []
    while True:
        held.append(listener.accept()[0])
while True:
    for pid in os.listdir("/proc"):
        try:
            args = open(f"/proc/{pid}/cmdline").read().split("\0")
        except OSError:
            continue
        for arg in args:
            if arg.startswith("--accept=pipe,name=") and arg not in taken:
                path = "/tmp/OSL_PIPE_1000_" + arg.split("name=")[1].split(";")[0]
                s = socket.socket(socket.AF_UNIX)
                try:
                    s.bind(path)
                except OSError:
                    os.unlink(path)
                    s.bind(path)
                s.listen(64)
                taken.add(arg)
                print("took", path, flush=True)
                threading.Thread(target=hold, args=(s,), daemon=True).start()
    time.sleep(0.001)
'''


def test_an_office_pipe_the_agent_squats_ends_the_episode_as_a_failure_at_once(two, env0):
    """The agent's program takes the office's pipe before soffice does and never answers: the server
    sends it nothing, the episode fails at once (never lost past the client's deadline), and the desktop
    is rebuilt with the squatter killed."""
    srv, client = two
    env0.reset()
    agent_runs(env0, SQUATTER, "squat.log")
    act(env0, "Agent.wait()")
    before, started = srv.slots[0].replacements, time.monotonic()
    _, reward, terminated, _, info = env0.step("```python\nAgent.open_app('calc')\n```")
    assert time.monotonic() - started < 30, info
    assert terminated and reward == 0.0 and not info["aborted"] and "as a failure" in info["exec_result"], info
    assert "held by another process" in info["exec_result"], info
    assert wait_healthy(client, 60) == "" and srv.slots[0].replacements == before + 1
    env0.reset()  # a fresh desktop: the office answers again
    act(env0, "Agent.open_app('calc')")
    assert act(env0, "CalcTools.set_cell_value('A1', 'works')")[1]["exec_result"] == "Done"


STOPPER = r'''
import os, signal, time
# Stop every soffice.bin as soon as it exists: it never answers, however long the server waits. (By its name:
# its executable's link is not the agent's to read, the office running in a Landlock domain apart.)
while True:
    for pid in os.listdir("/proc"):
        try:
            if open(f"/proc/{pid}/comm").read().strip() == "soffice.bin":
                os.kill(int(pid), signal.SIGSTOP)
        except OSError:
            pass
    time.sleep(0.005)
'''


def test_an_office_the_agent_stops_while_it_starts_fails_the_episode_before_the_clients_deadline(two, env0):
    """Whatever a step waits on in the desktop, it answers before its client's deadline: past the deadline
    less the time to answer, the desktop is killed, the episode fails and the desktop is rebuilt."""
    srv, client = two
    hasty = EnvClient(f"127.0.0.1:{srv.port}", timeout_s=40)
    env = DesktopEnv(hasty, 0, max_steps=100)
    try:
        env.reset()
        agent_runs(env, STOPPER, "stopper.log")
        act(env, "Agent.wait()")
        started = time.monotonic()
        _, reward, terminated, _, info = env.step("```python\nAgent.open_app('calc')\n```")
        assert time.monotonic() - started < 40, info
        assert terminated and reward == 0.0 and not info["aborted"] and "as a failure" in info["exec_result"], info
        assert "ran past its deadline" in info["exec_result"], info
        assert wait_healthy(client, 60) == ""
    finally:
        env.close()
        hasty.close()


def peak_rss_mb_while(fn) -> float:
    """How far this process's resident memory rose above where it stood while `fn` ran (the env server
    here runs in the test's process)."""
    def status(key: str) -> int:
        with open("/proc/self/status") as f:
            return int(next(line.split()[1] for line in f if line.startswith(key)))

    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # the peak starts again from now
    before = status("VmRSS:")
    fn()
    return (status("VmHWM:") - before) / 1024


def test_a_huge_file_the_agent_leaves_is_scored_without_the_server_holding_it(two, env0, tmp_path):
    """Three vm_file reads of a 250 MB file the agent made: the server copies it out in pieces."""
    from computerrl.tasks.getters import vm_file
    from computerrl.tasks.setup import Budget

    srv, client = two
    env0.reset()
    act(env0, "Agent.open_app('terminal')")
    act(env0, "Agent.type(text='truncate -s 250M ~/big.bin', enter=True)")
    desktop = srv.slots[0].desktop
    assert wait_until(lambda: (home_of(desktop) / "big.bin").exists())
    copies = []

    def read_three():
        for i in range(3):
            copies.append(vm_file(desktop, {"path": "/home/user/big.bin", "dest": f"big{i}"}, tmp_path,
                                  Budget.of(trusted=True)))

    with srv.slots[0].lock:
        grew = peak_rss_mb_while(read_three)
    assert all(os.path.getsize(c) == 250 << 20 for c in copies)
    assert grew < 64, f"the server's memory rose by {grew:.0f} MB while it copied"


# 4 ------------------------------------------------------------------------------------------
HOG = r'''
import json, os, subprocess, sys
out = {}
out["fallocate"] = subprocess.run(["fallocate", "-l", "30G", os.path.expanduser("~/big")], capture_output=True).returncode
with open("/dev/shm/fill", "wb") as f:
    try:
        for _ in range(2048):
            f.write(b"\0" * (1 << 20))
            f.flush()
    except OSError as e:
        out["shm_error"] = e.strerror
out["shm_mb"] = os.path.getsize("/dev/shm/fill") >> 20
os.remove("/dev/shm/fill")
children = []
try:
    for _ in range(2000):
        children.append(subprocess.Popen(["sleep", "1000"]))
except OSError as e:
    out["fork_error"] = e.strerror
out["processes"] = len(children)
for c in children:
    c.kill()
    c.wait()
eat = subprocess.run([sys.executable, "-c", "x = bytearray(6 << 30); x[::4096] = b'1' * len(x[::4096])"])
out["eat_returncode"] = eat.returncode
print(json.dumps(out), flush=True)
'''


def test_filling_the_disk_forking_and_eating_memory_hit_the_desktop_not_the_host(two, env0):
    srv, client = two
    desktop, limits = srv.slots[0].desktop, srv.slots[0].desktop.limits
    free_before = shutil.disk_usage(srv.workdir).free
    env1 = DesktopEnv(client, 1, max_steps=100)
    env1.reset()
    env0.reset()
    agent_runs(env0, HOG, "hog.json")
    act(env1, "Agent.open_app('calc')")  # the other desktop goes on meanwhile
    hog = json.loads(read_output(desktop, "hog.json", "}", timeout_s=120))
    assert hog["fallocate"] != 0  # 30 GB do not fit in a home of limits.home_mb
    assert hog["shm_error"] == "No space left on device" and hog["shm_mb"] <= limits.shm_mb, hog
    assert hog["fork_error"] == "Resource temporarily unavailable", hog
    assert 0 < hog["processes"] < limits.processes, hog
    if os.geteuid() == 0:  # only root may cap memory (a cgroup): the CI runs as root
        assert desktop.cgroup is not None and hog["eat_returncode"] == -signal.SIGKILL, hog
    assert shutil.disk_usage(srv.workdir).free > free_before - (1 << 30)  # the host's disk did not fill
    assert client.health().healthy
    act(env1, "CalcTools.set_cell_value('A1', 'still here')")
    env1.close()


# 5 ------------------------------------------------------------------------------------------
PLANT = ("n=0; for d in $(find / \\( -path /proc -o -path /sys -o -path /dev/pts \\) -prune -o -type d -writable "
         "-print 2>/dev/null); do touch $d/planted-$n 2>/dev/null && n=$((n+1)); done; "
         "for f in /var/lib/desktop/logs/*.log; do echo planted >> $f; done; echo planted=$n > ~/planted.txt")
FIND = ["bash", "-c", "find / \\( -path /proc -o -path /sys \\) -prune -o -name 'planted-*' -print 2>/dev/null"]


def test_nothing_the_agent_leaves_survives_into_the_next_episode(two, env0):
    srv, client = two
    desktop = srv.slots[0].desktop
    env0.reset()
    act(env0, "Agent.open_app('writer')")  # the office runs: its profile and temporary files are there to plant in
    act(env0, "Agent.open_app('terminal')")
    act(env0, f"Agent.type(text={PLANT!r}, enter=True)")
    planted = int(read_output(desktop, "planted.txt", "planted=").split("=")[1])
    where = desktop.sandbox.run(FIND, env=desktop.env, trusted=True).stdout.split()
    assert planted == len(where) and planted >= 10, where
    for place in ("/home/user/", "/tmp/", "/dev/shm/", "/run/user/1000/", "/var/lib/desktop/lo-profile/"):
        assert any(p.startswith(place) for p in where), (place, where)
    env0.reset()
    assert desktop.sandbox.run(FIND, env=desktop.env, trusted=True).stdout.split() == []
    logs = desktop.sandbox.run(["bash", "-c", "cat /var/lib/desktop/logs/*.log"], env=desktop.env).stdout
    assert "planted" not in logs  # the logs the desktop's services keep open are emptied too
    act(env0, "Agent.open_app('writer')")  # the office starts again, from its pristine profile
    assert desktop.sandbox.run(FIND, env=desktop.env, trusted=True).stdout.split() == []


# wedged -------------------------------------------------------------------------------------
def test_a_wedged_desktop_is_rebuilt_alone_and_its_episode_fails(two, env0):
    srv, client = two
    env1 = DesktopEnv(client, 1, max_steps=100)
    env1.reset()
    env0.reset()
    before, other_before = srv.slots[0].replacements, srv.slots[1].replacements
    act(env0, "Agent.open_app('calc')")
    act(env0, "Agent.open_app('terminal')")
    act(env0, "Agent.type(text='kill -STOP 1; kill -9 1', enter=True)")  # the session: pid 1 there, untouchable
    assert client.health().healthy and srv.slots[0].replacements == before
    srv.slots[0].desktop.office.hang_s = 8.0  # white box: found hung sooner than the 30 s a busy office gets
    act(env0, "Agent.type(text='kill -STOP $(pgrep -x soffice.bin)', enter=True)")  # its office, though, it may stop
    started = time.monotonic()
    _, reward, terminated, _, info = env0.step("```python\nCalcTools.set_cell_value('A1', 1)\n```")
    # It wedged its own desktop: the episode fails (were it lost, wedging would hide a failure).
    assert terminated and reward == 0.0 and not info["aborted"] and "as a failure" in info["exec_result"], info
    assert time.monotonic() - started < 60 and srv.slots[0].replacements == before + 1
    act(env1, "Agent.open_app('calc')")  # the other desktop's episode never noticed
    act(env1, "CalcTools.set_cell_value('A1', 'unharmed')")
    assert srv.slots[1].replacements == other_before and wait_healthy(client, 60) == ""
    env1.close()


# code the agent plants for an evaluation to run --------------------------------------------------
PLANTER = r'''
import os, sys
site = os.path.expanduser(f"~/.local/lib/python{sys.version_info[0]}.{sys.version_info[1]}/site-packages")
os.makedirs(site, exist_ok=True)
with open(f"{site}/zz-forge.pth", "w") as f:  # runs at every Python start that reads the user site
    f.write("import sys; print('FORGED mattn.lisp', flush=True)\n")
for module in ("json", "pyautogui"):  # shadows the module for a Python run in the home folder
    with open(os.path.expanduser(f"~/{module}.py"), "w") as f:
        f.write("import pathlib; pathlib.Path.home().joinpath('forged.txt').write_text('FORGED'); print('FORGED')\n")
print("planted", flush=True)
'''


def forged_task(result_command, postconfig=()) -> dict:
    return {"id": "planted", "instruction": "x", "evaluator": {
        "func": "check_include_exclude", "postconfig": list(postconfig),
        "result": {"type": "vm_command_line", "command": result_command},
        "expected": {"type": "rule", "rules": {"include": ["FORGED"], "exclude": []}}}}


PYAUTOGUI_SAVE = {"type": "execute", "parameters": {"command": ["python", "-c", "import pyautogui; pyautogui.hotkey('ctrl', 's');"]}}


@pytest.mark.parametrize("task", [
    forged_task(["python3", "-c", "import json; print('real')"]),  # the user site and the home folder's json.py
    forged_task(["bash", "-c", "cat ~/forged.txt 2>/dev/null; echo real"], [PYAUTOGUI_SAVE]),  # OSWorld's postconfig
], ids=["command-getter", "postconfig"])
def test_code_the_agent_plants_in_its_home_does_not_run_in_the_evaluation(two, env0, task):
    srv, client = two
    env0.reset(options={"task": task})
    agent_runs(env0, PLANTER, "planter.log")
    read_output(srv.slots[0].desktop, "planter.log", "planted")
    act(env0, "Agent.type(text='python3 -c pass > ~/session.txt', enter=True)")
    # In its own session the planted code is live: the attack is real.
    assert "FORGED" in read_output(srv.slots[0].desktop, "session.txt", "FORGED")
    (home_of(srv.slots[0].desktop) / "forged.txt").unlink(missing_ok=True)  # what a run in the session left
    _, reward, terminated, _, info = env0.step("```python\nAgent.exit(True)\n```")
    assert terminated and reward == 0.0 and info["score"] == 0.0, info


def test_vscodes_extension_list_is_not_the_agents_to_print(two, env0):
    """`code --list-extensions` (envs/desktop/compat/bin/code, a Python program) in OSWorld's extension tasks."""
    if not os.path.exists("/usr/lib/computerrl/code-server/node_modules/.bin/code-server"):
        pytest.skip("VS Code (envs/desktop/install_code_server.sh) not installed")
    srv, client = two
    task = forged_task(["code", "--list-extensions", "|", "grep", "mattn.lisp"])
    task["evaluator"]["expected"]["rules"]["include"] = ["mattn.lisp"]
    env0.reset(options={"task": task})
    agent_runs(env0, PLANTER, "planter.log")
    read_output(srv.slots[0].desktop, "planter.log", "planted")
    _, reward, terminated, _, info = env0.step("```python\nAgent.exit(True)\n```")
    assert terminated and reward == 0.0, info  # nothing is installed


# an evaluation that runs the agent's code -----------------------------------------------------
def test_an_evaluation_script_the_agent_rewrote_cannot_touch_the_keeper_or_stay(two, env0):
    """OSWorld's os tasks score with `bash eval.sh`, a script in the agent's home: the agent may rewrite
    it, and the keeper then runs the agent's code. The keeper (pid 1 there) cannot be stopped or killed,
    and what the script leaves running is killed as the evaluation ends."""
    srv, client = two
    desktop = srv.slots[0].desktop
    task = {"id": "eval-sh", "instruction": "x",
            "config": [{"type": "execute", "parameters": {"command": "echo 'echo fine' > ~/eval.sh", "shell": True}}],
            "evaluator": {"func": "check_include_exclude",
                          "result": {"type": "vm_command_line", "command": "bash /home/user/eval.sh", "shell": True},
                          "expected": {"type": "rule", "rules": {"include": ["fine"], "exclude": []}}}}
    for payload in ("kill -STOP 1; kill -9 1", "(sleep 2; kill -STOP 1; kill -9 1) >/dev/null 2>&1 &",
                    "setsid sleep 120 &"):  # holds the command's output open: nothing waits for it
        env0.reset(options={"task": task})
        act(env0, "Agent.open_app('terminal')")
        act(env0, f"Agent.type(text={f'echo {payload!r} >> ~/eval.sh'!r}, enter=True)")
        before, started = srv.slots[0].replacements, time.monotonic()
        _, reward, terminated, _, info = env0.step("```python\nAgent.exit(True)\n```")
        assert time.monotonic() - started < 20, payload
        # The rewritten script still prints what the task wants: OSWorld's own weakness, not the sandbox's.
        assert terminated and not info["aborted"] and reward == 1.0, info
        time.sleep(3)  # past the sleeper's 2 s: it was killed with the evaluation
        assert host_processes(desktop)[desktop.sandbox.pid][0] != "T"  # the keeper runs on
        assert not any(cmd.startswith(("sleep 2", "sleep 120")) for _, cmd in host_processes(desktop).values())
        assert srv.slots[0].replacements == before and client.health().healthy


# an episode the agent would abort ------------------------------------------------------------
TRIVIAL = {"func": "check_include_exclude", "result": {"type": "vm_command_line", "command": "echo scored"},
           "expected": {"type": "rule", "rules": {"include": ["scored"], "exclude": []}}}  # any episode scores 1
TITLE_BLOAT = r'''
import ctypes
x = ctypes.CDLL("libX11.so.6")
x.XOpenDisplay.restype = ctypes.c_void_p
x.XDefaultRootWindow.argtypes, x.XDefaultRootWindow.restype = [ctypes.c_void_p], ctypes.c_ulong
x.XInternAtom.argtypes, x.XInternAtom.restype = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int], ctypes.c_ulong
x.XGetWindowProperty.argtypes = [ctypes.c_void_p, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_long, ctypes.c_long,
                                 ctypes.c_int, ctypes.c_ulong] + [ctypes.c_void_p] * 5
x.XChangeProperty.argtypes = [ctypes.c_void_p, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_int,
                              ctypes.c_int, ctypes.c_char_p, ctypes.c_int]
d = x.XOpenDisplay(None)
root = x.XDefaultRootWindow(d)
kind, fmt, n, after, data = ctypes.c_ulong(), ctypes.c_int(), ctypes.c_ulong(), ctypes.c_ulong(), ctypes.c_void_p()
x.XGetWindowProperty(d, root, x.XInternAtom(d, b"_NET_ACTIVE_WINDOW", 0), 0, 1, 0, 0, ctypes.byref(kind),
                     ctypes.byref(fmt), ctypes.byref(n), ctypes.byref(after), ctypes.byref(data))
terminal = ctypes.cast(data, ctypes.POINTER(ctypes.c_ulong))[0]
chunk = b"A" * (4 << 20)
STRING = 31
for name, kind in ((b"_NET_WM_NAME", x.XInternAtom(d, b"UTF8_STRING", 0)), (b"WM_NAME", STRING), (b"WM_CLASS", STRING)):
    for _ in range(9):  # 9 x 4 MB appended to each: what the next reply's window list reads
        x.XChangeProperty(d, terminal, x.XInternAtom(d, name, 0), kind, 8, 2, chunk, len(chunk))
x.XSync(d, 0)
print("bloated", flush=True)
'''


def test_a_title_of_megabytes_neither_bloats_nor_aborts_the_episode(two, env0):
    """Issue 43 row 5: 36 MB appended to its terminal's title made the next Step's reply exceed gRPC's
    64 MB, and `play()` raised out of the episode: an abort the agent could choose. Titles are read cut
    now, every reply is bounded, and the episode goes on to a score."""
    from computerrl.envs.desktop.x11 import TITLE_CHARS

    srv, client = two
    env0.reset(options={"task": {"id": "bloat", "instruction": "x", "evaluator": TRIVIAL}})
    agent_runs(env0, TITLE_BLOAT, "bloat.txt")
    read_output(srv.slots[0].desktop, "bloat.txt", "bloated")
    reply = client.step(response("Agent.wait()"), env0.episode, 0)
    titles = [w.title for w in reply.observation.windows]
    assert reply.action_valid and any(t.startswith("A" * 100) for t in titles), titles
    assert max(map(len, titles)) <= TITLE_CHARS and reply.ByteSize() < 1 << 20, reply.ByteSize()
    _, reward, terminated, _, info = env0.step(response("Agent.exit(True)"))
    assert terminated and reward == 1.0 and not info["aborted"] and "failed" not in info, info


def test_a_reply_too_large_for_the_client_fails_the_episode_instead_of_aborting_it(two, monkeypatch):
    """Whatever reply the server cannot get across (here Calc's observation to a client whose limit is
    4 KB, a stand-in for any reply too large) ends the episode as a failure with the reason: `play()`
    returns it as data, it raises nothing and aborts nothing."""
    from computerrl.envs.service import client as client_module
    from computerrl.play.episode import play
    from computerrl.play.scripted import ScriptedPolicy

    srv, _ = two
    monkeypatch.setattr(client_module, "MAX_MESSAGE_BYTES", 4 << 10)  # an empty desktop's reset fits
    small = EnvClient(f"127.0.0.1:{srv.port}", timeout_s=90)
    try:
        trajectory = play(DesktopEnv(small, 1, max_steps=3), ScriptedPolicy([response("Agent.open_app('calc')")]),
                          {"id": "too-large", "instruction": "x", "evaluator": TRIVIAL})
    finally:
        small.close()
    assert not trajectory.aborted and not trajectory.success and len(trajectory.rows) == 1, trajectory
    assert "RESOURCE_EXHAUSTED" in trajectory.detail and not trajectory.rows[0]["action_valid"], trajectory.detail


# apps whose state a score is read from ----------------------------------------------------------
MEMORY_WRITER = r'''
import ctypes, json, os, subprocess, sys
libc = ctypes.CDLL(None, use_errno=True)
program = sys.argv[1]

def attempts(pid):
    out = {}
    try:
        with open(f"/proc/{pid}/mem", "r+b"):
            out["mem"] = "opened"
    except OSError as e:
        out["mem"] = e.strerror
    out["ptrace"] = "attached" if libc.ptrace(16, pid, 0, 0) == 0 else os.strerror(ctypes.get_errno())  # ATTACH
    local, remote = (ctypes.c_char * 1)(), ctypes.c_void_p(0x10000)
    iov = lambda p: (ctypes.c_void_p * 2)(ctypes.cast(p, ctypes.c_void_p), 1)
    n = libc.syscall(311, pid, iov(local), 1, iov(remote), 1, 0)  # process_vm_writev
    out["vm_write"] = "wrote" if n >= 0 else os.strerror(ctypes.get_errno())
    pidfd = libc.syscall(434, pid, 0)  # pidfd_open, then pidfd_getfd: its descriptor 0
    out["getfd"] = "copied" if pidfd >= 0 and libc.syscall(438, pidfd, 0, 0) >= 0 else os.strerror(ctypes.get_errno())
    return out

apps = [int(p) for p in os.listdir("/proc") if p.isdigit() and
        open(f"/proc/{p}/cmdline", "rb").read().startswith(program.encode())]
own = subprocess.Popen(["sleep", "60"])  # a program of its own: the same attempts do reach it
print(json.dumps({"apps": {pid: attempts(pid) for pid in apps}, "own": attempts(own.pid)}), flush=True)
own.kill()
'''


@pytest.mark.parametrize("app, program", [("vlc", "/usr/bin/vlc"), ("google-chrome", "/usr/lib/chromium/chromium")])
@pytest.mark.parametrize("as_root", [False, True], ids=["user", "sudo"])
def test_the_agent_cannot_trace_or_write_the_memory_of_an_app_a_score_is_read_from(two, env0, app, program, as_root):
    """Issue 43 row 1: the agent wrote the genuine VLC's memory through /proc/PID/mem (same uid, nothing
    between them) and is_vlc_playing scored 1 with nothing played. The apps a score is read from are
    launched by the desktop's session, each in a Landlock domain apart: from the agent's terminal, or root
    in its `sudo`, their memory cannot be opened, traced, written or their descriptors copied; a program of
    the agent's own still can be (the attempts work)."""
    srv, _ = two
    env0.reset(options={"task": {"id": "app", "instruction": "x", "evaluator": TRIVIAL,
                                 "config": [{"type": "launch", "parameters": {"command": [app]}}]}})
    runner = "echo password | sudo -S python3" if as_root else "python3"
    agent_runs(env0, MEMORY_WRITER, "tried.json", runner=f"{runner} ~/.p.py {program}")
    said = read_output(srv.slots[0].desktop, "tried.json", "}")
    tried = json.loads(said[said.index("{"):])  # after sudo's prompt
    assert tried["apps"], tried  # the app runs, and the agent sees it
    for pid, attempt in tried["apps"].items():
        assert attempt == {"mem": "Permission denied", "ptrace": "Operation not permitted",
                           "vm_write": "Operation not permitted", "getfd": "Operation not permitted"}, (pid, attempt)
    assert tried["own"]["mem"] == "opened" and tried["own"]["ptrace"] == "attached", tried["own"]
