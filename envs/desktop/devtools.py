"""Chromium's DevTools, as the env server reaches it inside a desktop.

Chromium in a desktop listens for DevTools on the sandbox's own loopback (port 1337: see
compat/bin/chromium). The server has no way into that network; the keeper connects for it, checks
that Chromium itself accepted (not a program of the agent's listening in its place), one whose
windows are on the desktop's screen (`ON_SCREEN`), and hands over the socket (`loopback.connect`).
Over it go the HTTP endpoints (`/json/list`, `/json/new`,
…) and, for what they lack, one page's DevTools protocol on a WebSocket: a small client of our own
(RFC 6455, text frames only), as a page's replies are JSON.
"""

from __future__ import annotations

import base64
import json
import os
import socket
import struct
import time
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlsplit

from computerrl.apis.kit import AppUnreachable
from computerrl.envs.desktop.loopback import REPLY_LIMIT, connect, http_request

if TYPE_CHECKING:
    from computerrl.envs.desktop.sandbox import Sandbox

PORT = 1337  # as OSWorld's tasks start Chrome (`--remote-debugging-port=1337`)
BROWSER = "/usr/lib/chromium/chromium"  # what must answer there: a program listening in its place is refused
# Only a browser whose tabs are windows on the desktop's screen is believed, as the keeper can tell
# (sandbox_init.py `_otherwise_started`): not headless, drawing through X, and a client of the
# desktop's own X server through a connection of its own (not another display's, not a relay's).
# Tabs it opens, even through DevTools, open in windows there. (Which window is whose, the X server
# cannot say: _NET_WM_PID is the client's own word, which any client may rewrite, `xprop -set` does.)
ON_SCREEN = {"on_display": True, "switches": {"headless": [], "ozone-platform": ["x11"],
                                              "ozone-platform-hint": ["x11", "auto"], "display": []}}


class DevToolsError(AppUnreachable):
    """Chromium is not running in the desktop, or did not answer as DevTools does."""


