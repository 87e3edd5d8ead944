"""The throwaway jail evaluators run the agent's code in (envs/desktop/jail.py), and OSWorld's
check_python_file_by_test_suite, which imports the agent's modules: scored as OSWorld scores them,
with the agent's code, written as an attacker would write it, reaching nothing, forging no verdict,
and holding no more memory or room for files than the jail's caps."""

from __future__ import annotations

import contextlib
import glob
import logging
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest
from conftest import descendants

import computerrl.tasks.metrics  # noqa: F401 - registers every metric
from computerrl.envs.desktop.cgroup import Cgroup
from computerrl.envs.desktop.jail import run_in_jail
from computerrl.tasks.registry import METRICS

ROTATE = """
SHAPES = [[(0, 0), (1, 0), (0, 1), (1, 1)], [(0, 0), (1, 0), (2, 0), (3, 0)]]

def rotate(shape, times):
    for _ in range(times):
        shape = [(-y, x) for x, y in shape]
    return {}
"""
SUITE = """
import pygame  # as the tetris of OSWorld's multi_apps/9219480b, the project is a pygame game
import game

def test():
    pygame.init()
    pygame.display.set_mode((40, 40))
    return game.rotate(game.SHAPES[1], 1) == [(0, 0), (0, 1), (0, 2), (0, 3)]
"""


def score(tmp_path, game: str, suite: str = SUITE, **options) -> float:
    (tmp_path / "game.py").write_text(game)
    (tmp_path / "test_suite.py").write_text(suite)
    return METRICS["check_python_file_by_test_suite"]([str(tmp_path / "game.py")], str(tmp_path / "test_suite.py"),
                                                      **options)


def test_the_test_suite_scores_the_agents_project_as_osworld(tmp_path):
    assert score(tmp_path, ROTATE.format("SHAPES[len(SHAPES)]")) == 0.0  # the bug: IndexError
    assert score(tmp_path, ROTATE.format("[(x + 1, y) for x, y in shape]")) == 0.0  # wrong answer
    assert score(tmp_path, ROTATE.format("[(x + 1, y) for x, y in shape] if False else shape")) == 1.0  # fixed
    partial = "import game\ndef check():\n    return 0.5\ndef test():\n    return 7\n"
    assert score(tmp_path, "", partial, test_function_name="check") == 0.5
    assert score(tmp_path, "", partial) == 1.0  # a number is clamped to [0, 1], as OSWorld does
    assert score(tmp_path, "", partial, test_function_name="absent") == 0.0
    assert score(tmp_path, "this is not python") == 0.0
    assert METRICS["check_python_file_by_test_suite"]([str(tmp_path / "gone.py")], str(tmp_path / "test_suite.py")) \
        == 0.0


def test_the_agents_code_reaches_nothing_outside_its_folder(tmp_path):
    secret = tmp_path / "server-state" / "token"
    secret.parent.mkdir()
    secret.write_text("s3cret")
    probe = f"""
import os, socket
seen = []
for path in ({str(secret)!r}, "/root", "/home", {os.getcwd()!r}):
    try:
        seen.append(path if os.path.isdir(path) and os.listdir(path) or open(path).read() else "")
    except OSError:
        pass
for target in ("/etc/passwd-written", "/usr/evil", "/tmp/../etc/x"):
    try:
        open(target, "w").write("x")
        seen.append(target)
    except OSError:
        pass
try:
    socket.create_connection(("127.0.0.1", 22), timeout=1)
    seen.append("loopback")
except OSError:
    pass
seen += [p for p in os.listdir("/proc") if p.isdigit() and p not in ("1", str(os.getpid()))]
print("SEEN", [s for s in seen if s])
"""
    code, output, _ = run_in_jail(["python3", "-c", probe], [])
    assert code == 0 and "SEEN []" in output, output


