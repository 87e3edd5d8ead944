"""The two trusted processes inside a desktop's sandbox: the keeper and the session.

Both run Debian's own python3 with the standard library only (nothing of computerrl is visible in
the sandbox). Each is pid 1 of its namespace, so nothing inside may kill or stop it, and neither is
dumpable, so nothing may trace it, read or write its memory or copy its file descriptors. Each
serves the env server over a listening socket it inherited as a file descriptor: no path inside
the sandbox names either socket, so nothing in the desktop can dial them.

    keeper   pid 1 of the sandbox. Reads, writes and wipes files through the sandbox's view of the
             file system (a link planted by the agent can only ever point inside the sandbox), and
             runs the commands that decide a score (getters, postconfig), where nothing the agent
             left running can see or touch them. Those commands may run code the agent wrote
             (OSWorld's `bash eval.sh`): whatever they leave behind is killed as they end.
    session  pid 1 of a nested user, pid and mount namespace, forked from the keeper (never exec'd,
             so never dumpable): everything of the desktop runs there, the buses, the window
             manager, the apps, the agent's terminal, the task's setup commands. It starts, watches
             and kills them; the namespace makes "everything the desktop runs" exact, and it caps
             how many processes the desktop's user may have.

Nothing either starts can reach the other's processes, or a process started apart from it: each program
starts in a Landlock domain of its own (confine.py), and a process in a domain may trace, read or write the
memory of, or copy the descriptors of, only processes in its own domain or below it. So the agent's
terminal and whatever it starts cannot touch the apps whose state a score is read from (VLC, Chromium),
which the session starts at the agent's request too (`launch`, through the launcher's socket, which the
desktop's `vlc`, `google-chrome`… ask): the keeper believes such an app only when the session started it
(its pid and start time, from `launched`), never for what the process says of itself.

Both reap the orphans their namespace hands them. One JSON request per connection, one reply:

    {"op": "spawn", "argv": [...], "env": {...}, "cwd": "/home/user", "log": "/var/lib/desktop/logs/x.log"}
        -> {"pid": 7}                                   (session; pids are the session's own)
    {"op": "run", "argv": [...], "env": {...}, "cwd": ..., "input": "", "timeout": 60}
        -> {"returncode": 0, "stdout": "...", "stderr": "..."}   or {"error": "..."}   (both)
    {"op": "poll", "pids": [7]}          -> {"exited": {"7": -9}}   (session; only those that ended)
    {"op": "kill", "pids": [7]}          -> {}                       (session)
    {"op": "pids"}                       -> {"pids": {"7": 1234}}    (session: every process but itself,
                                                                      with its start time)
    {"op": "kill_all", "keep": {"7": 1234}} -> {"killed": 3}         (session: all others, SIGKILL; a kept
                                                                      pid must still have its start time)
    {"op": "apps", "env": {...}, "log": "..."} -> {"landlock": 7}   (session: the environment and log of the apps
                                                                   it launches; 0: no Landlock, nothing confined)
    {"op": "launch", "app": "vlc", "args": [...], "cwd": "..."} -> {"pid": 9}   (session, and the launcher's
                                                                   socket: one of APPS, by its launcher script)
    {"op": "launched"}                   -> {"launched": {"9": 1234}}  (session: the launched apps still running)
    {"op": "wipe", "dirs": [...], "keep": [glob, ...], "skeleton": [...], "empty": [...]} -> {}   (keeper)
    {"op": "write", "path": ..., "data": base64, "mode": 420} -> {}             (keeper)
    {"op": "read", "path": ...} -> {} and, beside it, the file's descriptor, or {"missing": true}   (keeper)
    {"op": "copy", "from": ..., "to": ...} -> {}    (keeper: `to` replaced by a copy of the folder `from`)
    {"op": "ping"} -> {}                                                        (keeper)
    {"op": "connect", "port": 1337, "program": "/usr/lib/chromium/chromium", "environ": {...}, "argv_ends": [...],
     "switches": {...}, "on_display": true} -> {} and, beside the reply, a descriptor: a TCP connection to that
        port of the sandbox's own loopback (an app's control port, e.g. Chromium's DevTools), accepted by a
        process of that program the session launched, as `launched` names them (`{"9": 1234}`, the session's pids
        and their start times), started as the desktop starts it (see `_listening_program`)      (keeper)

The keeper's lifeline descriptor is the read end of a pipe whose write end only the env server
holds: it reaches end-of-file when the server dies, however it dies. The keeper then exits, and
with it, pid 1 of every namespace below, the kernel kills every process of the sandbox.

    python3 -I init.py LISTENER SESSION_LISTENER LIFELINE PROCESSES
"""

