"""A private Docker engine on this machine: its own socket, data root, exec root and bridge.

Tests and benchmarks start one (or two, standing for two Docker hosts) beside any engine already running,
and stop it after. Needs root and Debian's `docker.io` (`install.sh --all` installs it).

    with PrivateEngine(Path("/var/tmp/engine-a"), index=1) as engine:   # DOCKER_HOST=engine.url
        ...
    python -m computerrl.envs.fleet.private_engine /var/tmp/engine-a        # the same from a shell, until Ctrl-C

Each engine gets a bridge of its own (`crl-br<index>`, 172.30.<index>.0/24): two engines would otherwise
both claim docker0. No iptables rules: published ports go through Docker's userland proxy, and images
are built with the host's network (envs/fleet/docker_image.sh), so nothing here needs NAT.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from pathlib import Path


class EngineError(RuntimeError):
    pass


def _command(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


class PrivateEngine:
    def __init__(self, root: Path | str, index: int = 1):
        if not 1 <= index <= 254:
            raise ValueError("index: 1 to 254 (it names the bridge and its subnet)")
        self.root, self.index = Path(root).resolve(), index
        self.bridge = f"crl-br{index}"
        # A short exec root: containerd's sockets live there, and a unix socket path has 108 bytes at most.
        self.exec_root = Path(f"/run/crl-engine-{index}")
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"unix://{self.root}/docker.sock"

    def start(self, timeout_s: float = 60.0) -> "PrivateEngine":
        if os.geteuid() != 0:
            raise EngineError("a private Docker engine needs root")
        if shutil.which("dockerd") is None:
            raise EngineError("dockerd is not installed: run `bash install.sh --all` or `apt-get install docker.io`")
        self.root.mkdir(parents=True, exist_ok=True)
        pidfile = self.root / "dockerd.pid"
        pid = pidfile.read_text().strip() if pidfile.exists() else ""
        if pid.isdigit() and _command(int(pid)) == "dockerd":  # a stale file may name another process
            raise EngineError(f"a dockerd (pid {pid}) already runs on {self.root}")
        (self.root / "daemon.json").write_text("{}")  # this engine's settings alone, never the host's
        self._bridge_up()
        log = open(self.root / "dockerd.log", "ab")
        self.proc = subprocess.Popen(
            ["dockerd", "--config-file", str(self.root / "daemon.json"), "--host", self.url,
             "--data-root", str(self.root / "data"), "--exec-root", str(self.exec_root), "--pidfile", str(pidfile),
             "--bridge", self.bridge, "--iptables=false", "--ip-masq=false",
             # Its own namespaces, should it share a system containerd with another engine.
             "--containerd-namespace", f"crl-{self.index}", "--containerd-plugins-namespace", f"crl-{self.index}-p"],
            stdout=log, stderr=log, stdin=subprocess.DEVNULL, start_new_session=True)
        log.close()
        deadline = time.monotonic() + timeout_s
        while not self.answers() or self.proc.poll() is not None:
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise EngineError(f"dockerd did not start; see {self.root / 'dockerd.log'}")
            time.sleep(0.3)
        return self

    def answers(self) -> bool:
        import docker

        try:
            client = docker.DockerClient(base_url=self.url, timeout=5)
        except (docker.errors.DockerException, OSError):
            return False
        try:
            return bool(client.ping())
        except (docker.errors.DockerException, OSError):
            return False
        finally:
            client.close()

    def stop(self) -> None:
        """SIGTERM (dockerd stops its containers first), then SIGKILL after a minute; the bridge and the
        exec root go too (dockerd leaves its network namespace mounted there)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        subprocess.run(["ip", "link", "delete", self.bridge], capture_output=True)
        subprocess.run(["umount", str(self.exec_root / "netns" / "default")], capture_output=True)
        shutil.rmtree(self.exec_root, ignore_errors=True)

    def _bridge_up(self) -> None:
        if subprocess.run(["ip", "link", "show", self.bridge], capture_output=True).returncode != 0:
            subprocess.run(["ip", "link", "add", self.bridge, "type", "bridge"], check=True, capture_output=True)
            subprocess.run(["ip", "addr", "add", f"172.30.{self.index}.1/24", "dev", self.bridge], check=True,
                           capture_output=True)
        subprocess.run(["ip", "link", "set", self.bridge, "up"], check=True, capture_output=True)

    def __enter__(self) -> "PrivateEngine":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


if __name__ == "__main__":
    import argparse

    p = argparse.ArgumentParser(description="Run a private Docker engine until Ctrl-C.")
    p.add_argument("root", type=Path, help="its folder: socket, data root, log")
    p.add_argument("--index", type=int, default=1, help="1-254: names its bridge crl-br<index> and subnet")
    args = p.parse_args()
    with PrivateEngine(args.root, args.index) as engine:
        # Blocked once dockerd runs (a child would inherit the mask), then taken by sigwait: the engine stops.
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
        print(f"export DOCKER_HOST={engine.url}", flush=True)
        signal.sigwait({signal.SIGINT, signal.SIGTERM})