class DevTools:
    def __init__(self, sandbox: "Sandbox", port: int = PORT, timeout_s: float = 10.0):
        self.sandbox, self.port, self.timeout_s = sandbox, port, timeout_s

    def http(self, path: str, method: str = "GET") -> Any:
        """One DevTools HTTP endpoint's JSON answer."""
        try:
            status, body = http_request(self.sandbox, self.port, BROWSER, path, method=method, timeout_s=self.timeout_s,
                                        launched=ON_SCREEN)
        except AppUnreachable as e:
            raise DevToolsError(f"DevTools {path}: {e} (is Chrome running?)") from None
        if status != 200:
            raise DevToolsError(f"DevTools {path}: HTTP {status}: {body[:200].decode(errors='replace')}")
        try:
            return json.loads(body) if body.strip() else None
        except (ValueError, RecursionError):
            return body.decode(errors="replace")  # /json/close answers in plain text

    # ---- tabs ------------------------------------------------------------------------------
    def tabs(self) -> list[dict]:
        """The open tabs (page targets), most recently active first, as DevTools lists them."""
        listed = self.http("/json/list") or []
        if not isinstance(listed, list) or not all(isinstance(t, dict) for t in listed):
            raise DevToolsError("DevTools /json/list did not answer a list of targets")
        return [t for t in listed if t.get("type") == "page"]

    def window(self, tab: dict) -> dict:
        """The bounds of the window showing a tab: left, top, width, height and windowState (normal,
        minimized, maximized, fullscreen), as the browser knows them (an app the agent cannot rewrite)."""
        return self.call(tab, "Browser.getWindowForTarget").get("bounds", {})

    def open(self, url: str) -> dict:
        return self.http(f"/json/new?{quote(url, safe=':/?&=#%+@,;~')}", method="PUT")

    def close(self, tab_id: str) -> None:
        self.http(f"/json/close/{tab_id}")

    def activate(self, tab_id: str) -> None:
        self.http(f"/json/activate/{tab_id}")

    def evaluate(self, tab: dict, expression: str) -> Any:
        """The value of a JavaScript expression in a tab (awaited when it is a promise)."""
        reply = self.call(tab, "Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in reply:
            raise DevToolsError(f"the page's script failed: {reply['exceptionDetails'].get('text', '')}")
        return reply.get("result", {}).get("value")

    def call(self, tab: dict, method: str, **params) -> dict:
        """One DevTools protocol command on a tab's own WebSocket; its result."""
        path = urlsplit(tab.get("webSocketDebuggerUrl", "")).path
        if not path:
            raise DevToolsError(f"tab {tab.get('id')} has no DevTools socket (another client holds it?)")
        try:
            sock = connect(self.sandbox, self.port, BROWSER, self.timeout_s, ON_SCREEN)
        except AppUnreachable as e:
            raise DevToolsError(str(e)) from None
        deadline = time.monotonic() + self.timeout_s
        with WebSocket(sock, path, self.port, deadline) as ws:
            ws.send(json.dumps({"id": 1, "method": method, "params": params}))
            while time.monotonic() < deadline:
                try:
                    message = json.loads(ws.receive())
                except (ValueError, RecursionError):
                    raise DevToolsError(f"{method}: DevTools answered something other than JSON") from None
                if not isinstance(message, dict):
                    continue
                if message.get("id") == 1:
                    if "error" in message:
                        raise DevToolsError(f"{method}: {message['error'].get('message')}")
                    return message.get("result", {})
        raise DevToolsError(f"{method}: no answer within {self.timeout_s:.0f} s")


class WebSocket:
    """A WebSocket client over a connected socket: the opening handshake, masked text frames out,
    whole messages in (fragments joined; pings answered)."""

    def __init__(self, sock: socket.socket, path: str, port: int, deadline: float):
        self.sock, self.buffer, self.deadline = sock, bytearray(), deadline  # one deadline for the whole exchange
        key = base64.b64encode(os.urandom(16)).decode()
        sock.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\n"
                     f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n".encode())
        head = self._until(b"\r\n\r\n")
        if not head.startswith(b"HTTP/1.1 101"):
            status = head.splitlines()[0].decode(errors="replace") if head else ""
            raise DevToolsError(f"DevTools refused the WebSocket: {status}")

    def __enter__(self):
        return self

    def __exit__(self, *_):
        self.sock.close()

    def _recv(self, size: int) -> bytes:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise DevToolsError("DevTools took too long to answer")
        self.sock.settimeout(left)
        try:
            return self.sock.recv(size)
        except OSError as e:
            raise DevToolsError(f"DevTools' WebSocket: {e}") from None

    def _read(self, n: int) -> bytes:
        while len(self.buffer) < n:
            data = self._recv(1 << 16)
            if not data:
                raise DevToolsError("DevTools closed the WebSocket")
            self.buffer += data
        out = bytes(self.buffer[:n])
        del self.buffer[:n]
        return out

    def _until(self, end: bytes) -> bytes:
        while end not in self.buffer:
            data = self._recv(4096)
            if not data or len(self.buffer) > 65536:
                raise DevToolsError("DevTools did not answer the WebSocket handshake")
            self.buffer += data
        head, rest = bytes(self.buffer).split(end, 1)
        self.buffer = bytearray(rest)
        return head

    def _frame(self, opcode: int, payload: bytes) -> None:
        mask = os.urandom(4)
        n = len(payload)
        size = bytes([0x80 | n]) if n < 126 else struct.pack("!BH", 0x80 | 126, n) if n < 1 << 16 \
            else struct.pack("!BQ", 0x80 | 127, n)
        masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
        self.sock.sendall(bytes([0x80 | opcode]) + size + mask + masked)

    def send(self, text: str) -> None:
        self._frame(0x1, text.encode())

    def receive(self) -> str:
        parts, total = [], 0
        while True:
            first, second = self._read(2)
            n = second & 0x7F
            n = struct.unpack("!H", self._read(2))[0] if n == 126 else struct.unpack("!Q", self._read(8))[0] \
                if n == 127 else n
            total += n
            if total > REPLY_LIMIT:
                raise DevToolsError(f"a DevTools message larger than {REPLY_LIMIT >> 20} MB")
            payload = self._read(n)  # a server's frames are not masked
            opcode = first & 0x0F
            if opcode >= 0x8 and n > 125:  # RFC 6455: control frames are short
                raise DevToolsError("DevTools sent a control frame longer than 125 bytes")
            if opcode == 0x9:
                self._frame(0xA, payload)
                continue
            if opcode == 0x8:
                raise DevToolsError("DevTools closed the WebSocket")
            if opcode in (0x1, 0x2, 0x0):
                parts.append(payload)
            if first & 0x80 and opcode != 0xA:
                return b"".join(parts).decode(errors="replace")