import base64
import contextlib
import ctypes
import fnmatch
import json
import os
import resource
import secrets
import shutil
import signal
import socket
import stat
import struct
import subprocess
import sys
import threading
import time

OUTPUT_LIMIT = 1 << 20  # bytes of a command's stdout / stderr sent back
KILL_WAIT_S = 5.0  # how long kill_all waits for its victims to be reaped
LISTENER_SCAN_S = 2.0  # how long `connect` may look for who listens (an agent may hold many descriptors)
X11_DIR = "/tmp/.X11-unix"  # the desktop's X server's socket, bound in read-only
SERVERS = 6  # requests served at once (the watchdog's poll beside a long setup command, …)
UID, HOME = 1000, "/home/user"  # the desktop's user, the same in the session's namespace, and its home
PR_SET_DUMPABLE, CLONE_NEWNS, CLONE_NEWUSER, CLONE_NEWPID = 4, 0x00020000, 0x10000000, 0x20000000
CONFINE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "confine.py")  # Landlock, for what we start
LAUNCHER = "\0computerrl-launch"  # the session's socket for launches, in the sandbox's own network namespace
APPS_DIR = "/run/desktop/compat/apps"  # their launcher scripts
APPS = {"vlc": "vlc", "chromium": "chromium", "chromium-browser": "chromium", "google-chrome": "chromium",
        "google-chrome-stable": "chromium"}  # the name asked for -> its launcher
# The options an app is launched with, besides files and addresses (OSWorld's tasks pass these): any other
# could make the app run a program of the asker's as its own child, within its reach (Chromium's
# --renderer-cmd-prefix, --gpu-launcher…, VLC's interfaces)
OPTIONS = {"chromium": {"remote-debugging-port", "user-data-dir", "new-window", "incognito", "start-maximized",
                        "start-fullscreen", "window-size", "window-position"},
           "vlc": {"start-time", "stop-time", "run-time", "repeat", "loop", "random", "play-and-pause",
                   "play-and-exit", "fullscreen", "no-repeat", "no-loop", "f", "L", "R", "Z"}}
REQUEST_BYTES = 1 << 20  # a request's line on the launcher's socket, at most (the agent's to write)
MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REC, MS_PRIVATE = 2, 4, 8, 0x4000, 1 << 18
libc = ctypes.CDLL(None, use_errno=True)
children: dict[int, subprocess.Popen] = {}  # what `spawn` started, polled by the env server
managed: set[int] = set()  # pids a Popen object waits for: the reaper leaves them to it
lock, run_lock = threading.Lock(), threading.Lock()
session_pid = 0  # (keeper) the session, as the keeper's namespace numbers it
apps: dict = {}  # (session) the environment and log of the apps it launches
launched: dict[int, int] = {}  # (session) pid -> start time of each app it launched


def popen(argv: list[str], **options) -> subprocess.Popen:
    """`argv` started in a Landlock domain of its own (confine.py)."""
    with lock:
        proc = subprocess.Popen([sys.executable, "-I", "-S", CONFINE, *argv],
                                start_new_session=True, **options)
        managed.add(proc.pid)
    return proc


def spawn(req: dict) -> dict:
    log = _open_log(req["log"]) if req.get("log") else subprocess.DEVNULL
    try:
        proc = popen(req["argv"], env=req["env"], cwd=req.get("cwd") or "/", stdin=subprocess.DEVNULL,
                     stdout=log, stderr=log)
    finally:
        if log is not subprocess.DEVNULL:
            os.close(log)
    with lock:
        children[proc.pid] = proc
    return {"pid": proc.pid}


