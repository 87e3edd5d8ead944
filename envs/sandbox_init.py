"""The two trusted processes inside a desktop's sandbox: the keeper and the session.

Both run Debian's own python3 with the standard library only (nothing of computerrl is visible in
the sandbox), both are non-dumpable (nothing may trace them, read their memory or copy their file
descriptors), and each serves the env server over a listening socket it inherited as a file
descriptor: no path inside the sandbox names either socket, so nothing in the desktop can dial them.

    keeper   the sandbox's first process. Reads, writes and wipes files through the sandbox's view of
             the file system (a link planted by the agent can only ever point inside the sandbox), and
             runs the commands that decide a score (getters, postconfig). It starts the session in a
             nested user and pid namespace, so nothing the agent runs can see, signal or trace it,
             nor anything it runs. What those commands leave running when they end is killed:
             they may run code the agent wrote (OSWorld's `bash eval.sh`), which must not linger
             beside the keeper.
    session  pid 2 of that nested namespace, where everything of the desktop runs: the buses, the
             window manager, the apps, the agent's terminal, the task's setup commands. It starts,
             watches and kills them; the namespace makes "everything the desktop runs" exact, and it
             caps how many processes the desktop's user may have.

One JSON request per connection, one JSON reply:

    {"op": "spawn", "argv": [...], "env": {...}, "cwd": "/home/user", "log": "/var/lib/desktop/logs/x.log"}
        -> {"pid": 7}                                   (session; pids are the session's own)
    {"op": "run", "argv": [...], "env": {...}, "cwd": ..., "input": "", "timeout": 60}
        -> {"returncode": 0, "stdout": "...", "stderr": "..."}   or {"error": "..."}   (both)
    {"op": "poll", "pids": [7]}          -> {"exited": {"7": -9}}   (session; only those that ended)
    {"op": "kill", "pids": [7]}          -> {}                       (session)
    {"op": "pids"}                       -> {"pids": [...]}          (session: every process but its own two)
    {"op": "kill_all", "keep": [...]}    -> {"killed": 3}            (session: every other process, SIGKILL)
    {"op": "wipe", "dirs": [...], "keep": [glob, ...], "skeleton": [...], "empty": [...]} -> {}   (keeper)
    {"op": "write", "path": ..., "data": base64, "mode": 420} -> {}             (keeper)
    {"op": "read", "path": ..., "limit": n} -> {"data": base64} or {"missing": true}   (keeper)
    {"op": "copy", "from": ..., "to": ...} -> {}    (keeper: `to` replaced by a copy of the folder `from`)

The keeper's lifeline descriptor is the read end of a pipe whose write end only the env server
holds: it reaches end-of-file when the server dies, however it dies. The keeper then exits,
bubblewrap's pid 1 follows, and the kernel kills every process left in the namespaces.

    python3 -I init.py keeper LISTENER SESSION_LISTENER LIFELINE PROCESSES
    python3 -I init.py session LISTENER PROCESSES
"""

import base64
import contextlib
import ctypes
import fnmatch
import json
import os
import resource
import shutil
import signal
import socket
import stat
import subprocess
import sys
import threading
import time

OUTPUT_LIMIT = 1 << 20  # bytes of a command's stdout / stderr sent back
KILL_WAIT_S = 5.0  # how long kill_all waits for its victims to be reaped
SERVERS = 6  # requests served at once (the watchdog's poll beside a long setup command, …)
PR_SET_DUMPABLE, PR_SET_CHILD_SUBREAPER = 4, 36
SELF = "/run/desktop/init.py"  # this file, as the sandbox sees it
children: dict[int, subprocess.Popen] = {}
lock, run_lock = threading.Lock(), threading.Lock()


def spawn(req: dict) -> dict:
    log = open(req["log"], "ab") if req.get("log") else subprocess.DEVNULL
    try:
        proc = subprocess.Popen(req["argv"], env=req["env"], cwd=req.get("cwd") or "/", stdin=subprocess.DEVNULL,
                                stdout=log, stderr=log, start_new_session=True)
    finally:
        if log is not subprocess.DEVNULL:
            log.close()
    with lock:
        children[proc.pid] = proc
    return {"pid": proc.pid}


