"""The default backend: env servers as subprocesses of this machine, on loopback ports.

Each server runs in its own process session, so stopping it kills its desktops (Xvfb,
soffice, …) with it, and a server started by a detached `spawn-envs` can be stopped later
from its pid alone. Each start gets its own state folder and its own token (passed in the
environment, never on the command line where `ps` would show it).
"""

from __future__ import annotations

import os
import secrets
import select
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from computerrl.envs.fleet.backends.base import EnvHandle, register_backend

TOKEN_ENV = "COMPUTERRL_ENV_TOKEN"  # read by envs/service/server.py
SERVER_MODULE = b"computerrl.envs.service.server"  # in the argv of every server this backend starts


@register_backend("local")
class LocalBackend:
    def __init__(self, workdir: Path | str | None = None, *, python: str = sys.executable,
                 start_timeout_s: float = 30.0, server_args: tuple[str, ...] = ()):
        # workdir: where each server keeps its desktops' state and logs (default: a temp folder)
        self.workdir = (Path(workdir) if workdir else Path(os.environ.get("TMPDIR", "/tmp")) / "computerrl-envs").resolve()
        self.python, self.start_timeout_s, self.server_args = python, start_timeout_s, tuple(server_args)

    def start(self, env_id: str, *, desktops: int = 1) -> EnvHandle:
        # A fresh folder per start: a restarted or replacement server must not share the home
        # folder and LibreOffice profile of one that may still be shutting down.
        name = f"{env_id}-{secrets.token_hex(3)}"
        state = self.workdir / name
        state.mkdir(parents=True)
        log_path = self.workdir / f"{name}.log"  # beside the state folder: kept after stop() for post-mortems
        token = secrets.token_urlsafe(16)  # even on loopback: other users of this machine can dial it
        with open(log_path, "ab") as log:
            proc = subprocess.Popen(
                [self.python, "-m", SERVER_MODULE.decode(), "--host", "127.0.0.1", "--port", "0",
                 "--desktops", str(desktops), "--workdir", str(state), "--exit-with-parent", *self.server_args],
                stdout=subprocess.PIPE, stderr=log, stdin=subprocess.DEVNULL, start_new_session=True,
                env={**os.environ, TOKEN_ENV: token})
        port = self._read_port(proc, log_path, state)
        return EnvHandle(env_id=env_id, address=f"127.0.0.1:{port}", backend="local", token=token,
                         desktops=desktops, detail={"pid": proc.pid, "workdir": str(state)})

    def _read_port(self, proc: subprocess.Popen, log: Path, state: Path) -> int:
        """The server prints 'LISTENING <port>' once bound (before its desktops finish starting)."""
        deadline = time.monotonic() + self.start_timeout_s
        while time.monotonic() < deadline:
            ready, _, _ = select.select([proc.stdout], [], [], 0.2)
            if ready:
                line = proc.stdout.readline().decode()
                if line.startswith("LISTENING "):
                    proc.stdout.close()
                    return int(line.split()[1])
            if proc.poll() is not None:
                break
        _kill_group(proc.pid, str(state))
        shutil.rmtree(state, ignore_errors=True)
        raise RuntimeError(f"env server did not start (exit code {proc.poll()}); see {log}")

    def stop(self, handle: EnvHandle) -> None:
        workdir = handle.detail.get("workdir", "")
        _kill_group(int(handle.detail["pid"]), workdir)
        if workdir:  # never rmtree("") — that would be the current directory
            shutil.rmtree(workdir, ignore_errors=True)

    def alive(self, handle: EnvHandle) -> bool:
        return _alive(int(handle.detail["pid"]), handle.detail.get("workdir", ""))


def _server_state(pid: int, workdir: str = "") -> str:
    """The process state letter ("R", "S", "Z", …) if `pid` is an env server we started, else "".

    A pid from a manifest or a pid file may be stale: after a crash or a reboot the number can
    name an unrelated process (a login shell, say), which must never be signalled.
    """
    try:
        with open(f"/proc/{pid}/stat") as f:
            state, ppid = f.read().rsplit(")", 1)[1].split()[:2]
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            argv = f.read().split(b"\0")
    except (FileNotFoundError, ProcessLookupError, ValueError):
        return ""
    if state == "Z":  # exited, argv gone; the pid stays reserved until its parent reaps it
        return state if int(ppid) == os.getpid() else ""
    ours = SERVER_MODULE in argv and (not workdir or workdir.encode() in argv)
    return state if ours else ""


def _alive(pid: int, workdir: str = "") -> bool:
    return _server_state(pid, workdir) not in ("", "Z")  # a zombie has exited


def _kill_group(pid: int, workdir: str = "", grace_s: float = 5.0) -> None:
    """Stop a server and its whole process session, politely first; never a process not ours."""
    if not _server_state(pid, workdir):
        return  # gone already, or a reused pid: leave it alone
    # SIGTERM to the server alone lets it stop its desktops in order; SIGKILL then goes to all.
    for kill, sig, wait_s in ((os.kill, signal.SIGTERM, grace_s), (os.killpg, signal.SIGKILL, 2.0)):
        try:
            kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            break
        deadline = time.monotonic() + wait_s
        while _alive(pid, workdir) and time.monotonic() < deadline:
            time.sleep(0.05)
        if not _alive(pid, workdir):
            break
    # The desktop processes may outlive a killed server briefly: finish the session. Done before
    # reaping: while the server is an unreaped zombie its pid (so its session id) cannot be reused.
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    _reap(pid)


def _reap(pid: int) -> None:
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:  # not our child (started by a detached spawn-envs)
        pass