def set_apps(req: dict) -> dict:
    import importlib.util

    apps.update(env=req["env"], log=req["log"])
    spec = importlib.util.spec_from_file_location("confine", CONFINE)
    spec.loader.exec_module(confine := importlib.util.module_from_spec(spec))
    return {"landlock": confine.abi()}


def launch(req: dict) -> dict:
    """One of APPS, by its launcher script, in the desktop's environment whatever the asker's: the agent's
    `vlc` asks for it so, and the app then runs apart from the agent's programs."""
    name, args, cwd = req.get("app"), req.get("args", []), req.get("cwd", "")
    if name not in APPS:
        raise ValueError(f"{name!r} is not an app the desktop launches ({', '.join(sorted(APPS))})")
    if not apps:
        raise RuntimeError("the desktop has not set up its apps yet")
    if not (isinstance(args, list) and all(isinstance(a, str) for a in args)) or not isinstance(cwd, str):
        raise ValueError("args: a list of strings; cwd: a string")
    app, operands = APPS[name], args.index("--") if "--" in args else len(args)
    for arg in args[:operands]:
        if arg.startswith("-") and arg.lstrip("-").split("=", 1)[0] not in OPTIONS[app]:
            raise ValueError(f"{arg}: not an option the desktop launches {name} with (it takes files, addresses "
                             f"and --{', --'.join(sorted(o for o in OPTIONS[app] if len(o) > 1))})")
    poll({"pids": list(launched)})  # those that ended since: reaped, never left as zombies
    reply = spawn({"argv": [f"{APPS_DIR}/{app}", *args], "env": apps["env"], "log": apps["log"],
                   "cwd": cwd if os.path.isdir(cwd) else HOME})
    with lock:
        launched[reply["pid"]] = state_parent_start(reply["pid"])[2]
    return reply


def still_launched(_req: dict) -> dict:
    with lock:
        for pid in [p for p, start in launched.items() if state_parent_start(p)[2] != start]:
            del launched[pid]
        return {"launched": {str(pid): start for pid, start in launched.items()}}


def _open_log(path: str) -> int:
    """A log file to append to; anything else the agent put there (a link, a FIFO) gets /dev/null."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK, 0o644)
    except OSError:
        return os.open(os.devnull, os.O_WRONLY)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        return os.open(os.devnull, os.O_WRONLY)
    os.set_blocking(fd, True)
    return fd


def run(req: dict) -> dict:
    """Run to completion of the command itself: its output goes to nameless files, so what it leaves
    running in the background holds nothing we wait for."""
    out, err = (os.open("/tmp", os.O_TMPFILE | os.O_RDWR, 0o600) for _ in range(2))
    try:
        proc = popen(req["argv"], env=req["env"], cwd=req.get("cwd") or "/", stdin=subprocess.PIPE, stdout=out,
                     stderr=err)
        try:
            proc.communicate(req.get("input", "").encode(), timeout=req.get("timeout", 60))
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            return {"error": f"did not finish within {req.get('timeout', 60):.0f} s"}
        finally:
            managed.discard(proc.pid)
        return {"returncode": proc.returncode, "stdout": _output(out), "stderr": _output(err)}
    finally:
        os.close(out)
        os.close(err)


def _output(fd: int) -> str:
    return os.pread(fd, OUTPUT_LIMIT, 0).decode(errors="replace")


def poll(req: dict) -> dict:
    exited = {}
    with lock:
        for pid in req["pids"]:
            proc = children.get(pid)
            code = proc.poll() if proc is not None else (None if os.path.exists(f"/proc/{pid}") else -9)
            if code is not None:
                exited[str(pid)] = code
                managed.discard(pid)
    return {"exited": exited}


def kill(req: dict) -> dict:
    for pid in req["pids"]:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    poll(req)  # reap our own children at once
    return {}


def all_pids() -> list[int]:
    """Every process of our namespace but ourselves (its pid 1)."""
    return [int(p) for p in os.listdir("/proc") if p.isdigit() and int(p) != os.getpid()]


def state_parent_start(pid: int) -> tuple[str, int, int]:
    """(state letter, parent pid, start time in clock ticks) — the start time tells a pid reused apart."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rpartition(")")[2].split()
        return fields[0], int(fields[1]), int(fields[19])
    except (OSError, IndexError, ValueError):
        return "", 0, 0  # gone meanwhile


