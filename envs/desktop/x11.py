"""The X side of a desktop: window list, focus, screenshot, all in-process (no subprocess per call).

Every display demands its desktop's cookie (MIT-MAGIC-COOKIE-1, in an Xauthority file only that
desktop and the env server hold). Xlib reads the file named by $XAUTHORITY when it connects: this
process's own file lists the cookie of every display it serves (`grant`), set once, rewritten whole.
A display that stops answering (an agent's client grabbed the server) fails the call in
`X_TIMEOUT_S` instead of hanging it.
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import io
import os
import shutil
import socket
import struct
import tempfile
import threading
import time

from Xlib import X, display as xdisplay
from Xlib.error import XError

FAMILY_LOCAL, FAMILY_WILD = 256, 65535  # Xauthority address families: a host name; any address
X_TIMEOUT_S = 10.0  # an X request unanswered this long: the display is wedged
# Every window's properties are any X client's to set, at any length (an agent appending megabytes to its
# own window's title): what is read of them is bounded, so an observation stays small whatever the agent did.
TITLE_CHARS = 256  # a window's title as observed
MAX_WINDOWS = 64  # windows listed, in the client list's order
_granted: dict[str, bytes] = {}  # display number -> cookie, for this process's connections
_own_file: tuple[int, str] | None = None  # (pid, path): this process's Xauthority file
_grant_lock = threading.Lock()


def _entry(family: int, address: bytes, number: bytes, cookie: bytes) -> bytes:
    def field(b: bytes) -> bytes:
        return struct.pack(">H", len(b)) + b

    return struct.pack(">H", family) + field(address) + field(number) + field(b"MIT-MAGIC-COOKIE-1") + field(cookie)


def xauthority(cookie: bytes, hostnames: list[str]) -> bytes:
    """An Xauthority file granting `cookie` for every display of these hosts (and, for libX11, any host).
    An empty display number matches every display: the number is known only once Xvfb runs."""
    return b"".join(_entry(family, address, b"", cookie)
                    for family, address in [(FAMILY_LOCAL, h.encode()) for h in hostnames] + [(FAMILY_WILD, b"")])


def grant(display: str, cookie: bytes | None) -> None:
    """This process's X connections to `display` show `cookie` (None: forget the display)."""
    global _own_file
    number = display.lstrip(":").split(".")[0]
    with _grant_lock:
        if cookie is None:
            _granted.pop(number, None)
        else:
            _granted[number] = cookie
        # Our own file, made once per process; $XAUTHORITY names it from now on. Never one inherited
        # through the environment: a parent's or sibling's file is rewritten whole with their displays.
        if _own_file is None or _own_file[0] != os.getpid():
            folder = tempfile.mkdtemp(prefix="computerrl-x-")
            atexit.register(shutil.rmtree, folder, True)
            _own_file = os.getpid(), os.path.join(folder, "Xauthority")
            os.environ["XAUTHORITY"] = _own_file[1]
        path = _own_file[1]
        host = socket.gethostname().encode()
        data = b"".join(_entry(FAMILY_LOCAL, host, n.encode(), c) + _entry(FAMILY_WILD, b"", n.encode(), c)
                        for n, c in _granted.items())
        tmp = f"{path}.tmp"
        with open(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "wb") as f:
            f.write(data)
        os.replace(tmp, path)  # a reader sees the old file or the new one, never half of one


@dataclasses.dataclass(frozen=True)
class Window:
    id: int  # X window id; `Agent.switch_window` takes it as hex ("0x1a00004") or decimal
    title: str
    wm_class: str  # e.g. "libreoffice-calc", "xterm"
    pid: int  # _NET_WM_PID, 0 when the client did not set it
    focused: bool

    @property
    def hex_id(self) -> str:
        return f"0x{self.id:08x}"