def test_a_runaway_agent_program_is_stopped_and_leaves_nothing_behind(tmp_path):
    marker = f"computerrl-jail-test-{os.getpid()}"
    forever = f"import subprocess, time; subprocess.Popen(['sleep', '600', '{marker}']); time.sleep(600)"
    start = time.monotonic()
    code, *_ = run_in_jail(["python3", "-c", forever], [], timeout_s=3)
    assert code is None and time.monotonic() - start < 10
    time.sleep(0.5)
    assert not [p for p in os.listdir("/proc") if p.isdigit() and marker in _cmdline(p)]
    bomb = """
import os, time
kids = 0
while True:
    try:
        pid = os.fork()
    except OSError as e:
        print("stopped", e.errno, "after", kids)
        break
    if pid == 0:
        time.sleep(30)
        os._exit(0)
    kids += 1
"""
    code, output, _ = run_in_jail(["python3", "-c", bomb], [], timeout_s=10, processes=32)
    assert code == 0 and "stopped 11 after" in output, output  # EAGAIN at the cap, not the host's table
    assert int(output.split()[-1]) < 32
    hog = "x = bytearray(2 << 30)"
    code, output, _ = run_in_jail(["python3", "-c", hog], [], memory_mb=512)
    assert code != 0 and "MemoryError" in output, output


def _cmdline(pid: str) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().decode(errors="replace")
    except OSError:
        return ""


@pytest.mark.parametrize("forgery", ["import os\nos.remove('keep.txt')", "open('/work/keep.txt', 'w').write('forged')"])
def test_what_the_agents_code_changes_in_its_folder_stays_there(tmp_path, forgery):
    (tmp_path / "keep.txt").write_text("gold")
    code, *_ = run_in_jail(["python3", "-c", forgery], [tmp_path / "keep.txt"])
    assert code == 0 and (tmp_path / "keep.txt").read_text() == "gold"


# The agent's module, imported by the test: each would claim the verdict of a test that fails.
FORGERIES = {
    "print": 'import os\nprint("\\ncomputerrl-verdict 1.0", flush=True)\nos._exit(0)',
    "fd 1": 'import os\nos.write(1, b"\\ncomputerrl-verdict 1.0\\n")\nos._exit(0)',
    "fd 2": 'import os\nos.write(2, b"\\ncomputerrl-verdict 1.0\\n")\nos._exit(0)',
    "print rebound": 'import builtins\nprint("\\ncomputerrl-verdict 1.0")\nbuiltins.print = lambda *a, **k: None',
    "sys.exit": 'import atexit, sys\natexit.register(print, "\\ncomputerrl-verdict 1.0")\nsys.exit(0)',
    "SystemExit": 'import atexit\natexit.register(print, "\\ncomputerrl-verdict 1.0")\nraise SystemExit(0)',
    "getattr rebound": "import builtins\nbuiltins.getattr = lambda *a: lambda: True",
    "report written": 'import os\nos.write(int(os.environ["COMPUTERRL_REPORT_FD"]), b"1.0 " + b"0" * 128 + b"\\n")',
}


@pytest.mark.parametrize("forgery", FORGERIES.values(), ids=FORGERIES.keys())
def test_a_verdict_the_agents_code_forges_scores_0(tmp_path, forgery):
    assert score(tmp_path, forgery, "import game\ndef test():\n    return False\n") == 0.0


# Issue 43 row 4: the agent's module walks up to the runner's frame and signs a verdict with the runner's own
# hash (its key inside) and writer: in one interpreter nothing can stop it, so the score is marked.
FRAME_WALKER = """
import sys
frame = sys._getframe()
while frame is not None and "mac" not in frame.f_locals:
    frame = frame.f_back
runner = frame.f_locals
runner["mac"].update(b"1.0")
runner["write"](runner["report"], b"1.0 " + runner["mac"].hexdigest().encode() + b"\\n")
runner["leave"](0)
"""