def pids(_req: dict) -> dict:
    return {"pids": {str(pid): state_parent_start(pid)[2] for pid in all_pids()}}


def kill_all(req: dict) -> dict:
    keep = {int(pid): start for pid, start in req.get("keep", {}).items()}
    return {"killed": kill_all_but(lambda: {pid for pid in keep if state_parent_start(pid)[2] == keep[pid]})}


def kill_all_but(keep) -> int:
    """SIGKILL every process of our namespace but those `keep()` names; how many were killed.

    This pid namespace holds exactly what it should: whatever escaped its parent, cleared its
    environment or started a new session is still here. Forks racing the sweep: sweep again.
    A killed process lingers as a zombie until its parent reaps it (we, for orphans): wait for
    those, so a caller never sees one. A kept process's zombie children are its own business."""
    killed = set()
    deadline = time.monotonic() + KILL_WAIT_S
    while time.monotonic() < deadline:
        waiting, kept = False, keep() | {os.getpid()}
        for pid in all_pids():
            if pid in kept:
                continue
            state, parent, _ = state_parent_start(pid)
            if state == "Z":
                waiting |= parent not in kept or parent == os.getpid()
                continue
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
                killed.add(pid)
                waiting = True
        if not waiting:
            break
        poll({"pids": list(children)})
        reap()
        time.sleep(0.01)
    with lock:
        for pid in [p for p, c in children.items() if c.returncode is not None]:
            del children[pid]
    return len(killed)


def reap() -> None:
    """Reap the zombies the namespace handed us (we are its pid 1) that no Popen waits for."""
    for pid in all_pids():
        state, parent, _ = state_parent_start(pid)
        if state == "Z" and parent == os.getpid() and pid not in managed:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, os.WNOHANG)


def reap_forever() -> None:
    while True:
        reap()
        time.sleep(0.5)


def wipe(req: dict) -> dict:
    keep = req.get("keep", [])
    for folder in req["dirs"]:
        for name in os.listdir(folder):
            path = os.path.join(folder, name)
            if any(fnmatch.fnmatchcase(path, pattern) for pattern in keep):
                continue
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path, onerror=_writable_then_retry)
            else:
                os.unlink(path)
    for folder in req.get("skeleton", []):
        os.makedirs(folder, exist_ok=True)
    for path in req.get("empty", []):  # files a process still writes: emptied in place (a link: removed)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except FileNotFoundError:
            continue
        except OSError:
            os.unlink(path)
            continue
        try:
            os.ftruncate(fd, 0)
        finally:
            os.close(fd)
    return {}


def _writable_then_retry(fn, path, _exc):  # the agent may have made things read-only
    os.chmod(os.path.dirname(path), 0o700)
    if os.path.isdir(path) and not os.path.islink(path):
        os.chmod(path, 0o700)
    fn(path)


def write(req: dict) -> dict:
    """A new file in place of `path` (a link there is replaced, not followed)."""
    os.makedirs(os.path.dirname(req["path"]) or "/", exist_ok=True)
    tmp = f"{req['path']}.{secrets.token_hex(8)}.computerrl"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, req.get("mode", 0o644))
    with open(fd, "wb") as f:
        f.write(base64.b64decode(req["data"]))
    os.chmod(tmp, req.get("mode", 0o644))
    os.replace(tmp, req["path"])
    return {}


