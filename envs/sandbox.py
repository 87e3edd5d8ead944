"""A desktop's sandbox: the namespaces every process the agent or a task can reach runs in.

Built with Debian's bubblewrap, per desktop: its own user, pid, ipc, uts and (unless a task needs
it) network namespaces; the system read-only; a private writable `/home/user` (the literal path
OSWorld's tasks name), `/tmp` and `/run/user/1000`; Debian's own python3 and PATH; no view of the
project, the env server, its state and token, other desktops or any host process. Inside, the user
is `user` (uid 1000); on the host it is an unprivileged uid — the server's own, or `nobody` when
the server runs as root — so even a sandbox escape would not be root. `sudo -S` with OSWorld's
password `password` gives a root that exists only inside a nested user namespace.

The env server stays outside and drives the desktop through sockets that only it and this desktop
share: X (Xvfb runs outside, its socket bound in), the AT-SPI bus and LibreOffice's UNO pipe (both
made inside, in folders the server reaches on the host side). Processes are started, watched and
killed by `sandbox_init.py`, the sandbox's first process; the pid namespace makes "everything the
desktop runs" exact, so reset kills what `setsid`, `nohup` or `env -i` tried to hide.
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import json
import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

HOME = "/home/user"  # the agent's home, as OSWorld's tasks name it
TMP = "/tmp"
RUN = "/run/user/1000"  # XDG_RUNTIME_DIR: the D-Bus sockets
VAR = "/var/lib/desktop"  # LibreOffice's profile and the desktop's logs (outside home: reset keeps them)
CONF = "/run/desktop"  # read-only files the env server writes for the desktop (window manager, buses)
X11 = "/tmp/.X11-unix"
UID = 1000  # the user inside
INIT = Path(__file__).with_name("sandbox_init.py")
COMPAT = Path(__file__).with_name("compat")  # the pyautogui stand-in and sudo
PATH = "/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin"
PASSWD = "root:x:0:0:root:/root:/bin/bash\nuser:x:1000:1000:user:/home/user:/bin/bash\n" \
         "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"
GROUP = "root:x:0:\nuser:x:1000:\nnogroup:x:65534:\n"
NOBODY = 65534
REQUEST_TIMEOUT_S = 30.0


@contextlib.contextmanager
def unix_path(path: Path | str):
    """`path` for a unix socket's bind or connect: socket paths must fit in 108 bytes, and state
    folders can be deep, so a long one is reached through its open folder (/proc/self/fd/N/name)."""
    path = Path(path)
    if len(os.fsencode(path)) < 100:
        yield str(path)
        return
    fd = os.open(path.parent, os.O_PATH)
    try:
        yield f"/proc/self/fd/{fd}/{path.name}"
    finally:
        os.close(fd)


class SandboxError(RuntimeError):
    """The sandbox could not do what was asked (its message says why)."""


def host_uid() -> int:
    """The unprivileged host uid the sandbox runs as: ours, or nobody when we are root."""
    return NOBODY if os.geteuid() == 0 else os.geteuid()


def python_site() -> str:
    """Debian python3's folder for local packages (on its sys.path), where the stand-ins go."""
    version = os.path.basename(os.path.realpath("/usr/bin/python3")).removeprefix("python")
    return f"/usr/local/lib/python{version}/dist-packages"


@dataclasses.dataclass
class SandboxProcess:
    """A process inside the sandbox, with the bits of `subprocess.Popen` the desktop uses."""

    sandbox: "Sandbox"
    pid: int  # as the sandbox sees it (the pid in _NET_WM_PID and on the AT-SPI bus)
    returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            if not self.sandbox.alive():
                self.returncode = -9
            else:
                code = self.sandbox.request({"op": "poll", "pids": [self.pid]})["exited"].get(str(self.pid))
                self.returncode = code
        return self.returncode

    def kill(self) -> None:
        if self.returncode is None and self.sandbox.alive():
            self.sandbox.request({"op": "kill", "pids": [self.pid]})

    def wait(self, timeout: float | None = None) -> int:
        deadline = time.monotonic() + (timeout if timeout is not None else 1e9)
        while self.poll() is None:
            if time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(str(self.pid), timeout)
            time.sleep(0.02)
        return self.returncode


