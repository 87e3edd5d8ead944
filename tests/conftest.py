"""Fixtures that start real desktops (Xvfb + D-Bus + AT-SPI + openbox + LibreOffice)."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path

# `just test` runs two pytest-xdist workers, one a core: each computes with one thread (torch, vLLM and the
# stages the tests start read this before torch loads), or the two would spin over both cores at once.
if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ["OMP_NUM_THREADS"] = "1"

import pytest  # noqa: E402

# LibreOffice's `uno` module replaces `__import__` with a hook under which torch's star-imports fail
# (torch.distributed.elastic.metrics). The tests run env servers (uno) and the policy (torch) in one
# process, which the product never does, so the policy stack is imported before any uno.
import transformers.modeling_utils  # noqa: F401, E402

from computerrl.envs.fleet.pool import wait_healthy
from computerrl.envs.service.client import DesktopEnv, EnvClient
from computerrl.envs.service.server import EnvServer
from computerrl.play.scripted import response


# The files that take minutes, longest first (measured serially: 2 to 10 min each): the two workers take
# them first and end together, instead of one of them starting the longest file last.
SLOWEST_FIRST = ("test_entropulse.py", "test_rollout.py", "test_vllm_engine.py", "test_async_rl.py",
                 "test_docker_backend_real_engine.py",
                 "test_suites.py", "test_bench_smoke.py", "test_build_apis.py", "test_distributed_training.py",
                 "test_chrome.py",
                 "test_sandbox_attacks.py", "test_policy.py", "test_vscode.py", "test_training.py")


def pytest_collection_modifyitems(items):
    rank = {name: i for i, name in enumerate(SLOWEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))


def pytest_terminal_summary(terminalreporter):
    """The files that took longest, setup and teardown included: where the suite's time goes (SLOWEST_FIRST)."""
    seconds: dict[str, float] = {}
    for reports in terminalreporter.stats.values():
        for r in reports:
            if hasattr(r, "duration") and hasattr(r, "nodeid"):
                name = r.nodeid.split("::")[0]
                seconds[name] = seconds.get(name, 0.0) + r.duration
    if len(seconds) > 1:
        terminalreporter.write_sep("=", f"slowest files of {sum(seconds.values()):.0f} worker-seconds")
        for name, s in sorted(seconds.items(), key=lambda kv: -kv[1])[:15]:
            terminalreporter.write_line(f"{s:8.1f}s {name}")


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """An in-process env server with one real desktop; its desktop is reachable for white-box checks."""
    srv = EnvServer(desktops=1, workdir=tmp_path_factory.mktemp("env-server"), settle_s=0.03).start()
    client = EnvClient(f"127.0.0.1:{srv.port}", timeout_s=60)
    assert wait_healthy(client, 120) == "", "the desktop did not start"
    yield srv, client
    client.close()
    srv.stop()


@contextmanager
def desktop_of(srv: EnvServer, index: int = 0):
    """White-box use of a server's desktop, under its slot's lock as every call takes it: the watchdog
    must not see the office a reset stops as a crash and replace the desktop mid-test."""
    slot = srv.slots[index]
    with slot.lock:
        yield slot.desktop


@contextmanager
def generated_desktops(root: Path, tasks: int, desktops: int):
    """At ROOT: `tasks` generated Calc tasks (one template) as ROOT/tasks with their file cache, and
    `desktops` desktops behind a detached spawn-envs at ROOT/envs, stopped on leaving."""
    import datasets

    from computerrl.data.datasets_io import save_atomic
    from computerrl.data.schemas import TASK_FEATURES
    from computerrl.stages.spawn_envs import SpawnEnvsConfig, run
    from computerrl.tasks.suites.build import generate, task_rows, write_files

    train, _ = generate(tasks, 0, seed=5, templates=["calc_column_stat"])
    write_files(train, root / "files")
    save_atomic(datasets.Dataset.from_dict(task_rows(train), features=TASK_FEATURES), root / "tasks")
    assert run(SpawnEnvsConfig(out=root / "envs", count=desktops, cache=root / "files", detach=True)) == 0
    try:
        yield root
    finally:
        run(SpawnEnvsConfig(out=root / "envs", stop=True))


# What a test that needs only *a* model loads (one that answers, fast), where what it checks does not depend on
# what the embedded model computes: SmolLM2's tokenizer on two random layers (3.2M parameters, 13 MB). It
# answers in milliseconds, never a valid action, never the end of its turn (every answer is max_new_tokens
# long). Head size 32, as vLLM's CPU attention takes.
TINY_SHAPE = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1,
                  intermediate_size=256)
TINY_VERSION = "tiny-random"


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory) -> str:
    """The stand-in model's checkpoint folder (see TINY_SHAPE), made once per test process."""
    from computerrl.policy.checkpoint import embedded_checkpoint, random_checkpoint

    folder = tmp_path_factory.mktemp("tiny-model") / TINY_VERSION
    random_checkpoint(folder, TINY_SHAPE, embedded_checkpoint(), version=TINY_VERSION)
    return str(folder)


