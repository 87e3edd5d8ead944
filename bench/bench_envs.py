"""Env benchmarks: reset and step latency, memory per desktop, desktops alive, steps/s.

    python -m computerrl.bench.bench_envs                     # full: up to 48 desktops (~10 min a reset kind)
    python -m computerrl.bench.bench_envs --max-desktops 8 --throughput 1,4 --seconds 10
    python -m computerrl.bench.bench_envs --backend local,docker --max-desktops 4 --throughput 1,4
        # both backends in one run; the docker one on the engine at $DOCKER_HOST (--docker-image to pick)
    python -m computerrl.bench.bench_envs --reset in-place,spare --max-desktops 4 --throughput 1,4
        # both ways a desktop resets, in one run (the default)

Every desktop is an env server (Xvfb + D-Bus + AT-SPI + openbox + LibreOffice) driven over gRPC, exactly
as rollouts drive them: a local process, or a container (--backend docker). Prints the figures, then one
JSON line of results.

- reset: Reset (close documents, kill apps, restore home) + open a new Calc document + the first
  observation with the a11y tree — the work a Calc task's setup does before the agent acts.
- reset with a task: Reset with a real task (an .xlsx downloaded from the file cache into the
  sandbox and opened) up to the first observation: the case rollouts pay for.
- step: one scripted Calc action + the full observation (screenshot PNG + a11y tree + windows),
  measured at the client, gRPC included.
- pss: proportional set size of every process of a desktop's server and below it (the sandbox's
  own sessions included; shared pages split fairly), with a Calc document open.
- steps/s: scripted Calc episodes on k desktops at once, text observations (no screenshot).
- startup: all servers started and healthy, 2 at a time; per server: that time / ⌈count / 2⌉.
- spaced resets: resets --reset-gap-s apart on one desktop (the next spare's build ends within the pause):
  Reset alone and with a new Calc document, and the machine's CPU-seconds per reset, what it left to the
  background included, less the machine's own use over as long without resets, less the bench's own.
- from spare: the share of the latency figures' resets that swapped in a spare (the others found none ready
  and reset in place).
Each figure once per backend and reset kind when there are several (reset_p50_s_spare, …).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from computerrl.envs.fleet.backends.base import make_backend
from computerrl.envs.fleet.manifest import HEALTHY
from computerrl.envs.fleet.supervisor import Supervisor
from computerrl.envs.service.client import DesktopEnv, EnvClient
from computerrl.play.scripted import calc_episode, response

STEP_ACTIONS = ["Agent.type(text='1234', enter=True)", "Agent.hotkey(['ctrl', 'Home'])", "Agent.click([300, 300])",
                "Agent.hotkey(['down'])"]


def pss_mb(server_pid: int) -> float:
    """PSS of the server and every process below it (Xvfb, the sandbox, D-Bus, soffice, …)."""
    children: dict[int, list[int]] = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/stat") as f:
                children.setdefault(int(f.read().rsplit(")", 1)[1].split()[1]), []).append(int(pid))
        except (OSError, IndexError):
            continue
    total_kb, todo = 0, [server_pid]
    while todo:
        pid = todo.pop()
        todo += children.get(pid, [])
        try:
            with open(f"/proc/{pid}/smaps_rollup") as f:
                total_kb += next(int(line.split()[1]) for line in f if line.startswith("Pss:"))
        except (FileNotFoundError, ProcessLookupError, StopIteration, PermissionError):
            continue
    return total_kb / 1024


def task_cache(folder: Path) -> dict:
    """A file cache with one .xlsx, and a task that downloads and opens it (as OSWorld's Calc tasks do)."""
    from openpyxl import Workbook

    folder.mkdir(parents=True, exist_ok=True)
    wb = Workbook()
    for r in range(1, 41):
        wb.active.append([f"item {r}", r, r * 1.5])
    wb.save(folder / "data.xlsx")
    (folder / "index.json").write_text(json.dumps({"http://bench.test/data.xlsx": "data.xlsx"}))
    return {"id": "bench-open-xlsx", "instruction": "Look at the sheet.", "config": [
        {"type": "download", "parameters": {"files": [{"url": "http://bench.test/data.xlsx",
                                                       "path": "/home/user/data.xlsx"}]}},
        {"type": "open", "parameters": {"path": "/home/user/data.xlsx"}}],
        "evaluator": {"func": "infeasible"}}


def task_resets(client: EnvClient, task: dict, n: int) -> list[float]:
    env = DesktopEnv(client, max_steps=10, screenshot=True)
    out = []
    for _ in range(n):
        t = time.perf_counter()
        obs, _ = env.reset(options={"task": task})
        out.append(time.perf_counter() - t)
        assert obs["focused_app"] == "calc", obs["focused_app"]
    return out


def latency(client: EnvClient, n: int) -> tuple[list[float], list[float]]:
    env = DesktopEnv(client, max_steps=10_000, screenshot=True)
    resets, steps = [], []
    for i in range(n):
        t = time.perf_counter()
        env.reset()
        env.step(response("Agent.open_app('calc')"))
        resets.append(time.perf_counter() - t)
        for code in STEP_ACTIONS:
            t = time.perf_counter()
            _, _, _, _, info = env.step(response(code))
            steps.append(time.perf_counter() - t)
            assert not info["aborted"], info["aborted"]
    return resets, steps


def machine_busy_s() -> float:
    """CPU-seconds every core of the machine has spent busy since boot."""
    with open("/proc/stat") as f:
        user, nice, system, _idle, _iowait, irq, softirq, steal = map(int, f.readline().split()[1:9])
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def spaced_resets(client: EnvClient, n: int, gap_s: float) -> tuple[float, list[float], list[float]]:
    """n resets gap_s apart (time for the background to finish what a reset left it): the machine's CPU-seconds
    per reset (+ a new Calc document + the first observation), what it left to the background included, less the
    machine's use over as long without any, less ours; and each one's Reset alone, and with the new document."""
    env = DesktopEnv(client, max_steps=10_000, screenshot=True)
    alone, with_calc = [], []

    def busy_over(act) -> float:
        machine, mine = machine_busy_s(), sum(os.times()[:2])
        for _ in range(n):
            act()
            time.sleep(gap_s)
        return machine_busy_s() - machine - (sum(os.times()[:2]) - mine)

    def reset() -> None:
        t = time.perf_counter()
        env.reset()
        alone.append(time.perf_counter() - t)
        env.step(response("Agent.open_app('calc')"))
        with_calc.append(time.perf_counter() - t)

    idle = busy_over(lambda: None)
    return max(0.0, busy_over(reset) - idle) / n, alone, with_calc


def resets_by_spare(client: EnvClient) -> tuple[int, int]:
    """(resets that swapped in a spare, resets in place) of the server's first desktop so far."""
    d = client.health().desktops[0]
    return d.restored, d.reset_in_place


def throughput(clients: list[EnvClient], seconds: float) -> float:
    stop_at, counts = time.monotonic() + seconds, [0] * len(clients)

    def worker(i: int) -> None:
        env = DesktopEnv(clients[i], max_steps=100)
        while time.monotonic() < stop_at:
            env.reset()
            for action in calc_episode(f"row {i}"):
                _, _, terminated, _, info = env.step(action)
                counts[i] += 1
                if terminated or info["aborted"] or time.monotonic() >= stop_at:
                    break

    t0 = time.monotonic()
    threads = [threading.Thread(target=worker, args=(i,)) for i in range(len(clients))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sum(counts) / (time.monotonic() - t0)


def backend_options(name: str, args, cache: Path, reset: str) -> dict:
    """The options of `make_backend(name, …)` for this bench: every server reads the bench's file cache."""
    if name == "docker":
        from computerrl.envs.fleet.backends.docker import engine_urls

        return {"image": args.docker_image, "hosts": engine_urls(args.docker_hosts) or None,
                "cache": str(cache.resolve()), "server_args": ("--reset", reset)}
    return {"workdir": args.workdir, "server_args": ("--cache", str(cache.resolve()), "--reset", reset)}


def server_pid(backend, handle) -> int:
    """The pid at the top of a server's processes: the server, or its container's init."""
    if handle.backend == "local":
        return handle.detail["pid"]
    return backend._container(handle).attrs["State"]["Pid"]


def measure(backend_name: str, reset: str, args, counts: list[int], task: dict, cache: Path) -> dict:
    # an unknown name lists the known ones
    backend = make_backend(backend_name, **backend_options(backend_name, args, cache, reset))
    name = f"{backend_name}, reset {reset}"
    sup = Supervisor(backend, args.max_desktops, parallel_starts=2, start_timeout_s=300)
    clients: list[EnvClient] = []
    try:  # start-up included: servers run in their own sessions, so Ctrl-C does not reach them
        t0 = time.monotonic()
        sup.start_all()
        startup_s = time.monotonic() - t0
        alive = [i for i in sup.ids if sup.status[i] == HEALTHY]
        per_server = startup_s / math.ceil(args.max_desktops / 2)  # 2 start at once
        print(f"[{name}] started {len(alive)}/{args.max_desktops} desktops healthy in {startup_s:.0f} s "
              f"({per_server:.1f} s a server, 2 started at once)")
        clients = [EnvClient(sup.handles[i].address, sup.handles[i].token, timeout_s=120) for i in alive]

        # Every desktop opens a Calc document, as it would in a rollout; then all must still be healthy.
        def open_calc(c: EnvClient) -> None:
            env = DesktopEnv(c, 0, max_steps=10)
            env.reset()
            env.step(response("Agent.open_app('calc')"))

        with ThreadPoolExecutor(4) as ex:
            list(ex.map(open_calc, clients))
        sup.check(restart=False)
        alive_max = sum(sup.status[i] == HEALTHY for i in alive)
        pss = [pss_mb(server_pid(backend, sup.handles[i])) for i in alive]
        with open("/proc/meminfo") as f:
            meminfo = {line.split(":")[0]: int(line.split()[1]) for line in f}
        print(f"[{name}] desktops alive together: {alive_max}; PSS per desktop with Calc open: median "
              f"{statistics.median(pss):.0f} MB (min {min(pss):.0f}, max {max(pss):.0f}); "
              f"machine memory available: {meminfo['MemAvailable'] / 1024 ** 2:.1f} GB")

        steps_per_s = {}
        for k in counts:
            if k <= len(clients):
                steps_per_s[k] = throughput(clients[:k], args.seconds)
                print(f"[{name}] scripted policy on {k:2d} desktops: {steps_per_s[k]:.2f} steps/s")

        before = resets_by_spare(clients[0])
        resets, steps = latency(clients[0], args.episodes)
        task_reset = task_resets(clients[0], task, args.episodes)
        spared, in_place = (a - b for a, b in zip(resets_by_spare(clients[0]), before))
        cpu, alone, with_calc = spaced_resets(clients[0], args.cpu_resets, args.reset_gap_s)
        print(f"[{name}] reset with a task (download .xlsx from the cache + open it + first observation): "
              f"p50 {statistics.median(task_reset):.3f} s, p90 {statistics.quantiles(task_reset, n=10)[-1]:.3f} s")
        print(f"[{name}] reset (clean + new Calc document + first observation): p50 {statistics.median(resets):.3f} s, "
              f"p90 {statistics.quantiles(resets, n=10)[-1]:.3f} s over {len(resets)}")
        print(f"[{name}] step (action + screenshot + a11y tree), {len(alive)} desktops alive: "
              f"p50 {statistics.median(steps) * 1000:.0f} ms, p90 {statistics.quantiles(steps, n=10)[-1] * 1000:.0f} ms "
              f"over {len(steps)}")
        print(f"[{name}] {spared} of {spared + in_place} resets swapped in a spare; resets {args.reset_gap_s:g} s "
              f"apart: Reset alone p50 {statistics.median(alone):.3f} s, with a new Calc document "
              f"{statistics.median(with_calc):.3f} s, {cpu:.2f} CPU-s each (what they left to the background "
              f"included)")
        return {"reset_p50_s": round(statistics.median(resets), 3),
                "reset_cpu_s": round(cpu, 3), "resets_from_spare": round(spared / max(1, spared + in_place), 2),
                "spaced_reset_alone_p50_s": round(statistics.median(alone), 3),
                "spaced_reset_p50_s": round(statistics.median(with_calc), 3),
                "reset_task_p50_s": round(statistics.median(task_reset), 3),
                "step_p50_s": round(statistics.median(steps), 3), "startup_s": round(startup_s, 1),
                "startup_s_per_server": round(per_server, 2),
                "pss_mb_per_desktop": round(statistics.median(pss), 1),
                "desktops_alive_max": alive_max, "desktops_started": args.max_desktops,
                **{f"steps_per_s_{k}": round(v, 2) for k, v in steps_per_s.items()}}
    finally:
        for c in clients:
            c.close()
        sup.stop_all()


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--backend", default="local", help="where servers run: local, docker, or both (local,docker): "
                                                      "one run measures each in turn, for a comparison")
    p.add_argument("--max-desktops", type=int, default=48, help="desktops started together")
    p.add_argument("--throughput", default="1,4,16", help="desktop counts for steps/s")
    p.add_argument("--seconds", type=float, default=20.0, help="duration of each throughput run")
    p.add_argument("--reset", default="in-place,spare", help="how desktops reset: in-place, spare, or both "
                                                              "(in-place,spare): each measured in turn")
    p.add_argument("--episodes", type=int, default=10, help="reset+steps rounds for the latency figures")
    p.add_argument("--cpu-resets", type=int, default=5, help="resets the CPU figure is measured over")
    p.add_argument("--reset-gap-s", type=float, default=6.0,
                   help="pause after each of those resets, for the next spare's build to end within it")
    p.add_argument("--workdir", default="/tmp/computerrl-bench", help="desktops' state folders")
    p.add_argument("--docker-image", default="computerrl-desktop:latest", help="image for --backend docker")
    p.add_argument("--docker-hosts", default="", help="engines on this machine, comma-separated (default: "
                                                      "$DOCKER_HOST): the bench reads their containers' memory "
                                                      "and mounts its file cache")
    args = p.parse_args(argv)
    counts = [int(c) for c in args.throughput.split(",") if c]
    backends = [b for b in args.backend.split(",") if b]
    resets = [r for r in args.reset.split(",") if r]

    cache = Path(args.workdir) / "cache"
    task = task_cache(cache)
    result = {}
    for backend in backends:
        for reset in resets:
            # each figure once per backend and reset kind there are several of (reset_p50_s_docker_spare, …)
            suffix = "".join(f"_{v}" for v, kinds in ((backend, backends), (reset, resets)) if len(kinds) > 1)
            figures = measure(backend, reset, args, counts, task, cache)
            result.update({f"{k}{suffix.replace('-', '_')}": v for k, v in figures.items()})
    print(json.dumps(result))


if __name__ == "__main__":
    main()
