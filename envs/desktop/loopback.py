"""HTTP to an app's control port inside a desktop (Chromium's DevTools, VLC's web interface).

The port is on the sandbox's own loopback, which the env server cannot reach: the keeper connects
for it, and only when the process listening there runs the app's own program, started as the
desktop's launcher starts it (`launched`: see sandbox_init.py `_otherwise_started`), so a program of
the agent's that took the port, or the app started the agent's own way (serving pages of its own,
with no window on the screen), is refused rather than believed. (The app itself stays the agent's
to steer, as it could through the app's own window.)
"""

from __future__ import annotations

import http.client
import time
from typing import TYPE_CHECKING

from computerrl.apis.kit import AppUnreachable

if TYPE_CHECKING:
    from computerrl.envs.desktop.sandbox import Sandbox

REPLY_LIMIT = 64 << 20  # bytes of one answer (a page's HTML)


def connect(sandbox: "Sandbox", port: int, program: str, timeout_s: float, launched: dict | None = None):
    try:
        sock = sandbox.connect(port, program=program, timeout_s=min(timeout_s, 5.0), launched=launched)
    except Exception as e:  # noqa: BLE001 - refused, another program on the port, the sandbox gone
        raise AppUnreachable(f"nothing of {program} answers on the desktop's port {port}: {e}") from None
    sock.settimeout(timeout_s)
    return sock


def http_request(sandbox: "Sandbox", port: int, program: str, path: str, *, method: str = "GET",
                 headers: dict | None = None, timeout_s: float = 10.0, launched: dict | None = None
                 ) -> tuple[int, bytes]:
    """(status, body) of one request to the app; AppUnreachable when it cannot be asked."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout_s)
    conn.sock = connect(sandbox, port, program, timeout_s, launched)
    deadline = time.monotonic() + timeout_s
    try:
        conn.request(method, path, headers=headers or {})
        reply = conn.getresponse()
        chunks, size = [], 0
        while size < REPLY_LIMIT:  # read in pieces: a server that trickles its answer meets the deadline
            if time.monotonic() > deadline:
                raise AppUnreachable(f"{program} on port {port}, {path}: no whole answer within {timeout_s:.0f} s")
            chunk = reply.read1(1 << 16)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        return reply.status, b"".join(chunks)[:REPLY_LIMIT]
    except (OSError, http.client.HTTPException) as e:
        raise AppUnreachable(f"{program} on port {port}, {path}: {type(e).__name__}: {e}") from None
    finally:
        conn.close()