def run(req: dict) -> dict:
    proc = subprocess.Popen(req["argv"], env=req["env"], cwd=req.get("cwd") or "/", stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    try:
        out, err = proc.communicate(req.get("input", "").encode(), timeout=req.get("timeout", 60))
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        return {"error": f"did not finish within {req.get('timeout', 60):.0f} s"}
    return {"returncode": proc.returncode, "stdout": out[:OUTPUT_LIMIT].decode(errors="replace"),
            "stderr": err[:OUTPUT_LIMIT].decode(errors="replace")}


def poll(req: dict) -> dict:
    exited = {}
    with lock:
        for pid in req["pids"]:
            proc = children.get(pid)
            code = proc.poll() if proc is not None else (None if os.path.exists(f"/proc/{pid}") else -9)
            if code is not None:
                exited[str(pid)] = code
    return {"exited": exited}


def kill(req: dict) -> dict:
    for pid in req["pids"]:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    poll(req)  # reap our own children at once
    return {}


def all_pids() -> list[int]:
    """Every process of the session's namespace but bubblewrap's reaper (pid 1) and the session."""
    return [int(p) for p in os.listdir("/proc") if p.isdigit() and int(p) not in (1, os.getpid())]


def state_and_parent(pid: int) -> tuple[str, int]:
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rpartition(")")[2].split()
        return fields[0], int(fields[1])
    except (OSError, IndexError, ValueError):
        return "", 0  # gone meanwhile


def kill_all(req: dict) -> dict:
    return {"killed": kill_all_but(lambda: set(req.get("keep", [])))}


def kill_all_but(keep) -> int:
    """SIGKILL every process of our namespace but those `keep()` names; how many were killed.

    This pid namespace holds exactly what it should: whatever escaped its parent, cleared its
    environment or started a new session is still here. Forks racing the sweep: sweep again.
    A killed process lingers as a zombie until its parent reaps it (bubblewrap's pid 1 once its
    own parent died, or we): wait for those, so a caller never sees one. A kept process's zombie
    children are its own business."""
    me, killed = os.getpid(), set()
    deadline = time.monotonic() + KILL_WAIT_S
    while time.monotonic() < deadline:
        waiting, kept = False, keep()
        for pid in all_pids():
            if pid in kept:
                continue
            state, parent = state_and_parent(pid)
            if state == "Z":
                if parent == me and pid not in children:  # an orphan we adopted (the keeper is a subreaper)
                    with contextlib.suppress(ChildProcessError):
                        os.waitpid(pid, os.WNOHANG)
                waiting |= parent not in kept
                continue
            try:
                os.kill(pid, signal.SIGKILL)
                killed.add(pid)
                waiting = True
            except ProcessLookupError:
                pass
        if not waiting:
            break
        poll({"pids": list(children)})
        time.sleep(0.01)
    with lock:
        for pid in [p for p, c in children.items() if c.returncode is not None]:
            del children[pid]
    return len(killed)


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
    os.makedirs(os.path.dirname(req["path"]) or "/", exist_ok=True)
    tmp = f"{req['path']}.computerrl-tmp"
    with open(tmp, "wb") as f:
        f.write(base64.b64decode(req["data"]))
    os.chmod(tmp, req.get("mode", 0o644))
    os.replace(tmp, req["path"])
    return {}


def read(req: dict) -> dict:
    try:  # non-blocking open, then a look at what was opened: a FIFO swapped in cannot hang us
        fd = os.open(req["path"], os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        return {"missing": True}  # absent, or not the desktop user's to read: as good as missing
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        return {"missing": True}
    os.set_blocking(fd, True)
    with open(fd, "rb") as f:
        return {"data": base64.b64encode(f.read(req.get("limit", -1))).decode()}


def copy(req: dict) -> dict:
    if os.path.isdir(req["to"]) and not os.path.islink(req["to"]):
        shutil.rmtree(req["to"], onerror=_writable_then_retry)
    elif os.path.lexists(req["to"]):  # a file or a link the agent put in its place
        os.unlink(req["to"])
    shutil.copytree(req["from"], req["to"], symlinks=True)
    return {}


def run_and_sweep(req: dict) -> dict:
    """`run` beside the keeper, then kill whatever it left: every process of the keeper's namespace
    but its pid 1, the keeper and the session's tree (orphans come to the keeper, its subreaper).
    One at a time: a sweep must not take another command's processes."""
    with run_lock:
        try:
            return run(req)
        finally:
            kill_all_but(lambda: {1, os.getpid(), *tree(session_launcher)})


def tree(root: int) -> list[int]:
    """`root` and every process below it."""
    children: dict[int, list[int]] = {}
    for pid in all_pids():
        children.setdefault(state_and_parent(pid)[1], []).append(pid)
    out, todo = [], [root]
    while todo:
        out.append(pid := todo.pop())
        todo += children.get(pid, [])
    return out


KEEPER_OPS = {"run": run_and_sweep, "wipe": wipe, "write": write, "read": read, "copy": copy,
              "ping": lambda _req: {}}
session_launcher = 0  # the keeper's pid of the bubblewrap that holds the session
SESSION_OPS = {"spawn": spawn, "run": run, "poll": poll, "kill": kill, "kill_all": kill_all,
               "pids": lambda _req: {"pids": all_pids()}}


def serve(conn: socket.socket, ops: dict) -> None:
    with conn, conn.makefile("rwb") as f:
        try:
            req = json.loads(f.readline())
            reply = ops[req["op"]](req)
        except Exception as e:  # noqa: BLE001 - every failure goes back to the env server as a sentence
            reply = {"error": f"{type(e).__name__}: {e}"}
        f.write(json.dumps(reply).encode() + b"\n")


def serve_forever(fd: int, ops: dict) -> None:
    # A fixed set of threads, started now: a desktop whose user has used up its processes (threads
    # count) still gets its kill_all served.
    listener = socket.socket(fileno=fd)
    listener.set_inheritable(False)  # what we start never holds it

    def accept_forever():
        while True:
            conn, _ = listener.accept()
            serve(conn, ops)

    for _ in range(SERVERS):
        threading.Thread(target=accept_forever, daemon=True).start()


def prctl(option: int, value: int) -> None:
    if ctypes.CDLL(None, use_errno=True).prctl(option, value, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), f"prctl({option}, {value}) failed")


def untouchable() -> None:
    """No tracing, no /proc/<pid>/fd or mem, no pidfd_getfd on us; Ctrl-C is not ours to take."""
    prctl(PR_SET_DUMPABLE, 0)
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def keeper(listener: int, session_listener: int, lifeline: int, processes: int) -> None:
    global session_launcher
    untouchable()
    prctl(PR_SET_CHILD_SUBREAPER, 1)
    # The session: a user and pid namespace of its own under ours (bubblewrap's reaper is its pid 1),
    # the same files, a /proc that shows only the desktop's processes.
    session_launcher = subprocess.Popen(["bwrap", "--unshare-user", "--unshare-pid", "--dev-bind", "/", "/", "--proc", "/proc",
                      "--die-with-parent", "--new-session", "--",
                      sys.executable, "-I", SELF, "session", str(session_listener), str(processes)],
                     pass_fds=(session_listener,), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                     stderr=subprocess.DEVNULL).pid  # its reaper (pid 1 there) can be robbed: no host file
    os.close(session_listener)
    serve_forever(listener, KEEPER_OPS)
    while os.read(lifeline, 1):  # blocks until the env server is gone
        pass
    os._exit(0)


def session(listener: int, processes: int) -> None:
    untouchable()
    # Processes and threads of the desktop's user, the root that `sudo` gives included.
    resource.setrlimit(resource.RLIMIT_NPROC, (processes, processes))
    serve_forever(listener, SESSION_OPS)
    threading.Event().wait()


if __name__ == "__main__":
    if sys.argv[1] == "keeper":
        keeper(*map(int, sys.argv[2:6]))
    else:
        session(*map(int, sys.argv[2:4]))
