"""spawn-envs — start real desktops behind env servers and keep them alive.

Starts `--count` env servers with a backend (`local`: subprocesses on loopback ports, the
default; `docker`: one container each on one or more Docker hosts), each hosting
`--desktops-per-env` desktops (Xvfb + D-Bus + AT-SPI + openbox + LibreOffice). Waits until
every server answers Health as healthy, writes the env manifest, then supervises: shows a
live table, restarts a server that died or stayed unhealthy past a grace period (the server
itself already rebuilds a crashed desktop), and on Ctrl-C, SIGTERM or `--stop` stops all.

Departures from OSWorld: no VM per environment and no reboot per episode; a desktop is a set
of processes (~0.2 GB) that resets in place in about a second.

Reads:  nothing
Writes: OUT/manifest   env manifest dataset: env_id, address, backend, status, desktops,
                       token, detail (JSON), restarts — rewritten atomically on every change;
                       a folder only its owner can read (it holds the servers' tokens)
        OUT/spawn-envs.json  the config;  OUT/supervisor.pid while a supervisor runs (one per
                       OUT);  OUT/supervisor.log when detached;  OUT/state  servers' state (local)

    computerrl spawn-envs --count 2 --out runs/demo/envs          # Ctrl-C stops them
    computerrl spawn-envs --count 48 --out runs/envs --detach && computerrl spawn-envs --stop --out runs/envs
    DOCKER_HOST=tcp://gpu1:2375,tcp://gpu2:2375 computerrl spawn-envs --backend docker --publish-ip 0.0.0.0
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from computerrl.data.config import OUT, setting
from computerrl.envs.fleet.pidfile import PID_FILE, is_supervisor, supervisor_pid
from computerrl.envs.desktop.sandbox import Limits
from computerrl.envs.service.spare import NO_RESTORE, RESETS

LOG_FILE, CONFIG_FILE = "supervisor.log", "spawn-envs.json"


@dataclasses.dataclass
class SpawnEnvsConfig:
    out: Path = setting(Path("runs/envs"), OUT, "--out", "-o")  # run folder: manifest, config, supervisor pid/log
    count: int = setting(2, "Env servers to start.")
    desktops_per_env: int = setting(1, "Desktops each server hosts.")
    backend: str = setting("local", "Where env servers run: local (subprocesses here) or docker.")  # registered name
    start_timeout_s: float = setting(180.0, "Seconds a server may take to become healthy.")
    poll_s: float = setting(2.0, "Seconds between health checks.")  # between supervision rounds
    restart: bool = setting(True, "Restart servers that die or stay unhealthy.")
    unhealthy_grace_s: float = setting(20.0, "Seconds a live server may stay unhealthy.")  # before a restart
    parallel_starts: int = setting(4, "Servers started at once.")  # LibreOffice start-up is CPU-bound
    docker_image: str = setting("computerrl-desktop:latest", "Desktop image for --backend docker.")
    docker_hosts: str = setting("", "Comma-separated Docker engine URLs (default: $DOCKER_HOST, else the local "
                                    "socket).")
    publish_ip: str = setting("127.0.0.1", "Interface docker publishes server ports on; 0.0.0.0 for remote engines "
                                           "(the token guards them).")
    cache: Path | None = setting(None, "Task file cache for every server: a folder whose index.json maps URLs to its "
                                       "files (tasks' downloads read only it).")
    network: bool = setting(False, "Desktops get outbound network, each in a namespace of its own without the host's "
                                   "loopback (default: none; a task with \"network\": true still gets it).")
    apis: Path | None = setting(None, "A `build-apis` output folder: its accepted APIs join the built-in ones on every "
                                      "desktop, run inside its sandbox.")
    reset: str = setting("in-place", "How a desktop resets: in-place (its processes killed, its folders emptied) "
                                     "or spare (a pristine desktop built in the background takes its place, its "
                                     "office running: less waiting where a core is free, more CPU and memory).")
    home_mb: int = setting(Limits.home_mb, "Size of each desktop's /home/user, MiB (in RAM).")
    tmp_mb: int = setting(Limits.tmp_mb, "Size of each desktop's /tmp, MiB (in RAM).")
    shm_mb: int = setting(Limits.shm_mb, "Size of each desktop's /dev/shm, MiB (in RAM).")
    max_processes: int = setting(Limits.processes, "Processes and threads each desktop's user may have.")
    memory_mb: int = setting(Limits.memory_mb, "Memory cap of each desktop, its RAM folders included (a cgroup: "
                                               "needs root); 0 = none.")
    console: int = setting(0, "Serve the fleet's web console (as `computerrl console`) on this loopback port beside "
                              "the supervisor; 0 = none.")
    detach: bool = setting(False, "Supervise in the background; return once all are healthy.")
    # --stop: a detached supervisor, or the servers of the manifest
    stop: bool = setting(False, "Stop the envs recorded in --out.")

    def __post_init__(self):
        self.out = Path(self.out)
        if self.cache is not None:
            self.cache = Path(self.cache).resolve()
            # a folder not there yet is one `tasks build` writes once these desktops run (its replays need
            # them): a desktop reads the cache at each task's reset
            if self.cache.exists() and not (self.cache / "index.json").is_file():
                raise ValueError(f"--cache {self.cache}: no index.json there (it maps each URL to a file of the "
                                 "folder; `computerrl tasks build` writes one)")
        if self.apis is not None:
            from computerrl.apis.generated import read_modules

            self.apis = Path(self.apis).resolve()
            read_modules(self.apis)  # says what is wrong with the folder, before any server starts
        if self.count < 1 or self.desktops_per_env < 1:
            raise ValueError("--count and --desktops-per-env must be at least 1")
        if self.detach and self.stop:
            raise ValueError("--detach and --stop exclude each other")
        if self.parallel_starts < 1 or self.poll_s <= 0:
            raise ValueError("--parallel-starts must be ≥ 1 and --poll-s > 0")
        Limits(self.home_mb, self.tmp_mb, self.shm_mb, self.max_processes, self.memory_mb)  # says what is wrong
        if self.reset not in RESETS:
            raise ValueError(f"--reset {self.reset!r}: one of {', '.join(RESETS)}")
        # Building the backend checks its name against the registry (the error lists the known
        # ones) and its options (remote engines with a loopback --publish-ip). Cheap: the backend
        # modules import only the standard library, and no engine is dialed.
        _backend(self)


def _backend(cfg: SpawnEnvsConfig):
    from computerrl.envs.fleet.backends.base import make_backend

    options = {}
    limits = ("--home-mb", str(cfg.home_mb), "--tmp-mb", str(cfg.tmp_mb), "--shm-mb", str(cfg.shm_mb),
              "--max-processes", str(cfg.max_processes), "--memory-mb", str(cfg.memory_mb), "--reset", cfg.reset)
    if cfg.backend == "local":
        args = [*(["--cache", str(cfg.cache)] if cfg.cache else []), *(["--network"] if cfg.network else []),
                *(["--apis", str(cfg.apis)] if cfg.apis else []), *limits]
        options = {"workdir": cfg.out / "state", "server_args": tuple(args)}
    elif cfg.backend == "docker":
        from computerrl.envs.fleet.backends.docker import engine_urls

        hosts = engine_urls(cfg.docker_hosts)
        options = {"image": cfg.docker_image, "hosts": hosts or None, "publish_ip": cfg.publish_ip,
                   "cache": str(cfg.cache) if cfg.cache else None, "network": cfg.network,
                   "apis": str(cfg.apis) if cfg.apis else None, "server_args": limits}
    return make_backend(cfg.backend, **options)


def run(cfg: SpawnEnvsConfig) -> int:
    """Returns the exit code: 0 when all started (and, unless detached, were stopped cleanly)."""
    if cfg.stop:
        return stop(cfg.out)
    if pid := supervisor_pid(cfg.out):
        print(f"a supervisor (pid {pid}) already runs the envs of {cfg.out}; stop it with `computerrl spawn-envs "
              f"--stop --out {cfg.out}`, or pick another --out", file=sys.stderr)
        return 1
    if cfg.detach:
        return _detach(cfg)
    return supervise(cfg)


def supervise(cfg: SpawnEnvsConfig, *, max_rounds: int | None = None) -> int:
    from rich.console import Console
    from rich.live import Live

    from computerrl.data.datasets_io import lineage
    from computerrl.envs.fleet import control
    from computerrl.envs.fleet.manifest import HEALTHY, write_manifest
    from computerrl.envs.fleet.supervisor import Supervisor

    cfg.out.mkdir(parents=True, exist_ok=True)
    (cfg.out / CONFIG_FILE).write_text(json.dumps(dataclasses.asdict(cfg), indent=2, default=str))
    (cfg.out / PID_FILE).write_text(str(os.getpid()))
    sup = Supervisor(_backend(cfg), cfg.count, desktops=cfg.desktops_per_env, start_timeout_s=cfg.start_timeout_s,
                     unhealthy_grace_s=cfg.unhealthy_grace_s, parallel_starts=cfg.parallel_starts)
    card = lineage("spawn-envs", cfg)

    def save():
        write_manifest(cfg.out, *sup.manifest(), sup.restarts, card)

    # SIGTERM (`--stop`) acts as Ctrl-C: it also interrupts the start-up, which can take minutes.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    console = Console(stderr=True)
    all_up, web = False, None
    try:
        with Live(_table(sup), console=console, refresh_per_second=2, transient=not console.is_terminal) as live:
            sup.start_all(on_change=lambda: live.update(_table(sup)))
            save()
            if cfg.console:
                from computerrl.envs.fleet.console import TOKEN_FILE, server

                try:
                    web = server(cfg.out, port=cfg.console).start()
                    console.print(f"console at http://127.0.0.1:{cfg.console}/ (its token: {cfg.out / TOKEN_FILE})")
                except Exception as e:  # noqa: BLE001 - the fleet goes on without its page
                    console.print(f"[red]the console did not start[/]: {e}")
            all_up = all(s == HEALTHY for s in sup.status.values())
            console.print(f"[bold]{sum(s == HEALTHY for s in sup.status.values())}/{cfg.count}[/] env servers "
                          f"healthy; manifest: {cfg.out / 'manifest'}  (Ctrl-C or `computerrl spawn-envs --stop "
                          f"--out {cfg.out}` stops them)")
            console.print(f"{RESETS[cfg.reset]}; {NO_RESTORE}")
            rounds = 0
            while max_rounds is None or rounds < max_rounds:
                time.sleep(cfg.poll_s)
                for command in control.take(cfg.out):  # from the console
                    try:
                        console.print(f"asked for {command}: {sup.command(**command)}", markup=False)
                    except Exception as e:  # noqa: BLE001 - a bad or failed command must not stop the fleet
                        console.print(f"refused {command}: {type(e).__name__}: {e}", markup=False)
                    save()
                if sup.check(restart=cfg.restart):
                    save()
                live.update(_table(sup))
                rounds += 1
    except KeyboardInterrupt:
        pass
    finally:
        if web is not None:
            web.stop()
        console.print("stopping env servers…")
        sup.stop_all()
        save()
        (cfg.out / PID_FILE).unlink(missing_ok=True)
    return 0 if all_up else 1


def _table(sup):
    from rich.table import Table

    t = Table(title="computerrl env servers", expand=False)
    for col in ("env", "address", "status", "desktops", "episodes", "restarts"):
        t.add_column(col)
    for env_id in sup.ids:
        h = sup.handles.get(env_id)
        st = sup.status[env_id]
        color = "green" if st == "healthy" else "yellow" if st in ("starting", "drained") else "red"
        t.add_row(env_id, h.address if h else "-", f"[{color}]{st}[/]", str(sup.desktops),
                  str(sup.episodes[env_id]), str(sup.restarts[env_id]))
    return t


def _detach(cfg: SpawnEnvsConfig) -> int:
    """Re-run this command without --detach in its own session; wait until its manifest is healthy."""
    from computerrl.data.datasets_io import LINEAGE_FILE
    from computerrl.envs.fleet.manifest import MANIFEST_DIR, read_manifest

    cfg.out.mkdir(parents=True, exist_ok=True)
    args = [sys.executable, "-m", "computerrl.cli.main", "spawn-envs"]
    for f in dataclasses.fields(cfg):
        value = getattr(cfg, f.name)
        if f.name in ("detach", "stop") or value is None:
            continue
        flag = "--" + f.name.replace("_", "-")
        args += [flag if value else "--no-" + flag[2:]] if isinstance(value, bool) else [flag, str(value)]
    launched = datetime.datetime.now(datetime.timezone.utc)
    with open(cfg.out / LOG_FILE, "ab") as log:
        proc = subprocess.Popen(args, stdout=log, stderr=log, stdin=subprocess.DEVNULL, start_new_session=True)
    timeout_s = cfg.start_timeout_s * (1 + cfg.count // cfg.parallel_starts) + 30
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            # Only this child's manifest counts, not one an earlier run left in the same --out.
            card = json.loads((cfg.out / MANIFEST_DIR / LINEAGE_FILE).read_text())
            if datetime.datetime.fromisoformat(card["created"]) >= launched:
                handles, status = read_manifest(cfg.out)
                if len(handles) == cfg.count and all(s == "healthy" for s in status.values()):
                    print(f"{cfg.count} env servers healthy (supervisor pid {proc.pid}); "
                          f"manifest: {cfg.out / MANIFEST_DIR}")
                    return 0
        except (FileNotFoundError, ValueError, KeyError):  # not written yet, or being replaced
            pass
        time.sleep(1.0)
    if proc.poll() is not None:
        print(f"the supervisor exited (code {proc.returncode}) before all env servers were healthy; "
              f"see {cfg.out / LOG_FILE}", file=sys.stderr)
    else:
        print(f"env servers did not all become healthy within {timeout_s:.0f} s. The supervisor (pid {proc.pid}) is "
              f"left running and keeps supervising them; see {cfg.out / LOG_FILE}. Stop it and its servers with "
              f"`computerrl spawn-envs --stop --out {cfg.out}`", file=sys.stderr)
    return 1


def _stopper(backend: str, handles: list):
    """A backend able to stop these handles, whichever process or host started them."""
    from computerrl.envs.fleet.backends.base import make_backend

    if backend == "docker":  # every engine of the fleet, with its token (its containers' label); publish_ip
        # only matters for starting
        hosts = {u for h in handles for u in [h.detail["docker_host"], *h.detail.get("engines", [])]}
        return make_backend("docker", hosts=sorted(hosts), publish_ip="0.0.0.0", token=handles[0].token)
    return make_backend(backend)


def stop(out: Path) -> int:
    """Stop the supervisor of `out` (it stops its servers), then any server its manifest still lists."""
    from computerrl.data.datasets_io import LINEAGE_FILE
    from computerrl.envs.fleet.manifest import MANIFEST_DIR, read_manifest, write_manifest

    pid = supervisor_pid(out)
    if pid:
        with contextlib.suppress(ProcessLookupError):  # it may have just exited
            os.kill(pid, signal.SIGTERM)
        for _ in range(600):  # it stops every server first; give it a minute
            if not is_supervisor(pid):
                break
            time.sleep(0.1)
        else:
            print(f"the supervisor (pid {pid}) did not stop within a minute; see {out / LOG_FILE}, or "
                  f"`kill -9 {pid}` and run --stop again to stop its servers", file=sys.stderr)
            return 1
        print(f"stopped the supervisor (pid {pid}) of {out}")
    (out / PID_FILE).unlink(missing_ok=True)  # its supervisor is gone (or the file was stale)
    try:
        handles, status = read_manifest(out)
    except FileNotFoundError:
        if not pid:
            print(f"nothing to stop: no supervisor runs for {out} and it has no env manifest (a supervisor "
                  f"killed before writing one leaves servers only {out / LOG_FILE} names)", file=sys.stderr)
        return 0 if pid else 1
    # A supervisor that stopped cleanly marked its servers stopped; one that was killed did not.
    running = [h for h in handles if status.get(h.env_id) != "stopped"]  # removed ones again: idempotent
    for name in sorted({h.backend for h in handles}):
        backend = _stopper(name, [h for h in handles if h.backend == name])
        for h in running:
            if h.backend == name:
                backend.stop(h)
        if hasattr(backend, "sweep"):  # whatever the statuses: a host down at the supervisor's stop may be back
            backend.sweep()
    if running:
        card = out / MANIFEST_DIR / LINEAGE_FILE
        write_manifest(out, handles, {h.env_id: "stopped" for h in handles},
                       lineage=json.loads(card.read_text()) if card.exists() else None)
        print(f"stopped {len(running)} env servers of {out}")
    elif not pid:
        print(f"nothing to stop: the env servers of {out} are stopped already")
    return 0
