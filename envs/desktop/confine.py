"""`python3 -I -S confine.py ARGV...`: exec ARGV in a Landlock domain of its own (sandbox_init.py says why).

Apart from init.py, and importing next to nothing, because every program the desktop starts goes through
it: at a reset, the office's start. Where the kernel has no Landlock, ARGV runs as it is (the desktop's
start says so)."""
import ctypes
import os
import struct
import sys

CREATE_RULESET, RESTRICT_SELF, ACCESS_FS_MAKE_BLOCK, PR_SET_NO_NEW_PRIVS = 444, 446, 1 << 11, 38
libc = ctypes.CDLL(None, use_errno=True)


def abi() -> int:
    """Landlock's ABI version here, 0 without it."""
    return max(0, libc.syscall(CREATE_RULESET, None, ctypes.c_size_t(0), 1))  # 1: ask for the version


def check(result: int, what: str) -> None:
    if result < 0:
        raise OSError(ctypes.get_errno(), f"{what} failed")


if __name__ == "__main__":
    if abi():
        # A domain that handles making block devices (nobody may, here) restricts nothing else, but a
        # process in it can trace only processes of its own domain and those below.
        ruleset = libc.syscall(CREATE_RULESET, ctypes.create_string_buffer(struct.pack("=Q", ACCESS_FS_MAKE_BLOCK)),
                               ctypes.c_size_t(8), 0)
        check(ruleset, "landlock_create_ruleset")
        check(libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(PR_SET_NO_NEW_PRIVS)")
        check(libc.syscall(RESTRICT_SELF, ruleset, 0), "landlock_restrict_self")
        os.close(ruleset)
    os.execvp(sys.argv[1], sys.argv[1:])
