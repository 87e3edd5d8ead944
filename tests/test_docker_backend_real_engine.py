"""The docker backend on real Docker engines: two private `dockerd`s on this machine (own sockets, data
roots and bridges) stand for two Docker hosts, and the slim desktop image is built by envs/fleet/docker_image.sh.

A fleet of two containers spreads over both engines and serves a rollout and an eval (of the tiny stand-in
model, conftest's `tiny_model`: the fleet is what is checked); the sandbox holds inside a container; a container killed with `docker kill` is replaced and its
trajectory marked aborted; an engine stopped sends its desktops to the other; `spawn-envs --stop` leaves
no container, network or volume behind. The engines' folders persist between runs (~/.cache), so a
later run rebuilds only the image's code layers; from nothing, the first engine builds it (about 4 minutes).
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import wait_until
from computerrl.data.datasets_io import load, save_atomic
from computerrl.envs.fleet.manifest import read_manifest
from computerrl.envs.service.client import DesktopEnv, EnvClient
from computerrl.play.scripted import response

# The first test's setup builds the image (about 4 minutes from nothing, more on a slow network).
pytestmark = [pytest.mark.desktop, pytest.mark.docker, pytest.mark.timeout(2400)]
IMAGE = "computerrl-desktop:slim"
ENGINES = Path(os.environ.get("COMPUTERRL_TEST_ENGINES", Path.home() / ".cache" / "computerrl" / "test-engines"))
REPO = Path(__file__).resolve().parent.parent


def docker(engine, *args: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(["docker", "-H", engine.url, *args], capture_output=True, text=True, check=True, **kw)


@pytest.fixture(scope="module")
def engines():
    from computerrl.envs.fleet.private_engine import PrivateEngine

    if os.geteuid() != 0:
        pytest.skip("real Docker engines need root (dockerd)")
    with contextlib.ExitStack() as started:
        a, b = PrivateEngine(ENGINES / "a", 1), PrivateEngine(ENGINES / "b", 2)
        for engine in (a, b):
            started.callback(engine.stop)
            engine.start()
            left = docker(engine, "ps", "-aq").stdout.split()  # a crashed run's, on the kept data root
            if left:
                docker(engine, "rm", "-f", *left)
        # An engine that built the image before (docker_image.sh's debootstrapped base is there) builds it again
        # from its own cache: the code's layers only. The other gets it from the first (docker save | load:
        # a loaded image is no build cache, so from nothing only one engine builds).
        t = time.monotonic()
        build(a)
        if docker(b, "image", "ls", "-q", "computerrl-base").stdout.strip():
            build(b)
        else:
            subprocess.run(f"docker -H {shlex.quote(a.url)} save {IMAGE} | docker -H {shlex.quote(b.url)} load",
                           shell=True, check=True, timeout=900, stdout=subprocess.DEVNULL)
        for engine in (a, b):  # earlier builds' images: the disk is not theirs to keep
            docker(engine, "image", "prune", "-f")
        print(f"image {IMAGE} on both engines in {time.monotonic() - t:.0f} s")
        yield a, b


def build(engine) -> None:
    subprocess.run(["bash", "envs/fleet/docker_image.sh", "--slim", IMAGE], cwd=REPO, check=True, timeout=1800,
                   env={**os.environ, "DOCKER_HOST": engine.url}, stdout=subprocess.DEVNULL)


@pytest.fixture(scope="module")
def fleet(engines, tmp_path_factory):
    """Two generated Calc tasks with their file cache, and two containers behind a detached spawn-envs."""
    import datasets

    from computerrl.data.schemas import TASK_FEATURES
    from computerrl.stages.spawn_envs import SpawnEnvsConfig, run
    from computerrl.tasks.suites.build import generate, task_rows, write_files

    root = tmp_path_factory.mktemp("docker-fleet")
    train, _ = generate(2, 0, seed=5, templates=["calc_column_stat"])
    write_files(train, root / "files")
    save_atomic(datasets.Dataset.from_dict(task_rows(train), features=TASK_FEATURES), root / "tasks")
    a, b = engines
    config = SpawnEnvsConfig(out=root / "envs", count=2, backend="docker", docker_image=IMAGE,
                             docker_hosts=f"{a.url},{b.url}", cache=root / "files", detach=True, poll_s=1.0)
    try:  # a fleet that never became healthy is stopped too: its supervisor would go on starting containers
        assert run(config) == 0
        yield root
    finally:
        run(SpawnEnvsConfig(out=root / "envs", stop=True))


def options(root: Path, out: Path, model: str, **extra) -> list[str]:
    args = {"tasks": root / "tasks", "envs": root / "envs", "samples": 1, "max-steps": 2, "max-new-tokens": 40,
            "model": model, "out": out, **extra}
    return [x for k, v in args.items() for x in (f"--{k}", str(v))]


def computerrl(*args: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "computerrl.cli.main", *args], capture_output=True, text=True, **kw)


def containers(engine) -> list[str]:
    return docker(engine, "ps", "-aq", "--filter", "label=computerrl.role=env-server").stdout.split()


def test_the_fleet_spreads_over_both_engines_and_serves_a_rollout_and_an_eval(engines, fleet, tiny_model):
    a, b = engines
    handles, status = read_manifest(fleet / "envs")
    assert status == {"env-000": "healthy", "env-001": "healthy"}
    assert sorted(h.detail["docker_host"] for h in handles) == sorted([a.url, b.url])  # one on each host
    assert len(containers(a)) == len(containers(b)) == 1

    done = computerrl("rollout", *options(fleet, fleet / "rollout", tiny_model), timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    rows = load(fleet / "rollout")
    assert len({r["group_id"] for r in rows}) == 2 and all(r["error"] == "" for r in rows)
    assert all(json.loads(r["observation"])["focused_app"] == "calc" for r in rows)  # the task's .xlsx, opened

    done = computerrl("eval", "--tasks", str(fleet / "tasks"), "--envs", str(fleet / "envs"), "--max-steps", "1",
                      "--max-new-tokens", "40", "--model", tiny_model, "--out", str(fleet / "eval"), timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    summary = json.loads((fleet / "eval" / "summary.json").read_text())
    assert summary["overall"]["tasks"] == 2 and summary["overall"]["aborted"] == 0


def test_the_sandbox_holds_inside_a_container(engines, fleet):
    """The agent's terminal, probing as in tests/test_sandbox.py: the container's system, its server's
    files and port are out of reach; only the desktop's home is writable."""
    handle = read_manifest(fleet / "envs")[0][0]
    engine = next(e for e in engines if e.url == handle.detail["docker_host"])
    probe = "; ".join([
        "touch /usr/probe 2>/dev/null && echo usr=written || echo usr=refused",
        "touch /etc/probe 2>/dev/null && echo etc=written || echo etc=refused",
        "touch /probe 2>/dev/null && echo root=written || echo root=refused",
        "touch ~/probe-home && echo home=written || echo home=refused",
        "ls /home/server >/dev/null 2>&1 && echo server_home=visible || echo server_home=hidden",
        "ls /opt/venv/lib/python3.11/site-packages/computerrl >/dev/null 2>&1 && echo project=visible "
        "|| echo project=hidden",
        "python3 -c 'import grpc' 2>/dev/null && echo project_packages=importable || echo project_packages=absent",
        "python3 -c \"import socket; socket.create_connection(('127.0.0.1', 50051), 2)\" 2>/dev/null "
        "&& echo server_port=reachable || echo server_port=unreachable",
        "echo uid=$(id -u) home_dir=$HOME",
    ]).replace("\\", "\\\\").replace("'", "\\'")  # as a Python string literal
    client = EnvClient(handle.address, handle.token, timeout_s=120)
    env = DesktopEnv(client, 0, max_steps=10)
    env.reset()
    for code in ["Agent.open_app('terminal')", f"Agent.type(text='( {probe} ) > ~/probe.txt 2>&1; echo done >> "
                                               "~/probe.txt', enter=True)"]:
        _, _, _, _, info = env.step(response(code))
        assert info["action_valid"] and not info["aborted"], info
    # The desktop's home as the container's server user reaches it, through the sandbox's root.
    read = ("for p in $(ls /proc | grep -E '^[0-9]+$'); do f=/proc/$p/root/home/user/probe.txt; "
            "[ -r $f ] && grep -q done $f && exec cat $f; done; exit 1")
    out = wait_until(lambda: subprocess.run(["docker", "-H", engine.url, "exec", handle.detail["container"], "sh",
                                             "-c", read], capture_output=True, text=True).stdout, 60)
    env.close()
    client.close()
    answers = dict(part.split("=", 1) for line in out.splitlines() for part in line.split() if "=" in part)
    assert answers["usr"] == answers["etc"] == answers["root"] == "refused"
    assert answers["home"] == "written"
    assert answers["server_home"] == answers["project"] == "hidden" and answers["project_packages"] == "absent"
    assert answers["server_port"] == "unreachable"
    assert answers["uid"] == "1000" and answers["home_dir"] == "/home/user"