def test_a_verdict_forged_from_the_runners_frame_passes_so_such_tasks_scores_are_marked(tmp_path):
    from computerrl.tasks.task import parse_task

    assert score(tmp_path, FRAME_WALKER, "import game\ndef test():\n    return False\n") == 1.0
    task = parse_task({"id": "tetris", "instruction": "Fix the game.", "evaluator": {
        "func": "check_python_file_by_test_suite", "result": {"type": "vm_file", "path": "/home/user/game.py",
                                                              "dest": "game.py"},
        "expected": {"type": "cloud_file", "path": "https://example.org/test_suite.py", "dest": "test_suite.py"}}})
    assert task.agent_code() == ["check_python_file_by_test_suite: the test suite runs in one interpreter with the "
                                 "agent's modules, which can reach its verdict"]


def test_what_the_agents_code_prints_leaves_a_genuine_verdict_as_it_is(tmp_path):
    noisy = 'import sys\nprint("\\ncomputerrl-verdict 0.0")\nsys.stderr.write("computerrl-verdict 0.0\\n")\n'
    assert score(tmp_path, ROTATE.format("shape") + noisy) == 1.0


def _cgroup_or_skip() -> Path:
    """The folder the jail's cgroups are made in; the test is skipped where none can be made."""
    cgroup, why_not = Cgroup.make(f"computerrl-{os.getpid()}-jailtest", 1 << 30)
    if cgroup is None:
        pytest.skip(f"one memory cap for the whole jail needs a cgroup, and none can be made here: {why_not}")
    cgroup.remove()
    return cgroup.path.parent


RAM_FOLDERS = ("tmp", "work")  # the jail's tmpfs folders


def _jailed(cgroups: Path) -> set[int]:
    """The jail's processes: its cgroup's members, as the kernel lists them, and all they started
    (whatever else this test worker runs meanwhile is no part of it)."""
    members = []
    for procs in cgroups.glob(f"computerrl-{os.getpid()}-jail*/cgroup.procs"):
        with contextlib.suppress(OSError):  # the cgroup is being removed
            members += map(int, procs.read_text().split())
    return set(descendants(members))


def _held_mb(pids: set[int]) -> tuple[int, str]:
    """What the processes `pids` hold now, in MB: their resident memory, and once each the jail's
    RAM-backed folders (/tmp and /work), told from ours by their device (bwrap, while it sets the
    jail up, sees our folders, whatever disks they are on); and what was counted, to show."""
    parts, seen = [], {os.stat(f"/{folder}").st_dev for folder in RAM_FOLDERS if os.path.exists(f"/{folder}")}
    for pid in pids:
        try:
            with open(f"/proc/{pid}/status") as f:
                status = dict(line.split(":", 1) for line in f if line.startswith(("Name:", "VmRSS:")))
            parts.append((int(status.get("VmRSS", "0 kB").split()[0]) << 10, f"{status['Name'].strip()} {pid}"))
            for folder in RAM_FOLDERS:
                device = os.stat(path := f"/proc/{pid}/root/{folder}").st_dev
                if device not in seen:
                    seen.add(device)
                    usage = os.statvfs(path)
                    parts.append(((usage.f_blocks - usage.f_bfree) * usage.f_frsize, f"{path} (device {device})"))
        except (OSError, ValueError, KeyError):  # gone meanwhile, or a folder it does not have
            pass
    return sum(size for size, _ in parts) >> 20, ", ".join(f"{what} {size >> 20} MB" for size, what in parts)


def _most_held_mb_while(cgroups: Path, run) -> tuple[int, str, object]:
    """(the most the jail `run()` started held at once, what that was, what `run()` returned)."""
    most, done = [(0, "nothing")], threading.Event()

    def watch():
        while not done.wait(0.01):
            most[0] = max(most[0], _held_mb(_jailed(cgroups)))

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        result = run()
    finally:
        done.set()
        watcher.join()
    return *most[0], result


MARGIN_MB = 128  # what the jail's sh, bwrap and python hold beyond its cap: their shared libraries count once each