class Screen:
    """One connection to one X display (not thread-safe: the desktop serializes calls)."""

    def __init__(self, display: str):
        self.display_name = display
        self._d = xdisplay.Display(display)
        self._root = self._d.screen().root
        self._atoms = {n: self._d.intern_atom(n) for n in
                       ("_NET_CLIENT_LIST", "_NET_ACTIVE_WINDOW", "_NET_WM_NAME", "_NET_WM_PID", "UTF8_STRING",
                        "WM_NAME", "WM_CLASS")}
        self._grabber = None  # mss instance, made on first screenshot
        self._deadline = 0.0  # monotonic time by which the call in flight must be answered (0 = none)
        self._cut = False
        threading.Thread(target=self._watch, daemon=True, name=f"x-watch{display}").start()

    def _watch(self) -> None:
        """Cut the connection under a call past its deadline: the call then fails instead of hanging."""
        while self._d is not None:
            if self._deadline and time.monotonic() > self._deadline and not self._cut:
                self._cut = True
                with contextlib.suppress(OSError):
                    self._d.display.socket.shutdown(socket.SHUT_RDWR)
            time.sleep(0.5)

    @contextlib.contextmanager
    def _answered(self):
        self._deadline = time.monotonic() + X_TIMEOUT_S
        try:
            yield
        except Exception:
            if self._cut:
                raise TimeoutError(f"the X server did not answer within {X_TIMEOUT_S:.0f} s") from None
            raise
        finally:
            self._deadline = 0.0

    @property
    def size(self) -> tuple[int, int]:
        s = self._d.screen()
        return s.width_in_pixels, s.height_in_pixels

    def _prop(self, win, name: str, longs: int = 64):
        """The property's value, at most its first `longs` 32-bit units (None when it is not set)."""
        p = win.get_property(self._atoms[name], X.AnyPropertyType, 0, longs)
        return p.value if p is not None and p.property_type != X.NONE else None

    def _text(self, win, name: str, chars: int) -> str:
        value = self._prop(win, name, chars)  # a character is at most 4 bytes of UTF-8
        return value.decode("utf-8", "replace")[:chars] if isinstance(value, bytes) else ""

    def active_window_id(self) -> int:
        v = self._prop(self._root, "_NET_ACTIVE_WINDOW")
        return int(v[0]) if v is not None and len(v) else 0

    def windows(self) -> list[Window]:
        """Managed top-level windows in stacking order of the window manager's client list."""
        with self._answered():
            return self._windows()

    def _windows(self) -> list[Window]:
        ids = self._prop(self._root, "_NET_CLIENT_LIST", MAX_WINDOWS)
        active = self.active_window_id()
        out = []
        for wid in ids if ids is not None else []:
            try:
                w = self._d.create_resource_object("window", int(wid))
                title = self._text(w, "_NET_WM_NAME", TITLE_CHARS) or self._text(w, "WM_NAME", TITLE_CHARS)
                cls = self._text(w, "WM_CLASS", TITLE_CHARS).split("\0")  # instance, class
                pid = self._prop(w, "_NET_WM_PID", 1)
                out.append(Window(int(wid), title, cls[1] if len(cls) > 1 else "", int(pid[0]) if pid else 0,
                                  int(wid) == active))
            except XError:  # the window vanished between the list and the query
                continue
        return out

    def window_size(self, window_id: int) -> tuple[int, int]:
        """A client window's own size (without the window manager's frame)."""
        with self._answered():
            g = self._d.create_resource_object("window", window_id).get_geometry()
            return g.width, g.height

    def screenshot_png(self) -> bytes:
        """PNG of the whole screen. zlib level 1: 5-10x faster than the default, ~1.3x the bytes."""
        import mss
        from PIL import Image

        if self._grabber is None:
            self._grabber = mss.MSS(display=self.display_name)
        shot = self._grabber.grab(self._grabber.monitors[0])
        img = Image.frombuffer("RGB", shot.size, shot.bgra, "raw", "BGRX", 0, 1)
        buf = io.BytesIO()
        img.save(buf, format="PNG", compress_level=1)
        return buf.getvalue()

    def close(self) -> None:
        if self._grabber is not None:
            self._grabber.close()
            self._grabber = None
        if self._d is not None:
            self._d.close()
            self._d = None
