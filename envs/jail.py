"""A throwaway bubblewrap for code the agent wrote that an evaluator has to run (OSWorld's
check_python_file_by_test_suite imports the agent's modules and calls them).

Nothing of the host is in reach: its own user, pid, network (none), ipc and uts namespaces; the
system read-only; one folder, holding only the files given, at /work; a fresh /tmp; on the host the
unprivileged uid `nobody` when we are root. Memory, CPU time, file size and processes are capped,
and the whole jail dies at its time limit, whatever it started.
"""

from __future__ import annotations

import os
import resource
import shutil
import subprocess
import tempfile
from pathlib import Path

from computerrl.envs.sandbox import NOBODY, PATH, check_bwrap

WORK = "/work"
OUTPUT_BYTES = 64 << 10  # the tail of what the jail printed that comes back


def _links() -> list[str]:
    """Merged /usr: /bin, /lib… are links on the host, and must be in the jail too."""
    return [a for link in ("bin", "sbin", "lib", "lib64", "lib32", "libx32") if os.path.islink(f"/{link}")
            for a in ("--symlink", os.readlink(f"/{link}"), f"/{link}")]


def run_in_jail(argv: list[str], files: list[str | Path], *, timeout_s: float = 30.0, memory_mb: int = 1024,
                processes: int = 64, env: dict[str, str] | None = None) -> tuple[int | None, str]:
    """Run `argv` in /work holding copies of `files` (by their names): (exit code or None when it ran
    past `timeout_s`, the tail of its stdout and stderr)."""
    check_bwrap()
    with tempfile.TemporaryDirectory(prefix="computerrl-jail-") as root:
        work = Path(root) / "work"
        work.mkdir()
        for f in files:
            shutil.copyfile(f, work / Path(f).name)
        prefix = []
        if os.geteuid() == 0:  # the jail's files become nobody's, and so does the jail
            for path in (Path(root), work, *work.iterdir()):
                os.chown(path, NOBODY, NOBODY)
            prefix = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "--"]
        setenv = [a for k, v in {"PATH": PATH, "HOME": WORK, **(env or {})}.items() for a in ("--setenv", k, v)]
        jail = [*prefix, "bwrap", "--unshare-all", "--die-with-parent", "--new-session", "--as-pid-1",
                "--uid", "1000", "--gid", "1000", "--clearenv", *setenv,
                "--ro-bind", "/usr", "/usr", *_links(), "--ro-bind", "/etc", "/etc",
                "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--bind", str(work), WORK,
                "--remount-ro", "/", "--chdir", WORK,
                "prlimit", f"--nproc={processes}", "--", *argv]  # processes count in the jail's own user namespace

        def caps():
            resource.setrlimit(resource.RLIMIT_AS, (memory_mb << 20, memory_mb << 20))
            resource.setrlimit(resource.RLIMIT_CPU, (int(timeout_s) + 1, int(timeout_s) + 1))
            resource.setrlimit(resource.RLIMIT_FSIZE, (64 << 20, 64 << 20))

        with tempfile.TemporaryFile() as out:
            proc = subprocess.Popen(jail, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                    preexec_fn=caps, start_new_session=True)
            try:
                code = proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, 9)  # bwrap is pid 1's parent: the whole pid namespace goes with it
                proc.wait()
                code = None
            out.seek(max(0, out.seek(0, 2) - OUTPUT_BYTES))
            return code, out.read().decode(errors="replace")