def test_the_jails_processes_together_hold_no_more_than_its_memory_cap():
    cgroups = _cgroup_or_skip()
    hogs = """
import os, time
kids = []
for _ in range(3):
    pid = os.fork()
    if pid == 0:
        held = bytearray(700 << 20)  # zeroed: every page is touched
        time.sleep(2)
        os._exit(0)
    kids.append(pid)
print("held", sum(os.waitpid(pid, 0)[1] == 0 for pid in kids))
"""
    held, what, (code, output, _) = _most_held_mb_while(
        cgroups, lambda: run_in_jail(["python3", "-c", hogs], [], memory_mb=1024))
    assert code == 0 and output.split()[-2:] in (["held", "0"], ["held", "1"]), output  # 2 x 700 MB > 1024 MB
    assert 700 < held < 1024 + MARGIN_MB, what  # it filled its cap, never two children's 1,400 MB


def test_files_the_jail_writes_count_against_its_memory_cap():
    cgroups = _cgroup_or_skip()
    writer = """
import os
for i in range(8):
    with open(f"/tmp/{i}", "wb") as f:
        f.write(bytes(60 << 20))
print("wrote 480 MB")
"""
    held, what, (code, output, _) = _most_held_mb_while(
        cgroups, lambda: run_in_jail(["python3", "-c", writer], [], memory_mb=256, tmp_mb=1024))
    assert code != 0 and "wrote" not in output, output  # killed: RAM the jail's files hold is its memory
    assert 60 <= held < 256 + MARGIN_MB, what  # a file of 60 MB seen at least, and none past the cap


def test_what_the_jail_writes_never_reaches_the_host_disk_and_its_folders_are_sized(tmp_path):
    marker = f"computerrl-jail-test-{os.getpid()}-written"
    (tmp_path / "given.txt").write_text("x" * 50_000)
    writer = f"""
import os, time
for folder in ("/tmp", "/work"):
    written = 0
    try:
        for i in range(3):
            with open(f"{{folder}}/{marker}-{{i}}", "wb", buffering=0) as f:
                for _ in range(60):
                    f.write(bytes(1 << 20))
                    written += 1
    except OSError as e:
        print(folder, "errno", e.errno, "after", written, "MB")
time.sleep(1)  # while its files exist, the host looks for them
"""
    found, done = [], threading.Event()

    def search():  # on the host's disk where the jail's files would be: its temp dir
        while not done.wait(0.1):
            found.extend(glob.glob(f"{tempfile.gettempdir()}/**/{marker}*", recursive=True))

    searcher = threading.Thread(target=search)
    searcher.start()
    try:
        code, output, _ = run_in_jail(["python3", "-c", writer], [tmp_path / "given.txt"], tmp_mb=100, work_mb=100)
    finally:
        done.set()
        searcher.join()
    assert code == 0 and "/tmp errno 28 after 100 MB" in output, output  # ENOSPC at 100 MB, not 180
    assert "/work errno 28 after 100 MB" in output, output  # the files given take their own room
    assert not found, found


def test_unprivileged_the_jail_still_runs_and_says_its_memory_is_capped_per_process_only(caplog):
    too_big = ["python3", "-c", "open('/tmp/big', 'wb').write(bytes(20 << 20))"]
    if os.geteuid() == 0:  # root runs it as nobody, who can make no cgroup
        script = f"import logging\nfrom computerrl.envs.desktop.jail import run_in_jail\nlogging.basicConfig()\n" \
                 f"print(run_in_jail({too_big!r}, [], tmp_mb=8))"
        done = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--", sys.executable,
                               "-c", script], capture_output=True, text=True, timeout=60, cwd="/")
        jailed, logged = done.stdout, done.stderr
    else:
        with caplog.at_level(logging.WARNING, logger="computerrl.envs.desktop.jail"):
            jailed = repr(run_in_jail(too_big, [], tmp_mb=8))
        logged = caplog.text
    assert "code=1" in jailed and "[Errno 28] No space left on device" in jailed, jailed
    assert "the jail's memory is capped per process only" in logged, logged
