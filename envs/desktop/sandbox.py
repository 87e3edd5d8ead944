"""A desktop's sandbox: the namespaces every process the agent or a task can reach runs in.

Built with Debian's bubblewrap, per desktop: its own user, pid, ipc, uts and network namespaces;
the system read-only; private RAM-backed folders of bounded size for `/home/user` (the literal path
OSWorld's tasks name), `/tmp`, `/dev/shm`, `/run/user/1000` and `/var/lib/desktop`, which nothing
on the host can see or follow; Debian's own python3 and PATH; no view of the project, the env
server, its state and token, other desktops or any host process. Inside, the user is `user`
(uid 1000); on the host it is an unprivileged uid — the server's own, or `nobody` when the server
runs as root — so even a sandbox escape would not be root. `sudo -S` with OSWorld's password
`password` gives a root that exists only inside a nested user namespace.

Two trusted processes live inside (`sandbox_init.py`): the keeper, pid 1 of the sandbox, which reads
and writes files and runs the commands that decide a score, and the session, pid 1 of a nested
user and pid namespace where the whole desktop runs. Nothing the agent starts can see, signal or
trace the keeper, and neither can be killed, stopped, traced or robbed of a file descriptor. A desktop with network gets outbound access
through slirp4netns in its own namespace (never the host's network, never the host's loopback).

The env server stays outside and drives the desktop through sockets that only it and this desktop
share: X (Xvfb runs outside, its socket bound in read-only, a cookie required), the AT-SPI bus and
LibreOffice's UNO pipe (both made inside). It reaches the latter through the sandbox's own root,
one path component at a time and following no link (`open_socket`), so a link the agent plants
never leads it anywhere else.
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import errno
import json
import os
import select
import shutil
import socket
import stat
import struct
import subprocess
import threading
import time
from pathlib import Path

from computerrl.envs.desktop.cgroup import Cgroup

HOME = "/home/user"  # the agent's home, as OSWorld's tasks name it
TMP = "/tmp"
SHM = "/dev/shm"
RUN = "/run/user/1000"  # XDG_RUNTIME_DIR: the D-Bus sockets
VAR = "/var/lib/desktop"  # LibreOffice's profile and temporary files, the desktop's logs (outside home)
CONF = "/run/desktop"  # read-only files the env server writes for the desktop (window manager, buses, X cookie)
X11 = "/tmp/.X11-unix"
UID = 1000  # the user inside
INIT = Path(__file__).with_name("sandbox_init.py")
COMPAT = Path(__file__).with_name("compat")  # stand-ins: pyautogui, and programs in bin/ (sudo, google-chrome)
# Stand-ins whose program is not on the host's PATH: what must be installed for them to run.
STAND_IN_NEEDS = {"code": "/usr/lib/computerrl/code-server/node_modules/.bin/code-server"}  # install_code_server.sh
PATH = "/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin"
PASSWD = "root:x:0:0:root:/root:/bin/bash\nuser:x:1000:1000:user:/home/user:/bin/bash\n" \
         "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"
GROUP = "root:x:0:\nuser:x:1000:\nnogroup:x:65534:\n"
NOBODY = 65534
REQUEST_TIMEOUT_S = 30.0
MB = 1 << 20
COPY_CHUNK = 4 * MB  # what `copy_out` holds in memory at once
RUN_MB, VAR_MB = 64, 512  # the bus sockets; the office's profile, temp files and the logs
SLIRP_DNS = "10.0.2.3"  # slirp4netns's resolver, inside a desktop with network
SO_PEERPIDFD = 77  # Linux 6.5 (asm-generic/socket.h); Python 3.11 has no name for it


@dataclasses.dataclass(frozen=True)
class Limits:
    """What one desktop may take; a desktop that reaches a limit fails itself, never the host."""

    home_mb: int = 2048  # /home/user, in RAM (counted in memory_mb)
    tmp_mb: int = 1024  # /tmp, in RAM
    shm_mb: int = 256  # /dev/shm, in RAM (browsers share memory through it)
    processes: int = 1024  # processes and threads of the desktop's user (its sudo root included)
    memory_mb: int = 4096  # everything the desktop runs and keeps in RAM (a cgroup: root only; 0 = no cap)

    def __post_init__(self):
        for name, value in dataclasses.asdict(self).items():
            if value < (0 if name == "memory_mb" else 1):
                raise ValueError(f"limit {name} must be positive (memory_mb: 0 means no cap), got {value}")


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
    """A process of the desktop's session, with the bits of `subprocess.Popen` the desktop uses."""

    sandbox: "Sandbox"
    pid: int  # as the session sees it (the pid in _NET_WM_PID and on the AT-SPI bus)
    returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            if not self.sandbox.alive():
                self.returncode = -9
            else:
                self.returncode = self.sandbox.poll([self.pid]).get(self.pid)
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
    """One desktop's namespaces; the host folder `root` holds only what the server writes for it
    (conf/, the X socket's folder, the control sockets, the log)."""

    def __init__(self, root: Path, *, x11_dir: Path, network: bool = False, limits: Limits = Limits(),
                 cgroup: Cgroup | None = None):
        self.root, self.x11_dir, self.network, self.limits = Path(root), Path(x11_dir), network, limits
        self.cgroup = cgroup  # where the sandbox and its network helper run (None: no memory cap)
        self.proc: subprocess.Popen | None = None
        self.pid = 0  # host pid of the sandbox's pid 1, the keeper: its root is the sandbox's file system
        self._slirp: subprocess.Popen | None = None
        self._lifeline = self._exit_w = -1  # write ends; closing them (or our death) ends the sandbox, its network
        self._cutting = threading.Lock()
        self._sockets = {"keeper": self.root / "keeper.sock", "session": self.root / "session.sock"}

    def start(self, timeout_s: float = 20.0) -> "Sandbox":
        self.root.mkdir(parents=True, exist_ok=True)
        os.chmod(self.root, 0o755)  # nobody walks it to conf/ and x11/, both read-only inside
        conf = self.root / "conf"  # read-only inside; copies, so the sandbox needs no view of the package
        conf.mkdir(exist_ok=True)
        (conf / "passwd").write_text(PASSWD)
        (conf / "group").write_text(GROUP)
        (conf / "resolv.conf").write_text(f"nameserver {SLIRP_DNS}\n")
        shutil.copyfile(INIT, conf / "init.py")
        shutil.copyfile(INIT.with_name("confine.py"), conf / "confine.py")
        self._copy_stand_ins(conf / "compat")
        listeners = []
        for path in self._sockets.values():  # in the server's state folder: the sandbox never sees these paths
            path.unlink(missing_ok=True)
            listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            with unix_path(path) as short:
                listener.bind(short)
            os.chmod(path, 0o600)
            listener.listen(64)
            listeners.append(listener)
        life_r, self._lifeline = os.pipe()
        info_r, info_w = os.pipe()
        fds = (*(lst.fileno() for lst in listeners), life_r)
        argv = [*self._bwrap_args(info_w), "/usr/bin/python3", "-I", f"{CONF}/init.py", *map(str, fds),
                str(self.limits.processes)]
        log = open(self.root / "sandbox.log", "ab")
        try:
            self.proc = subprocess.Popen(self.cgroup.wrap(argv) if self.cgroup else argv, pass_fds=(*fds, info_w),
                                         stdin=subprocess.DEVNULL, stdout=log, stderr=log, env={"PATH": PATH})
        finally:
            log.close()
            for fd in (*(lst.detach() for lst in listeners), life_r, info_w):
                os.close(fd)
        try:
            self.pid = _read_info(info_r, self.root / "sandbox.log")["child-pid"]
            if self.network:
                self._slirp = self._start_network()
            deadline = time.monotonic() + timeout_s
            for to in self._sockets:  # ready once the keeper and the session answer
                self._wait_answer(to, deadline)
        except BaseException:
            self.close()
            raise
        return self

    @staticmethod
    def _copy_stand_ins(dest: Path) -> None:
        """conf/compat: site/ the Python modules (pyautogui), bin/ the programs that stand in for
        OSWorld's (sudo, google-chrome, …), apps/ the launchers of the apps the session starts apart; each
        executable (a wheel may drop the x bit, or turn a link into a copy)."""
        shutil.rmtree(dest, ignore_errors=True)
        (dest / "site").mkdir(parents=True)
        for f in COMPAT.glob("*.py"):
            shutil.copyfile(f, dest / "site" / f.name)
        for folder in ("bin", "apps"):
            shutil.copytree(COMPAT / folder, dest / folder, symlinks=True)
            for f in (dest / folder).iterdir():
                if not f.is_symlink():
                    os.chmod(f, 0o755)
        (dest / "bin" / "python").symlink_to("/usr/bin/python3")

    def _wait_answer(self, to: str, deadline: float) -> None:
        req = {"op": "ping"} if to == "keeper" else {"op": "pids"}
        while True:
            try:
                self.request(req, to=to, timeout_s=2.0)
                return
            except (OSError, SandboxError):
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    hint = " (it needs user namespaces inside the sandbox: the session nests one)"
                    raise SandboxError(f"the sandbox's {to} did not start{hint}; see {self.root / 'sandbox.log'}") \
                        from None
                time.sleep(0.02)

    def _bwrap_args(self, info_fd: int) -> list[str]:
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

        def ram(mb: int, path: str, mode: str = "0755") -> list[str]:
            return ["--size", str(mb * MB), "--perms", mode, "--tmpfs", path]

        lim = self.limits
        return [*prefix, "bwrap", "--info-fd", str(info_fd), "--unshare-user", "--unshare-pid", "--as-pid-1",
                "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try", "--unshare-net",
                "--uid", str(UID), "--gid", str(UID), "--hostname", "desktop", "--die-with-parent", "--new-session",
                "--clearenv", "--setenv", "PATH", PATH,
                "--ro-bind", "/usr", "/usr", *usr_links(), "--ro-bind", "/etc", "/etc",
                "--ro-bind", f"{r}/conf/passwd", "/etc/passwd", "--ro-bind", f"{r}/conf/group", "/etc/group",
                *(["--ro-bind", f"{r}/conf/resolv.conf", "/etc/resolv.conf"] if self.network else []),
                # /usr/local is the host's own business: in its place, the stand-ins and nothing else
                "--tmpfs", "/usr/local", "--ro-bind", f"{r}/conf/compat/bin", "/usr/local/bin",
                "--ro-bind", f"{r}/conf/compat/site", python_site(), "--remount-ro", "/usr/local",
                "--ro-bind-try", "/var/cache/fontconfig", "/var/cache/fontconfig",
                "--ro-bind-try", "/var/lib/dpkg", "/var/lib/dpkg", "--dir", "/var/tmp",
                "--proc", "/proc", "--dev", "/dev", *ram(lim.shm_mb, SHM, "1777"), "--remount-ro", "/dev",
                "--ro-bind", "/sys", "/sys",
                *ram(lim.tmp_mb, TMP, "1777"), "--ro-bind", f"{r}/{self.x11_dir.relative_to(self.root)}", X11,
                *ram(lim.home_mb, HOME), "--tmpfs", "/run", *ram(RUN_MB, RUN, "0700"), *ram(VAR_MB, VAR),
                "--ro-bind", f"{r}/conf", CONF, "--remount-ro", "/run", "--remount-ro", "/", "--chdir", HOME]

    def _start_network(self) -> subprocess.Popen:
        """Outbound network for the sandbox's own namespace: slirp4netns, with the host's loopback cut off."""
        if shutil.which("slirp4netns") is None:
            raise SandboxError("a desktop with network needs slirp4netns: run `bash install.sh` "
                               "or `apt-get install slirp4netns`")
        ready_r, ready_w = os.pipe()
        exit_r, self._exit_w = os.pipe()  # closed by close() or our death: slirp4netns then exits
        # As root it joins the namespace by path (entering the sandbox's user namespace, as a process
        # by pid does, is refused to root there); otherwise by pid, as rootless containers do.
        target = ["--netns-type=path", f"/proc/{self.pid}/ns/net"] if os.geteuid() == 0 else [str(self.pid)]
        argv = ["slirp4netns", "--configure", "--mtu=65520", "--disable-host-loopback", "--enable-sandbox",
                "--enable-seccomp",
                f"--ready-fd={ready_w}", f"--exit-fd={exit_r}", *target, "tap0"]
        with open(self.root / "network.log", "ab") as log:
            proc = subprocess.Popen(self.cgroup.wrap(argv) if self.cgroup else argv, pass_fds=(ready_w, exit_r),
                                    stdin=subprocess.DEVNULL, stdout=log, stderr=log)
        os.close(ready_w)
        os.close(exit_r)
        with os.fdopen(ready_r, "rb") as ready:
            if not select.select([ready], [], [], 30)[0] or ready.read(1) != b"1":
                proc.kill()
                proc.wait()
                said = [line for line in (self.root / "network.log").read_text(errors="replace").splitlines()
                        if line.strip() and not line.startswith(("WARNING", "child failed"))]
                raise SandboxError("slirp4netns did not bring the desktop's network up"
                                   + (f": {said[-1]}" if said else f"; see {self.root / 'network.log'}"))
        return proc

    # ---- requests to the keeper and the session inside --------------------------------------
    def request(self, req: dict, *, to: str = "session", timeout_s: float = REQUEST_TIMEOUT_S,
                fds: list[int] | None = None) -> dict:
        """One request to the keeper or the session (see sandbox_init.py for what each serves);
        descriptors sent with the reply are appended to `fds` (closed here when `fds` is None)."""
        got, chunks = [], [b""]
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
                s.settimeout(timeout_s)
                with unix_path(self._sockets[to]) as path:
                    s.connect(path)
                s.sendall(json.dumps(req).encode() + b"\n")
                while not chunks[-1].endswith(b"\n"):  # one line (a command's output: up to 2 MB)
                    data, passed, _, _ = socket.recv_fds(s, 1 << 20, 1)
                    got += passed
                    if not data:
                        break
                    chunks.append(data)
        finally:
            for fd in got if fds is None else []:
                os.close(fd)
            if fds is not None:
                fds += got
        line = b"".join(chunks)
        if not line:
            raise SandboxError(f"the sandbox's {to} did not answer {req['op']!r} (it died?)")
        reply = json.loads(line)
        if "error" in reply:
            raise SandboxError(reply["error"])
        return reply

    def connect(self, port: int, program: str = "", timeout_s: float = 5.0,
                launched: dict | None = None) -> socket.socket:
        """A TCP connection to `port` on the sandbox's own loopback, made by the keeper inside; with
        `program`, only if processes running it, apps the session launched (`launch_apps`), started as
        `launched` says the desktop starts it (sandbox_init.py `_otherwise_started`), alone listen there."""
        fds: list[int] = []
        started = self.request({"op": "launched"})["launched"] if program else {}
        try:
            self.request({"op": "connect", "port": port, "program": program, "timeout": timeout_s,
                          **(launched or {}), "started": started}, to="keeper", fds=fds, timeout_s=timeout_s + 5)
        except BaseException:
            for fd in fds:
                os.close(fd)
            raise
        if len(fds) != 1:
            raise SandboxError(f"the keeper sent {len(fds)} descriptors for a connection to port {port}")
        return socket.socket(fileno=fds[0])

    def launch_apps(self, env: dict[str, str], log: str) -> int:
        """The environment and log of the apps the session launches (VLC, Chromium: the desktop's `vlc`,
        `google-chrome`… ask it to, whoever runs them), each apart from every other program; Landlock's ABI
        version, 0 when the kernel has none (then the agent's programs can trace the apps)."""
        return self.request({"op": "apps", "env": env, "log": log})["landlock"]

    def spawn(self, argv: list[str], *, env: dict[str, str], cwd: str = HOME, log: str | None = None) -> SandboxProcess:
        reply = self.request({"op": "spawn", "argv": argv, "env": env, "cwd": cwd, "log": log})
        return SandboxProcess(self, reply["pid"])

    def run(self, argv: list[str], *, env: dict[str, str], cwd: str = HOME, input: str = "",
            timeout_s: float = 60.0, trusted: bool = False) -> subprocess.CompletedProcess:
        """Run to completion in the desktop's session, or — `trusted`, for what decides a score —
        beside the keeper, where nothing the agent left running can see, trace or signal it."""
        r = self.request({"op": "run", "argv": argv, "env": env, "cwd": cwd, "input": input, "timeout": timeout_s},
                         to="keeper" if trusted else "session", timeout_s=timeout_s + 10)
        return subprocess.CompletedProcess(argv, r["returncode"], r["stdout"], r["stderr"])

    def poll(self, pids: list[int], timeout_s: float = REQUEST_TIMEOUT_S) -> dict[int, int]:
        """{pid: exit code} of those of `pids` that ended."""
        exited = self.request({"op": "poll", "pids": pids}, timeout_s=timeout_s)["exited"]
        return {int(pid): code for pid, code in exited.items()}

    def pids(self) -> dict[int, int]:
        """{pid: start time} of every process of the desktop's session (the start time tells a reused pid)."""
        return {int(pid): start for pid, start in self.request({"op": "pids"})["pids"].items()}

    def kill_all(self, keep: dict[int, int]) -> int:
        """SIGKILL every process of the desktop's session but `keep` ({pid: start time}, as `pids` gave
        them: a pid the agent got again after killing a kept process is not kept); how many were killed."""
        return self.request({"op": "kill_all", "keep": {str(pid): start for pid, start in keep.items()}})["killed"]

    def wipe(self, dirs: list[str], *, keep: list[str] = (), skeleton: list[str] = (), empty: list[str] = ()) -> None:
        """Empty folders (except the paths matching a glob of `keep`), create the `skeleton` folders and
        empty the files `empty` (kept, but emptied: the logs a service still writes)."""
        self.request({"op": "wipe", "dirs": list(dirs), "keep": list(keep), "skeleton": list(skeleton),
                      "empty": list(empty)}, to="keeper")

    def write(self, path: str, data: bytes, mode: int = 0o644) -> None:
        """Write a file as the sandbox's user, through its view of the file system."""
        self.request({"op": "write", "path": path, "data": base64.b64encode(data).decode(), "mode": mode},
                     to="keeper")

    def copy(self, source: str, dest: str) -> None:
        """Replace the folder `dest` with a copy of `source` (links copied as links), by the keeper."""
        self.request({"op": "copy", "from": source, "to": dest}, to="keeper")

    def open(self, path: str):
        """A file of the sandbox, open for reading as its user sees it (None when it is not a regular file):
        the keeper opens it and hands over the descriptor, so a file of any size is read here in pieces."""
        fds: list[int] = []
        try:
            missing = self.request({"op": "read", "path": path}, to="keeper", fds=fds).get("missing")
        except BaseException:
            for fd in fds:
                os.close(fd)
            raise
        if missing or len(fds) != 1:
            for fd in fds:
                os.close(fd)
            return None
        return open(fds[0], "rb")

    def read(self, path: str, limit: int = -1) -> bytes | None:
        """A file's bytes as the sandbox sees it, at most `limit` of them (None when it is not a regular file)."""
        f = self.open(path)
        if f is None:
            return None
        with f:
            return f.read(limit)

    def copy_out(self, path: str, dest: Path, limit: int) -> int | None:
        """Copy a file of the sandbox to `dest` on our side, a piece at a time; its size, None when it is
        not a regular file. SandboxError (and no `dest`) when it holds more than `limit` bytes."""
        f = self.open(path)
        if f is None:
            return None
        size = 0
        with f, open(dest, "wb") as out:
            while chunk := f.read(min(COPY_CHUNK, limit + 1 - size)):
                size += len(chunk)
                if size > limit:
                    break
                out.write(chunk)
        if size > limit:
            dest.unlink()
            raise SandboxError(f"{path} is larger than {limit >> 20} MB")
        return size

    def open_socket(self, inside: str) -> int:
        """An O_PATH descriptor of the unix socket at `inside` (a sandbox path): connect to it as
        /proc/self/fd/N. Reached through the sandbox's root one component at a time, following no
        link, and only a socket of the desktop's user is taken; the descriptor keeps naming that
        socket even if the agent later renames, removes or replaces the path."""
        parts = [p for p in inside.split("/") if p]
        if not parts or ".." in parts:
            raise ValueError(f"not a plain absolute path: {inside!r}")
        fd = os.open(f"/proc/{self.pid}/root", os.O_PATH | os.O_DIRECTORY)
        try:
            for i, part in enumerate(parts):
                parent, fd = fd, -1
                try:
                    fd = os.open(part, os.O_PATH | os.O_NOFOLLOW | (os.O_DIRECTORY if i < len(parts) - 1 else 0),
                                 dir_fd=parent)
                finally:
                    os.close(parent)
            st = os.fstat(fd)
            if not stat.S_ISSOCK(st.st_mode) or st.st_uid != host_uid():
                raise SandboxError(f"{inside} is not a socket of the desktop's user: refused")
            return fd
        except BaseException:
            if fd >= 0:
                os.close(fd)
            raise

    @staticmethod
    def listener(fd: int) -> tuple[int, int]:
        """(pid as the desktop's session numbers it, start time) of the process that listens on the unix
        socket `fd` (an `open_socket` descriptor), asked of the kernel, not of whoever answers: a
        connection that is never accepted carries the listener's credentials from its first moment,
        so nothing is sent to a stranger. SandboxError when it cannot be told (gone, not listening,
        its queue full)."""
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
            probe.setblocking(False)  # a squatter that lets its queue fill must not hang us here
            try:
                probe.connect(f"/proc/self/fd/{fd}")
            except OSError as e:
                raise SandboxError(f"nobody accepts on the socket: {e}") from None
            try:  # a descriptor of that very process: a pid reused since cannot pass for it
                pidfd = probe.getsockopt(socket.SOL_SOCKET, SO_PEERPIDFD)
            except OSError as e:
                if e.errno != errno.ENOPROTOOPT:  # the listener's maker is gone
                    raise SandboxError(f"the socket's listener cannot be told: {e}") from None
                pidfd = -1  # before Linux 6.5: the pid alone (a reuse would need the host's pids cycled)
            try:
                pid = _fdinfo_pid(pidfd) if pidfd >= 0 else \
                    struct.unpack("3i", probe.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))[0]
                with open(f"/proc/{pid}/status") as f:
                    nspid = next(line.split()[1:] for line in f if line.startswith("NSpid:"))
                with open(f"/proc/{pid}/stat") as f:
                    start = int(f.read().rpartition(")")[2].split()[19])
                if pidfd >= 0 and _fdinfo_pid(pidfd) != pid:
                    raise OSError("it exited meanwhile")
            except (OSError, StopIteration, ValueError, IndexError) as e:
                raise SandboxError(f"the socket's listener cannot be told: {e}") from None
            finally:
                if pidfd >= 0:
                    os.close(pidfd)
        if len(nspid) != 3:  # this server's namespace, the sandbox's, the session's
            raise SandboxError(f"the socket's listener (pid {pid}) is not a process of the desktop's session")
        return int(nspid[-1]), start

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def _cut_lifelines(self) -> None:
        """The keeper exits, bubblewrap's pid 1 too, the kernel kills the rest; slirp4netns exits.
        Under a lock: `kill` may come from another thread, and a descriptor closed twice could be another's."""
        with self._cutting:
            for fd in (self._lifeline, self._exit_w):
                if fd >= 0:
                    os.close(fd)
            self._lifeline = self._exit_w = -1

    def kill(self) -> None:
        """End the sandbox and everything in it now, from any thread; `close` then waits for it."""
        self._cut_lifelines()
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()

    def close(self) -> None:
        """End the sandbox, everything in it and its network; safe to call twice."""
        self._cut_lifelines()
        for proc in (self.proc, self._slirp):
            if proc is not None:
                try:
                    proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(timeout=5)
        self._slirp = None
        for path in self._sockets.values():
            path.unlink(missing_ok=True)


