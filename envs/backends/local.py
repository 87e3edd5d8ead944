"""The default backend: env servers as subprocesses of this machine, on loopback ports.

Each server runs in its own process session, so stopping it kills its desktops (Xvfb,
soffice, …) with it, and a server started by a detached `spawn-envs` can be stopped later
from its pid alone.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

from computerrl.envs.backends.base import EnvHandle, register_backend


@register_backend("local")
class LocalBackend:
    def __init__(self, workdir: Path | str | None = None, *, python: str = sys.executable,
                 start_timeout_s: float = 30.0, server_args: tuple[str, ...] = ()):
        # workdir: where each server keeps its desktops' state and logs (default: a temp folder)
        self.workdir = Path(workdir) if workdir else Path(os.environ.get("TMPDIR", "/tmp")) / "computerrl-envs"
        self.python, self.start_timeout_s, self.server_args = python, start_timeout_s, tuple(server_args)

    def start(self, env_id: str, *, desktops: int = 1) -> EnvHandle:
        state = self.workdir / env_id
        state.mkdir(parents=True, exist_ok=True)
        with open(state / "server.log", "ab") as log:
            proc = subprocess.Popen(
                [self.python, "-m", "computerrl.envs.server", "--host", "127.0.0.1", "--port", "0",
                 "--desktops", str(desktops), "--workdir", str(state), *self.server_args],
                stdout=subprocess.PIPE, stderr=log, stdin=subprocess.DEVNULL, start_new_session=True)
        port = self._read_port(proc, state / "server.log")
        return EnvHandle(env_id=env_id, address=f"127.0.0.1:{port}", backend="local", desktops=desktops,
                         detail={"pid": proc.pid, "workdir": str(state)})

    def _read_port(self, proc: subprocess.Popen, log: Path) -> int:
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
        _kill_group(proc.pid)
        raise RuntimeError(f"env server did not start (exit code {proc.poll()}); see {log}")

    def stop(self, handle: EnvHandle) -> None:
        _kill_group(int(handle.detail["pid"]))

    def alive(self, handle: EnvHandle) -> bool:
        return _alive(int(handle.detail["pid"]))


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"  # a zombie has exited
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False


def _kill_group(pid: int, grace_s: float = 5.0) -> None:
    """Stop a server and its whole process session, politely first."""
    # SIGTERM to the server alone lets it stop its desktops in order; SIGKILL then goes to all.
    for kill, sig, wait_s in ((os.kill, signal.SIGTERM, grace_s), (os.killpg, signal.SIGKILL, 2.0)):
        try:
            kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            break
        deadline = time.monotonic() + wait_s
        while _alive(pid) and time.monotonic() < deadline:
            _reap(pid)
            time.sleep(0.05)
        if not _alive(pid):
            break
    _reap(pid)
    try:  # the desktop processes may outlive a killed server briefly: finish the session
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _reap(pid: int) -> None:
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:  # not our child (started by a detached spawn-envs)
        pass
