"""The process keeper inside a desktop's sandbox: it starts, watches and kills what the env server asks.

It runs as the sandbox's first process under bubblewrap's pid 1, with Debian's own python3 and the
standard library only (nothing of computerrl is visible in the sandbox). The env server talks to it
over a listening socket it inherited as a file descriptor — no path inside the sandbox names that
socket, so nothing in the desktop can dial it. One JSON request per connection, one JSON reply:

    {"op": "spawn", "argv": [...], "env": {...}, "cwd": "/home/user", "log": "/var/log/desktop/x.log"}
        -> {"pid": 7}                                   (pids are the sandbox's own)
    {"op": "run", "argv": [...], "env": {...}, "cwd": ..., "input": "", "timeout": 60}
        -> {"returncode": 0, "stdout": "...", "stderr": "..."}   or {"error": "..."}
    {"op": "poll", "pids": [7]}          -> {"exited": {"7": -9}}   (only those that ended)
    {"op": "kill", "pids": [7]}          -> {}
    {"op": "pids"}                       -> {"pids": [...]}          every process but pid 1
    {"op": "kill_all", "keep": [...]}    -> {"killed": 3}            every other process, SIGKILL
    {"op": "wipe", "dirs": [...], "keep": [glob, ...], "skeleton": [...]} -> {}  empty folders, recreate some
    {"op": "write", "path": ..., "data": base64, "mode": 420} -> {}
    {"op": "read", "path": ..., "limit": n} -> {"data": base64} or {"missing": true} (absent or unreadable)

File reads and writes happen here, as the sandbox's user and through the sandbox's view of the
file system, so a symbolic link planted by the agent can only ever point inside the sandbox.
The lifeline descriptor is the read end of a pipe whose write end only the env server holds: it
reaches end-of-file when the server dies, however it dies. This process then exits, bubblewrap's
pid 1 follows, and the kernel kills every process left in the pid namespace.
"""

import base64
import fnmatch
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time

OUTPUT_LIMIT = 1 << 20  # bytes of a command's stdout / stderr sent back
KILL_WAIT_S = 5.0  # how long kill_all waits for its victims to be reaped
children: dict[int, subprocess.Popen] = {}
lock = threading.Lock()


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
        return {"error": f"did not finish within {req.get('timeout', 60)} s"}
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
    return [int(p) for p in os.listdir("/proc") if p.isdigit() and int(p) != 1]


def state_and_parent(pid: int) -> tuple[str, int]:
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rpartition(")")[2].split()
        return fields[0], int(fields[1])
    except (OSError, IndexError, ValueError):
        return "", 0  # gone meanwhile


def kill_all(req: dict) -> dict:
    # This pid namespace holds exactly the desktop's processes: whatever escaped its parent, cleared
    # its environment or started a new session is still here. Forks racing the sweep: sweep again.
    # A killed process lingers as a zombie until its parent reaps it (bubblewrap's pid 1 once its own
    # parent died, or we): wait for those, so a caller never sees one. A kept process's zombie
    # children are its own business.
    me = os.getpid()
    keep, killed = set(req.get("keep", [])) - {me}, set()
    deadline = time.monotonic() + KILL_WAIT_S
    while time.monotonic() < deadline:
        waiting = False
        for pid in all_pids():
            if pid in keep or pid == me:
                continue
            state, parent = state_and_parent(pid)
            if state == "Z":
                waiting |= parent not in keep
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
    return {"killed": len(killed)}


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
    try:
        if not os.path.isfile(req["path"]):
            return {"missing": True}
        with open(req["path"], "rb") as f:
            return {"data": base64.b64encode(f.read(req.get("limit", -1))).decode()}
    except PermissionError:  # not the desktop user's to read: as good as missing
        return {"missing": True}


OPS = {"spawn": spawn, "run": run, "poll": poll, "kill": kill, "kill_all": kill_all, "wipe": wipe,
       "write": write, "read": read, "pids": lambda _req: {"pids": all_pids()}}


def serve(conn: socket.socket) -> None:
    with conn, conn.makefile("rwb") as f:
        try:
            req = json.loads(f.readline())
            reply = OPS[req["op"]](req)
        except Exception as e:  # noqa: BLE001 - every failure goes back to the env server as a sentence
            reply = {"error": f"{type(e).__name__}: {e}"}
        f.write(json.dumps(reply).encode() + b"\n")


def main() -> None:
    listener = socket.socket(fileno=int(sys.argv[1]))
    lifeline = int(sys.argv[2])

    def accept_forever():
        while True:
            conn, _ = listener.accept()
            threading.Thread(target=serve, args=(conn,), daemon=True).start()

    threading.Thread(target=accept_forever, daemon=True).start()
    while os.read(lifeline, 1):  # blocks until the env server is gone
        pass
    os._exit(0)


if __name__ == "__main__":
    main()
