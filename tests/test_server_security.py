"""The env service binds to loopback unless told otherwise, and then demands a token."""

from __future__ import annotations

import ipaddress

import pytest

from computerrl.envs.service.client import EnvClient, EnvError
from computerrl.envs.service.server import EnvServer


def test_refuses_to_listen_wider_without_a_token():
    with pytest.raises(ValueError, match="without a token"):
        EnvServer(host="0.0.0.0", desktops=0)


def test_a_wider_server_rejects_calls_without_the_token():
    srv = EnvServer(host="0.0.0.0", desktops=0, token="s3cret").start()
    try:
        for token in ("", "wrong"):
            client = EnvClient(f"127.0.0.1:{srv.port}", token)
            with pytest.raises(EnvError, match="UNAUTHENTICATED"):
                client.health()
            client.close()
        client = EnvClient(f"127.0.0.1:{srv.port}", "s3cret")
        assert client.health().healthy
        client.close()
    finally:
        srv.stop()


def listening_addresses(port: int) -> set[str]:
    """Local IPv4/IPv6 addresses with a listening socket on `port`, read from /proc (no traffic sent)."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as f:
            for line in list(f)[1:]:
                local, state = line.split()[1], line.split()[3]
                addr, hex_port = local.split(":")
                if state == "0A" and int(hex_port, 16) == port:  # 0A = LISTEN
                    found.add(_decode(addr))
    return found


def _decode(hex_addr: str) -> str:
    """/proc/net's address: 32-bit words in host (little-endian) order; v4-mapped v6 shown as v4."""
    raw = b"".join(bytes.fromhex(hex_addr[i:i + 8])[::-1] for i in range(0, len(hex_addr), 8))
    ip = ipaddress.ip_address(raw)
    return str(ip.ipv4_mapped or ip) if ip.version == 6 else str(ip)


def test_default_server_listens_on_loopback_only():
    srv = EnvServer(desktops=0).start()
    try:
        assert listening_addresses(srv.port) == {"127.0.0.1"}
    finally:
        srv.stop()
    wide = EnvServer(host="0.0.0.0", desktops=0, token="t").start()
    try:
        wide_addresses = listening_addresses(wide.port)
        assert wide_addresses and wide_addresses <= {"0.0.0.0", "::"}  # the check does see a wide bind
    finally:
        wide.stop()


def test_unknown_desktop_index_is_a_clear_error():
    srv = EnvServer(desktops=0).start()
    try:
        client = EnvClient(f"127.0.0.1:{srv.port}")
        with pytest.raises(EnvError, match="no desktop 3"):
            client.reset(3)
        client.close()
    finally:
        srv.stop()