def read(req: dict) -> dict:
    """The file's descriptor goes to the env server, which reads it in pieces: a file of any size never
    passes through our memory or a reply line."""
    try:  # non-blocking open, then a look at what was opened: a FIFO swapped in cannot hang us
        fd = os.open(req["path"], os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        return {"missing": True}  # absent, or not the desktop user's to read: as good as missing
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        return {"missing": True}
    os.set_blocking(fd, True)
    return {"fd": fd}


def copy(req: dict) -> dict:
    if os.path.isdir(req["to"]) and not os.path.islink(req["to"]):
        shutil.rmtree(req["to"], onerror=_writable_then_retry)
    elif os.path.lexists(req["to"]):  # a file or a link the agent put in its place
        os.unlink(req["to"])
    shutil.copytree(req["from"], req["to"], symlinks=True)
    return {}


def connect(req: dict) -> dict:
    """The env server has no way into the sandbox's network namespace: we connect for it. With
    `program`, the process that accepted must run that program as the desktop starts it, so that an
    agent that ends the app and listens on its port in its place, or starts the app its own way (a
    web interface serving files of its own, a browser with no window), is refused rather than believed."""
    port = req["port"]
    if not isinstance(port, int) or not 0 < port < 65536:
        raise ValueError(f"not a port: {port!r}")
    conn = socket.create_connection(("127.0.0.1", port), timeout=req.get("timeout", 5.0))
    try:
        if req.get("program"):
            stranger = _listening_program(port, req["program"], req)
            if stranger is not None:
                raise PermissionError(f"port {port} is not served by {req['program']} alone: {stranger}")
        conn.settimeout(None)
        return {"fd": conn.detach()}
    finally:
        conn.close()


def _listening_program(port: int, program: str, launched: dict) -> str | None:
    """Whether the listener our loopback connection reached is held only by processes running `program`
    (the file itself, by device and inode: a bind mount or a copy elsewhere is another file), each
    an app the session launched (`_not_launched`), started as `launched` says the desktop starts it
    (`_otherwise_started`: since no program of the agent's can write an app's memory, what the app's
    command line and environment say is what it was started with): None when it is, else what holds it.
    Asked after connecting: had another listener accepted our connection and closed since, the connection
    would be reset, not answered. The IPv4 listener on 127.0.0.1 is the one a
    connection to 127.0.0.1 reaches, or failing it the one on 0.0.0.0."""
    deadline = time.monotonic() + LISTENER_SCAN_S
    listeners = {}
    with contextlib.suppress(OSError), open("/proc/net/tcp") as f:
        for line in f.readlines()[1:]:
            fields = line.split()
            address, hex_port = fields[1].split(":")
            if fields[3] == "0A" and int(hex_port, 16) == port:  # 0A: LISTEN
                listeners[address] = f"socket:[{fields[9]}]"
    inode = listeners.get("0100007F") or listeners.get("00000000")
    if inode is None:
        return "no listener on 127.0.0.1"
    want, holders = os.stat(program), []
    for pid in all_pids():
        if time.monotonic() > deadline:
            return "too many processes to look through"
        with contextlib.suppress(OSError):
            if any(_link(pid, fd) == inode for fd in os.listdir(f"/proc/{pid}/fd")):
                exe = os.stat(f"/proc/{pid}/exe")
                if (exe.st_dev, exe.st_ino) != (want.st_dev, want.st_ino):
                    holders.append(os.readlink(f"/proc/{pid}/exe"))
                    continue
                why = _not_launched(pid, launched.get("started", {})) or _otherwise_started(pid, launched)
                holders.append(f"{program} {why}" if why else True)
    if not holders:
        return "an unknown process"
    strangers = [h for h in holders if h is not True]
    return str(strangers[0]) if strangers else None


def _not_launched(pid: int, started: dict) -> str:
    """Why `pid` (ours) is not an app the session launched ('' when it is): `started` names those as the
    session numbers them, with their start times (a pid the agent got again is not the app)."""
    with open(f"/proc/{pid}/status") as f:
        nspid = next(line.split()[1:] for line in f if line.startswith("NSpid:"))  # ours, the session's, deeper
    # A member of the session's own namespace, where no program of the agent's may choose its pid (it could
    # in a namespace of its own, nested deeper, and start there as the app starts).
    if len(nspid) != 2 or started.get(nspid[1]) != state_parent_start(pid)[2]:
        return "not started by the desktop's launcher (the agent's own, or started apart from the desktop)"
    return ""


def _otherwise_started(pid: int, launched: dict) -> str:
    """How the process `pid` differs from the app as the desktop's launcher starts it ('' when it does not):
      - it sees the desktop's files: the session's own mount namespace (one of its own could lay the
        agent's files over the app's);
      - `environ` {name: value, or None for absent}: what decides where it loads code and data from;
      - `argv_ends`: the launcher's own options close its command line, after whatever else it was
        given, with no "--" before them (which would make them file names): the last occurrence of an
        option wins over earlier ones and over a settings file (VLC);
      - `switches` {name: [values allowed]}: "--name", "-name" or "--name=value" only with an allowed
        value ([]: never), as Chromium reads its switches; Chromium writes its command line back as
        one line, so words count too (an argument that merely holds one is refused, never missed);
      - `on_display`: it is a client of the desktop's X server, through a connection of its own
        (`_x_clients`): what it shows, the screen shows. Its environment cannot tell: Chromium blanks
        the copy we could read."""
    if _mount_ids(pid) != _mount_ids(session_pid):  # a namespace's mounts have ids no other namespace has
        return "sees other files than the desktop (a mount namespace of its own)"
    with open(f"/proc/{pid}/environ", "rb") as f:
        env = dict(v.split(b"=", 1) for v in f.read().split(b"\0") if b"=" in v)
    for name, value in launched.get("environ", {}).items():
        if env.get(name.encode()) != (value.encode() if value is not None else None):
            return f"started otherwise than by the desktop (its {name})"
    with open(f"/proc/{pid}/cmdline", "rb") as f:
        argv = [a.decode(errors="replace") for a in f.read().split(b"\0")[:-1]]
    ends = launched.get("argv_ends", [])
    if ends and (argv[-len(ends):] != ends or "--" in argv[1:-len(ends)]):
        return "started otherwise than by the desktop (its command line does not end with the launcher's options)"
    allowed = launched.get("switches", {})
    for word in " ".join(argv).split(" ")[1:]:
        if word.startswith("-"):
            name, _, value = word[2 if word.startswith("--") else 1:].partition("=")
            if name in allowed and value not in allowed[name]:
                return f"started with {word}"
    if launched.get("on_display") and not _own_x_connection(pid, _x_clients()):
        return "shows nothing on the desktop's screen (no connection of its own to its X server)"
    return ""


def _mount_ids(pid: int) -> list[str]:
    """The ids of the mounts `pid` sees (readable without tracing it, unlike its namespace's link)."""
    with open(f"/proc/{pid}/mountinfo") as f:
        return [line.split(" ", 1)[0] for line in f]


def _own_x_connection(pid: int, clients: set[int]) -> bool:
    """Whether `pid` holds one of those connections through a descriptor it made itself: one it was
    handed across exec by the program before it (which an agent may connect, then become a browser that
    draws elsewhere) cannot be close-on-exec, as every one of the X library's is."""
    for fd in os.listdir(f"/proc/{pid}/fd"):
        link = _link(pid, fd)
        if link.startswith("socket:[") and int(link[8:-1]) in clients:
            with open(f"/proc/{pid}/fdinfo/{fd}") as f:
                flags = next(int(line.split()[1], 8) for line in f if line.startswith("flags:"))
            if flags & os.O_CLOEXEC:
                return True
    return False


SOCK_DIAG_BY_FAMILY, NLMSG_ERROR, NLMSG_DONE, NETLINK_SOCK_DIAG = 20, 2, 3, 4
UDIAG_SHOW_VFS, UDIAG_SHOW_PEER, UNIX_DIAG_VFS, UNIX_DIAG_PEER = 0x2, 0x4, 1, 2


def _x_clients() -> set[int]:
    """The sockets connected to the desktop's X server, by inode. The server runs outside; the end
    it accepted each connection on lives here, in the network namespace of its client, bound to the
    server's socket file: by that file (device and inode), not by a name, a server of the agent's
    (another display, a relay squatting the server's abstract address, a file laid over its own in a
    mount namespace) is not the desktop's. The kernel's socket table (sock_diag) names each end's peer."""
    sockets = [n for n in os.listdir(X11_DIR) if n.startswith("X")]
    if len(sockets) != 1:
        return set()
    x = os.stat(f"{X11_DIR}/{sockets[0]}")
    deadline, clients = time.monotonic() + LISTENER_SCAN_S, set()
    # unix_diag_req: connected sockets (1 << TCP_ESTABLISHED), each with its file and its peer
    request = struct.pack("=BBHIII2I", socket.AF_UNIX, 0, 0, 1 << 1, 0, UDIAG_SHOW_VFS | UDIAG_SHOW_PEER, 0, 0)
    with socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, NETLINK_SOCK_DIAG) as nl:
        # nlmsghdr; 0x301: a request for the whole table
        nl.sendall(struct.pack("=IHHII", 16 + len(request), SOCK_DIAG_BY_FAMILY, 0x301, 1, 0) + request)
        while (left := deadline - time.monotonic()) > 0:
            nl.settimeout(left)
            data, at = nl.recv(1 << 20), 0
            while at + 16 <= len(data):
                size, kind = struct.unpack_from("=IH", data, at)
                if kind in (NLMSG_DONE, NLMSG_ERROR) or size < 16:
                    return clients
                vfs, peer, a = None, None, at + 32  # its attributes, after nlmsghdr and unix_diag_msg
                while a + 4 <= at + size:
                    length, attr = struct.unpack_from("=HH", data, a)
                    if attr == UNIX_DIAG_VFS:
                        vfs = struct.unpack_from("=II", data, a + 4)  # inode, the kernel's device number
                    elif attr == UNIX_DIAG_PEER:
                        peer = struct.unpack_from("=I", data, a + 4)[0]
                    a += max(4, (length + 3) & ~3)
                if vfs and peer and (vfs[0], vfs[1] >> 20, vfs[1] & 0xFFFFF) == \
                        (x.st_ino, os.major(x.st_dev), os.minor(x.st_dev)):
                    clients.add(peer)
                at += (size + 3) & ~3
    return set()  # out of time: believe none


