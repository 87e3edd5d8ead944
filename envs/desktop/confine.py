"""`python3 -I -S confine.py [--no-network] ARGV...`: exec ARGV in a Landlock domain of its own (sandbox_init.py
says why). With `--no-network`, ARGV may also neither bind nor connect a TCP port, connect to an abstract
unix socket made outside its domain, nor signal a process outside it (the X server: sandbox.py, start_xvfb),
as far as the kernel's Landlock can say so (TCP from ABI 4, abstract sockets and signals from ABI 6).

Apart from init.py, and importing next to nothing, because every program the desktop starts goes through
it: at a reset, the office's start. Where the kernel has no Landlock, ARGV runs as it is (the desktop's
start says so)."""
import ctypes
import os
import struct
import sys

CREATE_RULESET, RESTRICT_SELF, ACCESS_FS_MAKE_BLOCK, PR_SET_NO_NEW_PRIVS = 444, 446, 1 << 11, 38
ACCESS_NET_BIND_TCP, ACCESS_NET_CONNECT_TCP = 1, 2
SCOPE_ABSTRACT_UNIX_SOCKET, SCOPE_SIGNAL = 1, 2
libc = ctypes.CDLL(None, use_errno=True)


def abi() -> int:
    """Landlock's ABI version here, 0 without it."""
    return max(0, libc.syscall(CREATE_RULESET, None, ctypes.c_size_t(0), 1))  # 1: ask for the version


def ruleset(version: int, no_network: bool) -> bytes:
    """struct landlock_ruleset_attr: what the domain handles (and so denies, having no rule that allows it).
    Making block devices (nobody may, here) restricts nothing else, but a process in a domain can trace only
    processes of its own domain and those below."""
    if not no_network or version < 4:
        return struct.pack("=Q", ACCESS_FS_MAKE_BLOCK)
    net = ACCESS_NET_BIND_TCP | ACCESS_NET_CONNECT_TCP
    if version < 6:
        return struct.pack("=QQ", ACCESS_FS_MAKE_BLOCK, net)
    return struct.pack("=QQQ", ACCESS_FS_MAKE_BLOCK, net, SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL)


def check(result: int, what: str) -> None:
    if result < 0:
        raise OSError(ctypes.get_errno(), f"{what} failed")


if __name__ == "__main__":
    argv, no_network = sys.argv[1:], sys.argv[1:2] == ["--no-network"]
    argv = argv[1:] if no_network else argv
    if version := abi():
        attr = ruleset(version, no_network)
        fd = libc.syscall(CREATE_RULESET, ctypes.create_string_buffer(attr), ctypes.c_size_t(len(attr)), 0)
        check(fd, "landlock_create_ruleset")
        check(libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(PR_SET_NO_NEW_PRIVS)")
        check(libc.syscall(RESTRICT_SELF, fd, 0), "landlock_restrict_self")
        os.close(fd)
    os.execvp(argv[0], argv)