class Sandbox:
    """One desktop's namespaces on the host folder `root` (home/, tmp/, run/, var/, conf/)."""

    def __init__(self, root: Path, *, x11_dir: Path, network: bool = False):
        self.root, self.x11_dir, self.network = Path(root), Path(x11_dir), network
        self.proc: subprocess.Popen | None = None
        self._lifeline = -1  # write end; closing it (or our death) ends the sandbox
        self._ctl = self.root / "ctl.sock"

    def host(self, inside: str) -> Path:
        """The host path of a path inside the sandbox's own folders (home, tmp, run, var)."""
        for prefix, sub in ((HOME, "home"), (RUN, "run"), (VAR, "var"), (TMP, "tmp")):
            if inside == prefix or inside.startswith(prefix + "/"):
                return self.root / sub / inside[len(prefix):].lstrip("/")
        raise ValueError(f"{inside} is not in a folder the sandbox shares with the host")

    def start(self, timeout_s: float = 20.0) -> "Sandbox":
        uid = host_uid()
        self.root.mkdir(parents=True, exist_ok=True)
        os.chmod(self.root, 0o755)  # nobody walks it to the folders below, each of which is closed
        for sub in ("home", "tmp", "run", "var"):
            (self.root / sub).mkdir(parents=True, exist_ok=True)
            os.chown(self.root / sub, uid, uid)
            os.chmod(self.root / sub, 0o700)
        conf = self.root / "conf"  # read-only inside; copies, so the sandbox needs no view of the package
        (conf / "compat").mkdir(parents=True, exist_ok=True)
        (conf / "passwd").write_text(PASSWD)
        (conf / "group").write_text(GROUP)
        shutil.copyfile(INIT, conf / "init.py")
        for f in COMPAT.iterdir():
            if f.is_file():
                shutil.copyfile(f, conf / "compat" / f.name)
        os.chmod(conf / "compat" / "sudo", 0o755)  # a copy: installs may drop the x bit
        self._ctl.unlink(missing_ok=True)
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        with unix_path(self._ctl) as ctl:
            listener.bind(ctl)  # in the server's state folder: the sandbox never sees this path
        os.chmod(self._ctl, 0o600)
        listener.listen(64)
        life_r, self._lifeline = os.pipe()
        argv = [*self._bwrap_args(), "/usr/bin/python3", "-I", f"{CONF}/init.py", str(listener.fileno()), str(life_r)]
        log = open(self.root / "sandbox.log", "ab")
        try:
            self.proc = subprocess.Popen(argv, pass_fds=(listener.fileno(), life_r), stdin=subprocess.DEVNULL,
                                         stdout=log, stderr=log, env={"PATH": PATH})
        finally:
            log.close()
            listener.close()
            os.close(life_r)
        deadline = time.monotonic() + timeout_s
        while True:  # ready once the keeper answers
            try:
                self.request({"op": "pids"}, timeout_s=2.0)
                return self
            except (OSError, SandboxError):
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    self.close()
                    raise SandboxError(f"the sandbox did not start; see {self.root / 'sandbox.log'}") from None
                time.sleep(0.02)

    def _bwrap_args(self) -> list[str]:
        r = self.root
        prefix = []
        if os.geteuid() == 0:
            # As root we hand the sandbox to `nobody`, who may not walk the folders that lead to ours
            # (a 0700 state folder): a first, privileged bubblewrap shows this desktop's folder at
            # /mnt/desktop in a mount namespace of its own, then becomes nobody and starts the sandbox.
            r = Path("/mnt/desktop")
            prefix = ["bwrap", "--dev-bind", "/", "/", "--tmpfs", "/mnt", "--bind", str(self.root), str(r),
                      "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID", "--die-with-parent", "--",
                      "setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "--"]
        links = [a for link in ("bin", "sbin", "lib", "lib64", "lib32", "libx32") if os.path.islink(f"/{link}")
                 for a in ("--symlink", os.readlink(f"/{link}"), f"/{link}")]  # merged /usr, as on the host
        return [*prefix, "bwrap", "--unshare-user", "--unshare-pid", "--unshare-ipc", "--unshare-uts",
                "--unshare-cgroup-try", *([] if self.network else ["--unshare-net"]),
                "--uid", str(UID), "--gid", str(UID), "--hostname", "desktop", "--die-with-parent", "--new-session",
                "--clearenv", "--setenv", "PATH", PATH,
                "--ro-bind", "/usr", "/usr", *links, "--ro-bind", "/etc", "/etc",
                "--ro-bind", f"{r}/conf/passwd", "/etc/passwd", "--ro-bind", f"{r}/conf/group", "/etc/group",
                # /usr/local is the host's own business: in its place, the stand-ins and nothing else
                "--tmpfs", "/usr/local", "--ro-bind", f"{r}/conf/compat/sudo", "/usr/local/bin/sudo",
                "--symlink", "/usr/bin/python3", "/usr/local/bin/python",
                "--ro-bind", f"{r}/conf/compat", python_site(), "--remount-ro", "/usr/local",
                "--ro-bind-try", "/var/cache/fontconfig", "/var/cache/fontconfig",
                "--ro-bind-try", "/var/lib/dpkg", "/var/lib/dpkg", "--dir", "/var/tmp",
                "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/dev/shm", "--ro-bind", "/sys", "/sys",
                "--bind", f"{r}/tmp", TMP, "--ro-bind", f"{r}/{self.x11_dir.relative_to(self.root)}", X11,
                "--bind", f"{r}/home", HOME, "--tmpfs", "/run", "--bind", f"{r}/run", RUN,
                "--bind", f"{r}/var", VAR, "--ro-bind", f"{r}/conf", CONF,
                "--remount-ro", "/run", "--remount-ro", "/", "--chdir", HOME]

    # ---- requests to the keeper inside -----------------------------------------------------
    def request(self, req: dict, timeout_s: float = REQUEST_TIMEOUT_S) -> dict:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(timeout_s)
            with unix_path(self._ctl) as ctl:
                s.connect(ctl)
            s.sendall(json.dumps(req).encode() + b"\n")
            with s.makefile("rb") as f:
                line = f.readline()
        if not line:
            raise SandboxError(f"the sandbox did not answer {req['op']!r} (it died?)")
        reply = json.loads(line)
        if "error" in reply:
            raise SandboxError(reply["error"])
        return reply

    def spawn(self, argv: list[str], *, env: dict[str, str], cwd: str = HOME, log: str | None = None) -> SandboxProcess:
        reply = self.request({"op": "spawn", "argv": argv, "env": env, "cwd": cwd, "log": log})
        return SandboxProcess(self, reply["pid"])

    def run(self, argv: list[str], *, env: dict[str, str], cwd: str = HOME, input: str = "",
            timeout_s: float = 60.0) -> subprocess.CompletedProcess:
        r = self.request({"op": "run", "argv": argv, "env": env, "cwd": cwd, "input": input, "timeout": timeout_s},
                         timeout_s=timeout_s + 10)
        return subprocess.CompletedProcess(argv, r["returncode"], r["stdout"], r["stderr"])

    def pids(self) -> set[int]:
        return set(self.request({"op": "pids"})["pids"])

    def kill_all(self, keep: set[int]) -> int:
        """SIGKILL every process of the sandbox but `keep` (and the keeper); how many were killed."""
        return self.request({"op": "kill_all", "keep": sorted(keep)})["killed"]

    def wipe(self, dirs: list[str], *, keep: list[str] = (), skeleton: list[str] = ()) -> None:
        """Empty folders (except the paths matching a glob of `keep`), then create the `skeleton` folders."""
        self.request({"op": "wipe", "dirs": list(dirs), "keep": list(keep), "skeleton": list(skeleton)})

    def write(self, path: str, data: bytes, mode: int = 0o644) -> None:
        """Write a file as the sandbox's user, through its view of the file system."""
        self.request({"op": "write", "path": path, "data": base64.b64encode(data).decode(), "mode": mode})

    def read(self, path: str, limit: int = -1) -> bytes | None:
        """A file's bytes as the sandbox sees it (None when it is not a regular file)."""
        r = self.request({"op": "read", "path": path, "limit": limit})
        return None if r.get("missing") else base64.b64decode(r["data"])

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def close(self) -> None:
        """End the sandbox and everything in it; safe to call twice."""
        if self._lifeline >= 0:
            os.close(self._lifeline)  # the keeper exits, bubblewrap's pid 1 too, the kernel kills the rest
            self._lifeline = -1
        if self.proc is not None:
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)
        self._ctl.unlink(missing_ok=True)