def _link(pid: int, fd: str) -> str:
    try:
        return os.readlink(f"/proc/{pid}/fd/{fd}")
    except OSError:
        return ""


def run_and_sweep(req: dict) -> dict:
    """`run` beside the keeper, then kill whatever it left: every process of the keeper's namespace
    but the session's (orphans come to the keeper, its pid 1). One at a time: a sweep must not take
    another command's processes."""
    with run_lock:
        try:
            return run(req)
        finally:
            kill_all_but(lambda: set(tree(session_pid)))


def tree(root: int) -> list[int]:
    """`root` and every process below it."""
    below: dict[int, list[int]] = {}
    for pid in all_pids():
        below.setdefault(state_parent_start(pid)[1], []).append(pid)
    out, todo = [], [root]
    while todo:
        out.append(pid := todo.pop())
        todo += below.get(pid, [])
    return out


KEEPER_OPS = {"run": run_and_sweep, "wipe": wipe, "write": write, "read": read, "copy": copy,
              "connect": connect, "ping": lambda _req: {}}
SESSION_OPS = {"spawn": spawn, "run": run, "poll": poll, "kill": kill, "kill_all": kill_all, "pids": pids,
               "apps": set_apps, "launch": launch, "launched": still_launched}
LAUNCHER_OPS = {"launch": launch}  # what the agent may ask


