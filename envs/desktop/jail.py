"""A throwaway bubblewrap for code the agent wrote that an evaluator has to run (OSWorld's
check_python_file_by_test_suite imports the agent's modules and calls them).

Nothing of the host is in reach: its own user, pid, network (none), ipc and uts namespaces; the
system read-only; on the host the unprivileged uid `nobody` when we are root. Nothing it writes
reaches the host's disk: /work (copies of the files given, and `work_mb` of room) and /tmp
(`tmp_mb`) are sized tmpfs, in RAM, and its output comes back through a pipe.

Memory is capped for the jail as a whole, its files in RAM included: a cgroup of `memory_mb`
(envs/desktop/cgroup.py), whose OOM killer takes the jail's own processes. A cgroup takes root; without
one a warning says so, and only each process's address space is capped (so N processes may hold
N times `memory_mb`, and the files `tmp_mb + work_mb` more). CPU time, file size and the number of
processes are capped too, and the whole jail dies at its time limit, whatever it started.

Anything in the jail may write its stdout and stderr. A caller that must believe one thing the
program says (a verdict) asks for the report socket too, a descriptor named by $COMPUTERRL_REPORT_FD
and read once the jail is gone (a socket: unlike a pipe's write end, it cannot be reopened through
/proc as a reader, so what is written there reaches only us), and gives the program a secret on
stdin to sign it with: read at once, the secret is then in no file, argument or environment variable.
"""

from __future__ import annotations

import contextlib
import logging
import os
import resource
import secrets
import socket
import stat
import subprocess
import threading
from pathlib import Path
from typing import NamedTuple

from computerrl.envs.desktop.cgroup import Cgroup
from computerrl.envs.desktop.sandbox import NOBODY, PATH, check_bwrap, usr_links

log = logging.getLogger("computerrl.envs.desktop.jail")

WORK = "/work"
OUTPUT_BYTES = 64 << 10  # the tail of what the jail printed that comes back
REPORT_FD_ENV = "COMPUTERRL_REPORT_FD"
REPORT_BYTES = 4096  # what of the report comes back
STDIN_BYTES = 4096  # stdin is written whole before the jail starts: a pipe holds at least this much
PAGE = 4096


class Jailed(NamedTuple):
    code: int | None  # the exit code; None when it ran past its time limit
    output: str  # the tail of its stdout and stderr
    report: bytes  # what was written to the report socket (b"" unless asked for)


def _open_regular(path: Path) -> int:
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)  # a FIFO must not hang us
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise ValueError(f"{path}: not a regular file")
    return fd


def _keep_tail(fd: int, tail: bytearray) -> None:
    while chunk := os.read(fd, 1 << 16):
        tail += chunk
        del tail[:-OUTPUT_BYTES]


def run_in_jail(argv: list[str], files: list[str | Path], *, timeout_s: float = 30.0, memory_mb: int = 1024,
                tmp_mb: int = 256, work_mb: int = 256, processes: int = 64, env: dict[str, str] | None = None,
                stdin: bytes = b"", report: bool = False) -> Jailed:
    """Run `argv` in /work holding copies of `files` (by their names; a later one wins a name), with
    `stdin` as its standard input and, if `report`, the report socket open."""
    check_bwrap()
    if len(stdin) > STDIN_BYTES:
        raise ValueError(f"stdin of {len(stdin)} bytes: at most {STDIN_BYTES}")
    opened: list[int] = []  # our descriptors, closed at the end whatever happens

    def opens(fd: int) -> int:
        opened.append(fd)
        return fd

    def close(fd: int) -> None:
        opened.remove(fd)
        os.close(fd)

    cgroup, why_not = Cgroup.make(f"computerrl-{os.getpid()}-jail{secrets.token_hex(4)}", memory_mb << 20)
    if cgroup is None:
        log.warning("the jail's memory is capped per process only (%d MB each, up to %d processes): no writable "
                    "cgroup (%s)", memory_mb, processes, why_not)
    try:
        copies = {name: opens(_open_regular(path)) for name, path in {Path(f).name: Path(f) for f in files}.items()}
        # The copies live in /work's tmpfs, so its size is theirs (in pages) and the room to write.
        work_bytes = sum(-(-os.fstat(fd).st_size // PAGE) * PAGE for fd in copies.values()) + (work_mb << 20)
        stdin_r, stdin_w = map(opens, os.pipe())
        os.write(stdin_w, stdin)
        close(stdin_w)  # the program reads `stdin`, then end of file
        ours, theirs = map(opens, (s.detach() for s in socket.socketpair())) if report else (-1, -1)
        env = {"PATH": PATH, "HOME": WORK, **(env or {}), **({REPORT_FD_ENV: str(theirs)} if report else {})}
        prefix = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "--"] \
            if os.geteuid() == 0 else []
        jail = [*prefix, "bwrap", "--unshare-all", "--die-with-parent", "--new-session", "--as-pid-1",
                "--uid", "1000", "--gid", "1000", "--clearenv", *[a for kv in env.items() for a in ("--setenv", *kv)],
                "--ro-bind", "/usr", "/usr", *usr_links(), "--ro-bind", "/etc", "/etc",
                "--proc", "/proc", "--dev", "/dev", "--size", str(tmp_mb << 20), "--tmpfs", "/tmp",
                "--size", str(work_bytes), "--tmpfs", WORK,
                *[a for name, fd in copies.items() for a in ("--file", str(fd), f"{WORK}/{name}")],
                "--remount-ro", "/", "--chdir", WORK,
                "prlimit", f"--nproc={processes}", "--", *argv]  # processes count in the jail's own user namespace

        def caps():
            resource.setrlimit(resource.RLIMIT_AS, (memory_mb << 20, memory_mb << 20))
            resource.setrlimit(resource.RLIMIT_CPU, (int(timeout_s) + 1, int(timeout_s) + 1))
            resource.setrlimit(resource.RLIMIT_FSIZE, (64 << 20, 64 << 20))

        proc = subprocess.Popen(cgroup.wrap(jail) if cgroup else jail, stdin=stdin_r, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, pass_fds=[*copies.values(), *([theirs] if report else [])],
                                preexec_fn=caps, start_new_session=True)
        if report:
            close(theirs)  # the jail's copy of its end is the only one left
        tail = bytearray()
        reader = threading.Thread(target=_keep_tail, args=(proc.stdout.fileno(), tail), daemon=True)
        reader.start()
        try:
            code = proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)  # bwrap is pid 1's parent: the whole pid namespace goes with it
            proc.wait()
            code = None
        reader.join(5)  # the jail is gone, and every writer of its output with it
        proc.stdout.close()
        said = bytearray()
        if report:  # read once the jail is gone: nothing it left behind can add to it
            os.set_blocking(ours, False)
            with contextlib.suppress(BlockingIOError):
                while len(said) < REPORT_BYTES and (chunk := os.read(ours, REPORT_BYTES - len(said))):
                    said += chunk
        return Jailed(code, tail.decode(errors="replace"), bytes(said))
    finally:
        for fd in opened:
            os.close(fd)
        if cgroup is not None:
            cgroup.remove()