def start_xvfb(root: Path, width: int, height: int) -> tuple[subprocess.Popen, str]:
    """Xvfb outside the sandbox, in a mount namespace of its own whose /tmp is private.

    Its socket file lands in `root/x11` (bound into the sandbox as /tmp/.X11-unix) and its lock
    file in that private /tmp, so nothing is left in the host's /tmp when it dies, however it
    dies. The env server reaches it through the abstract socket of the same display.
    """
    (root / "x11").mkdir(parents=True, exist_ok=True)
    os.chmod(root / "x11", 0o755)
    r, w = os.pipe()
    log = open(root / "xvfb.log", "ab")
    try:
        # -displayfd: the X server picks a free display number itself (abstract sockets collide), so
        # servers never race for one.
        proc = subprocess.Popen(
            ["bwrap", "--dev-bind", "/", "/", "--tmpfs", "/tmp", "--bind", str(root / "x11"), X11,
             "--unshare-pid", "--die-with-parent", "--new-session", "--",
             "Xvfb", "-displayfd", str(w), "-screen", "0", f"{width}x{height}x24", "-nolisten", "tcp", "-noreset",
             "-dpi", "96"], env={"PATH": os.environ.get("PATH", PATH)}, pass_fds=(w,), stdin=subprocess.DEVNULL,
            stdout=log, stderr=log)
    finally:
        log.close()
        os.close(w)
    with os.fdopen(r) as f:
        number = f.readline().strip()
    if not number:
        proc.kill()
        raise SandboxError(f"Xvfb failed to start; see {root / 'xvfb.log'}")
    return proc, f":{number}"


def check_bwrap() -> None:
    """A clear error when bubblewrap is missing (install.sh installs it)."""
    if shutil.which("bwrap") is None:
        raise SandboxError("bubblewrap (bwrap) is not installed: run `bash install.sh` or `apt-get install bubblewrap`")