def _fdinfo_pid(pidfd: int) -> int:
    """The pid a pidfd names, in our namespace (-1 once the process is gone)."""
    with open(f"/proc/self/fdinfo/{pidfd}") as f:
        pid = int(next(line.split()[1] for line in f if line.startswith("Pid:")))
    if pid <= 0:
        raise OSError("it has exited")
    return pid


def _read_info(fd: int, log: Path) -> dict:
    """bubblewrap's --info-fd: one JSON object, written once the sandbox exists, then closed."""
    with os.fdopen(fd, "rb") as f:
        data = f.read()
    try:
        return json.loads(data)
    except ValueError:
        raise SandboxError(f"bubblewrap did not start the sandbox; see {log}") from None


def start_xvfb(root: Path, width: int, height: int, auth: Path, cgroup: Cgroup | None = None
               ) -> tuple[subprocess.Popen, str]:
    """Xvfb outside the sandbox, in `x_server_jail`, admitting only the clients that show the cookie in
    `auth` (an Xauthority file). The agent's X clients talk to it: it never runs as root.

    Its socket file lands in `root/x11` (bound into the sandbox as /tmp/.X11-unix) and its lock
    file in its private /tmp, so nothing is left in the host's /tmp when it dies, however it
    dies. The env server reaches it through the abstract socket of the same display, which no
    sandbox sees (each has a network namespace of its own).
    """
    r, w = os.pipe()
    log = open(root / "xvfb.log", "ab")
    # -displayfd: the X server picks a free display number itself (abstract sockets collide), so
    # servers never race for one.
    argv = x_server_jail(root, auth) + ["Xvfb", "-displayfd", str(w), "-auth", "/tmp/xauth", "-screen", "0",
                                        f"{width}x{height}x24", "-nolisten", "tcp", "-noreset", "-dpi", "96"]
    try:
        proc = subprocess.Popen(cgroup.wrap(argv) if cgroup else argv,
                                env={"PATH": os.environ.get("PATH", PATH)}, pass_fds=(w,), stdin=subprocess.DEVNULL,
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


def x_server_jail(root: Path, auth: Path) -> list[str]:
    """The command prefix the X server runs under. It runs on the host, in its network namespace (the env
    server reaches it by its abstract socket there), as the sandbox's unprivileged host user, so it is kept
    from what else is there: its own mount and pid namespace whose root holds the system read-only, a private
    /tmp with `root/x11` (for its socket) and the cookie file `auth`, and nothing of the host's state folders
    (the desktops' sockets to their keepers), /run or homes; and a Landlock domain (confine.py --no-network)
    in which it may trace or signal nothing outside, bind or connect no TCP port (the env servers and the
    console on loopback) and connect to no abstract socket made outside it. An X server the agent's clients
    took over would reach nothing of the server's."""
    (root / "x11").mkdir(parents=True, exist_ok=True)
    os.chmod(root / "x11", 0o755)
    become = []
    if os.geteuid() == 0:
        for path in (root / "x11", auth):
            os.chown(path, NOBODY, NOBODY)
        become = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]
    return ["bwrap", "--ro-bind", "/usr", "/usr", *usr_links(), "--ro-bind", "/etc", "/etc",
            "--ro-bind-try", "/var/cache/fontconfig", "/var/cache/fontconfig", "--proc", "/proc", "--dev", "/dev",
            "--perms", "1777", "--tmpfs", "/tmp", "--bind", str(root / "x11"), X11,
            "--ro-bind", str(auth), "/tmp/xauth", "--ro-bind", str(INIT.with_name("confine.py")), "/tmp/confine.py",
            "--remount-ro", "/", "--unshare-pid", "--die-with-parent", "--new-session", "--", *become,
            "/usr/bin/python3", "-I", "-S", "/tmp/confine.py", "--no-network"]


def usr_links() -> list[str]:
    """bubblewrap's options for merged /usr: /bin, /lib… are links on the host, and must be in every jail too (the
    desktop's sandbox, its X server's, and jail.py's)."""
    return [a for link in ("bin", "sbin", "lib", "lib64", "lib32", "libx32") if os.path.islink(f"/{link}")
            for a in ("--symlink", os.readlink(f"/{link}"), f"/{link}")]


def check_bwrap() -> None:
    """A clear error when bubblewrap is missing (install.sh installs it)."""
    if shutil.which("bwrap") is None:
        raise SandboxError("bubblewrap (bwrap) is not installed: run `bash install.sh` or `apt-get install bubblewrap`")