@pytest.fixture(scope="module")
def llama_server(tmp_path_factory):
    """llama-cpp-python's OpenAI-compatible server on loopback, serving the embedded model's GGUF file."""
    from computerrl.policy.checkpoint import shipped_gguf

    log = tmp_path_factory.mktemp("llama-server") / "server.log"
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", "llama_cpp.server", "--model",
                             str(shipped_gguf()), "--host", "127.0.0.1",
                             "--port", str(port), "--n_ctx", "4096"],
                            stdout=open(log, "wb"), stderr=subprocess.STDOUT)  # a pipe would fill and block it
    url = f"http://127.0.0.1:{port}/v1"
    deadline = time.monotonic() + 120
    while True:
        try:
            json.loads(urllib.request.urlopen(url + "/models", timeout=2).read())
            break
        except OSError:
            assert proc.poll() is None and time.monotonic() < deadline, log.read_text()[-2000:]
            time.sleep(0.5)
    yield url
    died = proc.poll()
    proc.kill()
    proc.wait()
    if died is not None:  # say why every test after it failed
        pytest.fail(f"the llama.cpp server died with {died}:\n{log.read_text()[-3000:]}")


@pytest.fixture
def env(server):
    srv, client = server
    assert wait_healthy(client, 120) == ""  # a previous test may have crashed it on purpose
    e = DesktopEnv(client, 0, max_steps=50)
    yield e
    e.close()


@pytest.fixture
def task_env(server, cache):
    """A DesktopEnv whose desktop downloads from `cache`, the test module's own fixture: a folder whose
    index.json maps the URLs its tasks name to files in it (nothing is downloaded)."""
    server[0].slots[0].desktop.file_cache = cache  # white box: the server's --cache
    return DesktopEnv(server[1], 0, max_steps=30)


def play(env: DesktopEnv, task: dict, codes: list[str], wait_for: tuple | None = None) -> tuple[float, dict]:
    """One episode of `task` with these actions (every one valid and nothing lost), to its end: (reward, info).
    `wait_for` (desktop, path, waits): before the last action, up to `waits` Agent.wait() steps until the desktop
    holds the file `path`, which a command the agent typed writes when it is through: as an agent would wait, but
    no longer than the command takes."""
    env.reset(options={"task": task})
    for k, code in enumerate(codes):
        if wait_for and k == len(codes) - 1:
            desktop, path, waits = wait_for
            for _ in range(waits):
                if desktop.sandbox.read(path, limit=0) is not None:
                    break
                act(env, "Agent.wait()")
            assert desktop.sandbox.read(path, limit=0) is not None, \
                f"the agent's command did not end within {waits} waits; its terminal: {desktop.terminal_output()!r}"
        obs, reward, terminated, truncated, info = env.step(response(code))
        assert info["action_valid"] and not info["aborted"], info
    assert terminated
    return reward, info


def act(env: DesktopEnv, code: str):
    """One step with a well-formed model response; fails the test if the episode was lost."""
    obs, reward, terminated, truncated, info = env.step(response(code))
    assert not info["aborted"], info["aborted"]
    return obs, info


def node_center(tree: str, name: str) -> tuple[int, int]:
    """Centre of the first a11y row whose name or text is `name` (the agent's own way to aim)."""
    for line in tree.splitlines()[1:]:
        cols = line.split("\t")
        if len(cols) >= 5 and name in (cols[1], cols[2]):
            x, y = map(int, re.findall(r"-?\d+", cols[3])[:2])
            return x, y
    raise AssertionError(f"no node named {name!r} in the tree:\n{tree[:3000]}")


def wait_until(predicate, timeout_s: float = 10.0):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    return predicate()


def home_of(desktop) -> Path:
    """The desktop's /home/user as root on the host reaches it, through its sandbox's root. A test's
    shortcut: the env server itself reads and writes the desktop's files only through its keeper."""
    return Path(f"/proc/{desktop.sandbox.pid}/root/home/user")


def inside(path: Path) -> str:
    """The desktop's own name of a path `home_of` gave (/home/user/…)."""
    return "/" + "/".join(path.parts[4:])  # drop /proc/<pid>/root


def put(server, path: Path, data: bytes) -> None:
    """Write a file at a path `home_of` gave, as the desktop's user (through its keeper: root may not
    create files in the desktop's folders, which live in its own user namespace)."""
    server[0].slots[0].desktop.sandbox.write(inside(path), data)


def desktop_files(server):
    """/home/user/files as the test reaches it (made after the test's reset, which wipes home), made
    by the desktop's own user so that its apps may write there."""
    desktop = server[0].slots[0].desktop
    desktop.sandbox.wipe([], skeleton=["/home/user/files"])
    return home_of(desktop) / "files"


def descendants(roots: list[int]) -> list[int]:
    """These processes and all below them (host pids), from one pass over /proc."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/stat") as f:
                children.setdefault(int(f.read().rsplit(")", 1)[1].split()[1]), []).append(int(entry))
        except (ValueError, OSError, IndexError):
            continue
    out, todo = [], list(roots)
    while todo:
        out.append(pid := todo.pop())
        todo += children.get(pid, [])
    return out


def ok(env, code: str) -> tuple[dict, str]:
    """One application API call that must succeed: (observation, result sentence)."""
    obs, info = act(env, code)
    assert not info["exec_result"].startswith(("Action failed", "Invalid action")), info["exec_result"]
    return obs, info["exec_result"]


def fails(env, code: str, *phrases: str) -> str:
    """One call that must fail as an action (not crash), its sentence holding every phrase."""
    _, info = act(env, code)
    result = info["exec_result"]
    assert result.startswith("Action failed: "), result
    for phrase in phrases:
        assert phrase in result, result
    return result