def test_a_killed_container_is_replaced_and_its_trajectory_aborted(engines, fleet, tiny_model):
    out = fleet / "killed"
    journal = out.with_name(f".{out.name}.journal")
    proc = subprocess.Popen([sys.executable, "-m", "computerrl.cli.main", "rollout", *options(fleet, out, tiny_model, samples=3)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert wait_until(lambda: list(journal.glob("item-*.json")), 300)  # a first trajectory is in
    handles, _ = read_manifest(fleet / "envs")
    for h in handles:
        engine = next(e for e in engines if e.url == h.detail["docker_host"])
        docker(engine, "kill", h.detail["container"])
    output, _ = proc.communicate(timeout=900)
    assert proc.returncode == 0, output
    summary = json.loads((out / "summary.json").read_text())
    assert summary["trajectories"] == 6 and summary["aborted"] >= 1, summary
    for row in load(out):
        if row["error"]:
            assert row["reward"] == 0.0 and not row["done"] and "lost" in row["error"]
    replaced, status = read_manifest(fleet / "envs")
    assert {h.detail["container"] for h in replaced}.isdisjoint({h.detail["container"] for h in handles})
    assert set(status.values()) == {"healthy"}


def test_an_engine_stopped_sends_its_desktops_to_the_other(engines, fleet):
    a, b = engines
    b.stop()
    try:
        def all_on_a():
            handles, status = read_manifest(fleet / "envs")
            return set(status.values()) == {"healthy"} and {h.detail["docker_host"] for h in handles} == {a.url}

        assert wait_until(all_on_a, 300), read_manifest(fleet / "envs")
        handle = read_manifest(fleet / "envs")[0][0]
        client = EnvClient(handle.address, handle.token, timeout_s=60)
        assert client.health().healthy
        client.close()
    finally:
        b.start()  # back, with the container it stopped: --stop must remove it
    assert len(containers(b)) == 1


def test_stop_leaves_no_container_network_or_volume_on_either_engine(engines, fleet):
    from computerrl.stages.spawn_envs import SpawnEnvsConfig, run

    assert run(SpawnEnvsConfig(out=fleet / "envs", stop=True)) == 0
    for engine in engines:
        assert docker(engine, "ps", "-aq").stdout.split() == []
        assert docker(engine, "volume", "ls", "-q").stdout.split() == []
        networks = docker(engine, "network", "ls", "--format", "{{.Name}}").stdout.split()
        assert sorted(networks) == ["bridge", "host", "none"]
