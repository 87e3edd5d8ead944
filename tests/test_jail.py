"""The throwaway jail evaluators run the agent's code in (envs/jail.py), and OSWorld's
check_python_file_by_test_suite, which imports the agent's modules: scored as OSWorld scores them,
with the agent's code, written as an attacker would write it, reaching nothing."""

from __future__ import annotations

import os
import time

import pytest

import computerrl.envs.tasks.metrics  # noqa: F401 - registers every metric
from computerrl.envs.jail import run_in_jail
from computerrl.envs.tasks.registry import METRICS

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
    code, output = run_in_jail(["python3", "-c", probe], [])
    assert code == 0 and "SEEN []" in output, output


def test_a_runaway_agent_program_is_stopped_and_leaves_nothing_behind(tmp_path):
    marker = f"computerrl-jail-test-{os.getpid()}"
    forever = f"import subprocess, time; subprocess.Popen(['sleep', '600', '{marker}']); time.sleep(600)"
    start = time.monotonic()
    code, _ = run_in_jail(["python3", "-c", forever], [], timeout_s=3)
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
    code, output = run_in_jail(["python3", "-c", bomb], [], timeout_s=10, processes=32)
    assert code == 0 and "stopped 11 after" in output, output  # EAGAIN at the cap, not the host's table
    assert int(output.split()[-1]) < 32
    hog = "x = bytearray(2 << 30)"
    code, output = run_in_jail(["python3", "-c", hog], [], memory_mb=512)
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
    code, _ = run_in_jail(["python3", "-c", forgery], [tmp_path / "keep.txt"])
    assert code == 0 and (tmp_path / "keep.txt").read_text() == "gold"