def serve(conn: socket.socket, ops: dict, limit: int = -1) -> None:
    with conn, conn.makefile("rb") as f:
        try:
            req = json.loads(f.readline(limit))
            reply = ops[req["op"]](req)
        except Exception as e:  # noqa: BLE001 - every failure goes back to the env server as a sentence
            reply = {"error": f"{type(e).__name__}: {e}"}
        fd = reply.pop("fd", None)  # a descriptor goes with the reply's first byte, then is ours no more
        data = json.dumps(reply).encode() + b"\n"
        try:
            socket.send_fds(conn, [data[:1]], [fd] if fd is not None else [])
            conn.sendall(data[1:])
        finally:
            if fd is not None:
                os.close(fd)


def serve_forever(fd: int, ops: dict, threads: int = SERVERS, timeout_s: float | None = None,
                  limit: int = -1) -> None:
    # A fixed set of threads, started now: a desktop whose user has used up its processes (threads
    # count) still gets its kill_all served. `timeout_s` and `limit` (a request's bytes) for the launcher's
    # socket, which the agent may write: an asker that never finishes its line, or sends no end, holds nothing.
    listener = socket.socket(fileno=fd)
    listener.set_inheritable(False)  # what we start never holds it

    def accept_forever():
        while True:
            with contextlib.suppress(OSError):  # an asker gone or too slow: the thread serves the next
                conn, _ = listener.accept()
                conn.settimeout(timeout_s)
                serve(conn, ops, limit)

    for _ in range(threads):
        threading.Thread(target=accept_forever, daemon=True).start()


def _check(result: int, what: str) -> None:
    if result != 0:
        raise OSError(ctypes.get_errno(), f"{what} failed")


def start_session(listener: int, closed: list[int], processes: int) -> int:
    """Fork the session into a user, pid and mount namespace of its own; its pid in ours.

    Forked, never exec'd: once non-dumpable, it stays so. Called before any thread starts."""
    r, w = os.pipe()
    if (middle := os.fork()) == 0:
        try:
            os.close(r)
            _check(libc.unshare(CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNS), "unshare")
            for name, line in (("setgroups", "deny"), ("uid_map", f"{UID} {UID} 1"), ("gid_map", f"{UID} {UID} 1")):
                with open(f"/proc/self/{name}", "w") as f:
                    f.write(line)
            if (pid := os.fork()) == 0:  # pid 1 of the new namespace
                os.close(w)
                for fd in closed:
                    os.close(fd)
                session(listener, processes)
            os.write(w, str(pid).encode())
        except BaseException as e:
            print(f"the session could not be made: {e!r}", file=sys.stderr, flush=True)
        finally:
            os._exit(0)
    os.close(w)
    with os.fdopen(r) as f:
        pid = int(f.read() or 0)
    os.waitpid(middle, 0)
    if not pid:
        raise OSError("the session did not start")
    return pid


def untouchable() -> None:
    """Non-dumpable: nothing may trace us, open /proc/<pid>/{fd,mem} of ours or copy our descriptors."""
    _check(libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0), "prctl(PR_SET_DUMPABLE, 0)")


def session(listener: int, processes: int) -> None:
    try:
        untouchable()
        os.setsid()
        _check(libc.mount(None, b"/", None, MS_REC | MS_PRIVATE, None), "making mounts private")
        _check(libc.mount(b"proc", b"/proc", b"proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, None), "mounting /proc")
        # Processes and threads of the desktop's user, the root that `sudo` gives included.
        resource.setrlimit(resource.RLIMIT_NPROC, (processes, processes))
        serve_forever(listener, SESSION_OPS)
        launcher = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        launcher.bind(LAUNCHER)  # before anything of the agent's runs: nothing can have taken the name
        launcher.listen(16)
        serve_forever(launcher.detach(), LAUNCHER_OPS, threads=2, timeout_s=5.0, limit=REQUEST_BYTES)
    except BaseException as e:
        print(f"the session failed to start: {e!r}", file=sys.stderr, flush=True)
        os._exit(1)
    reap_forever()


def keeper(listener: int, session_listener: int, lifeline: int, processes: int) -> None:
    global session_pid
    # Python's own SIGINT handler would let anything beside us raise KeyboardInterrupt in us; a
    # handler that does nothing is reset at exec, so what we start still has Ctrl-C.
    signal.signal(signal.SIGINT, lambda *_: None)
    session_pid = start_session(session_listener, [listener, lifeline], processes)
    untouchable()  # only now: the session's namespace needed our /proc files still ours to write
    os.close(session_listener)
    serve_forever(listener, KEEPER_OPS)
    threading.Thread(target=reap_forever, daemon=True).start()
    while os.read(lifeline, 1):  # blocks until the env server is gone
        pass
    os._exit(0)


if __name__ == "__main__":
    keeper(*map(int, sys.argv[1:5]))
