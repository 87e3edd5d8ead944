"""Accessibility tree of a desktop's focused application, read fast over AT-SPI and linearized.

A naive pyatspi walk pays a blocking D-Bus round trip per property per node. Here each level of a
breadth-first walk over the SHOWING+VISIBLE subtrees of the active window costs three *pipelined*
batches (children; states; role, name, extents, interfaces of the showing ones): all calls of a
batch are written at once and replies matched by serial. Messages are (un)marshalled by hand:
jeepney's generic code costs ~45 us each. Not used: `Cache.GetItems`, as LibreOffice 7.4 computes
all its ~2,000 objects per document for it (~100 ms), and after a document closed it walks the
dead ones and can abort (SIGABRT in atk_object_get_index_in_parent, seen).

LibreOffice specifics: a table that manages its descendants (a Calc sheet has 17 billion cells) is
never enumerated; the cells between those at its visible corners are read and the non-empty ones
(plus the focused one) kept. Calc makes a cell object per request (~0.1 ms of its CPU) and keeps
it (~6 KB) until the document closes: cell objects are reused while the bridge serves them (~15 s)
and `max_cells` bounds them per call. gtk3 places VCL widgets as if the native GTK menu bar did
not exist (25 px too high): a VCL root pane is moved onto its GTK host.
"""
from __future__ import annotations

import functools
import select
import socket
import struct
import time
from dataclasses import dataclass
from typing import NamedTuple

from jeepney.low_level import Endianness, MessageType, parse_signature

ROOT = "/org/a11y/atspi/accessible/root"
ACC, COMP, TEXT, TABLE = (f"org.a11y.atspi.{i}" for i in ("Accessible", "Component", "Text", "Table"))
PROPS = "org.freedesktop.DBus.Properties"
# AtspiStateType bits (at-spi2-core atspi-constants.h); those worth reporting in Node.states:
STATES = {1: "active", 4: "checked", 7: "editable", 8: "enabled", 10: "expanded", 12: "focused", 20: "pressed",
          23: "selected"}
ACTIVE, EDITABLE, FOCUSED, MANAGES = 1 << 1, 1 << 7, 1 << 12, 1 << 31
SHOWN = 1 << 25 | 1 << 30  # SHOWING and VISIBLE
# Layout-only roles, dropped when they carry no name and no text (their children are kept).
BORING = {"filler", "panel", "section", "unknown", "viewport", "scroll pane", "split pane", "label",
          "separator", "redundant object", "layered pane", "glass pane", "grouping"}
MAX_CELLS = 1200     # cells read per managed table per call (a 1080p Calc window shows 50 x 23)
MAX_CHILDREN = 1000  # children listed per object: guards against huge flat lists
MAX_DEPTH = 64       # tree levels walked
FIELD_CHARS = 100    # characters kept per linearized field


@dataclass(frozen=True)
class CellHint:
    """What the spreadsheet itself says of its active sheet (0-based): where content ends, where the cursor is."""

    last_row: int
    last_col: int
    cursor: tuple[int, int]


class A11yError(RuntimeError):
    """The accessibility bus failed or did not answer in time."""


@dataclass(frozen=True)
class AppInfo:
    name: str
    bus_name: str
    pid: int


@dataclass(frozen=True)
class Node:
    role: str
    name: str
    text: str
    x: int  # top-left corner, screen coordinates
    y: int
    w: int
    h: int
    states: frozenset[str] = frozenset()


@dataclass(frozen=True)
class RawNode:
    """A showing object as read (tree preorder), before pruning and position fixes."""
    path: str
    parent: str | None  # the object it was reached from; None for a window
    role: str
    name: str
    text: str = ""
    states: frozenset[str] = frozenset()
    box: tuple[int, int, int, int] | None = None  # raw screen extents; None: no Component
    relinked: bool = False  # its own Parent is not the object it was reached from


class _Obj(NamedTuple):
    parent: str  # the path it reports as its parent
    count: int
    name: str  # name, else description
    role: str
    states: int
    box: tuple | None
    ifaces: list


def from_words(words) -> int:
    return sum(w << 32 * i for i, w in enumerate(words))


def prune(raw: list[RawNode]) -> list[Node]:
    """Drop zero-size and off-screen subtrees and empty layout containers; fix LibreOffice offsets."""
    offset, origin, gone, nodes = {}, {}, set(), []
    for r in raw:
        if r.parent in gone:
            gone.add(r.path)
            continue
        dx, dy = offset.get(r.parent, (0, 0))
        if r.relinked:  # another toolkit's object: its own coordinates hold, except for a VCL
            host = origin.get(r.parent)  # root pane, which belongs exactly where its GTK host is
            fix = r.role == "root pane" and host and r.box
            dx, dy = (host[0] - r.box[0], host[1] - r.box[1]) if fix else (0, 0)
        offset[r.path] = (dx, dy)
        if r.box is None:
            continue  # no geometry: a pass-through, its children are judged on their own
        x, y, w, h = r.box
        if w <= 0 or h <= 0 or x + w <= 0 or y + h <= 0:
            gone.add(r.path)
            continue
        origin[r.path] = (x + dx, y + dy)
        if r.name or r.text or r.role not in BORING:
            nodes.append(Node(r.role, r.name, r.text, x + dx, y + dy, w, h, r.states))
    return nodes


def _field(s: str) -> str:
    s = s.replace("\r", "").replace("\n", "\\n").replace("\t", "\\t")
    return s if len(s) <= FIELD_CHARS else s[:FIELD_CHARS - 1] + "…"


def linearize(nodes: list[Node], max_lines: int = 300) -> str:
    """Tab-separated table, one node per line; position is the box centre."""
    keep = nodes if len(nodes) <= max_lines else nodes[:max(max_lines - 1, 0)]
    lines = ["tag\tname\ttext\tposition\tsize"] + [
        f"{n.role.replace(' ', '-')}\t{_field(n.name)}\t{_field(n.text)}\t"
        f"({n.x + n.w // 2}, {n.y + n.h // 2})\t({n.w}, {n.h})" for n in keep]
    if len(keep) < len(nodes):
        lines.append(f"... {len(nodes) - len(keep)} more nodes")
    return "\n".join(lines)


@functools.lru_cache(maxsize=8192)
def _fields(dest: str, path: str, iface: str, member: str, sig: str) -> bytes:
    """Marshalled header fields of a method call (the same for each call of a method on an object)."""
    out = b""
    for code, t, v in ((1, "o", path), (6, "s", dest), (2, "s", iface), (3, "s", member), (8, "g", sig)):
        if v:
            b = v.encode()
            out += b"\0" * (-len(out) % 8) + bytes((code, 1, ord(t), 0))
            out += (bytes((len(b),)) if t == "g" else struct.pack("<I", len(b))) + b + b"\0"
    return out


def _call(serial: int, dest: str, path: str, iface: str, member: str, sig: str = "", args=()) -> bytes:
    """A little-endian method call; arguments of types i, u and s only (all AT-SPI needs here)."""
    fields, body = _fields(dest, path, iface, member, sig), b""
    for t, a in zip(sig, args):
        body += b"\0" * (-len(body) % 4)
        b = a.encode() if t == "s" else b""
        body += struct.pack("<I", len(b)) + b + b"\0" if t == "s" else struct.pack("<I" if t == "u" else "<i", a)
    return b"l\1\0\1" + struct.pack("<III", len(body), serial, len(fields)) + fields + b"\0" * (-len(fields) % 8) + body


@functools.lru_cache(maxsize=64)
def _body_type(sig: str):
    return parse_signature(list(f"({sig})"))


def _replies(buf: bytearray) -> list[tuple[int, tuple | None]]:
    """Pop complete messages off buf; return (reply serial, body or None for an error) per reply."""
    pos, out = 0, []
    while len(buf) - pos >= 16:
        if buf[pos] != ord("l"):
            raise A11yError("big-endian D-Bus peer: not supported")
        blen, _, flen = struct.unpack_from("<III", buf, pos + 4)
        start = pos + 16 + flen + (-flen % 8)
        if len(buf) < start + blen:
            break
        reply, sig, f = None, "", pos + 16
        while f < pos + 16 + flen:  # header fields: (code, variant of type g, u, s or o)
            f += -(f - pos) % 8
            code, t, f = buf[f], buf[f + 2], f + 4
            if t == ord("g"):
                val, f = bytes(buf[f + 1:f + 1 + buf[f]]).decode(), f + buf[f] + 2
            else:
                f += -(f - pos) % 4
                val = struct.unpack_from("<I", buf, f)[0]
                f += 4 if t == ord("u") else 5 + val
            reply, sig = (val if code == 5 else reply), (val if code == 8 else sig)
        if reply is not None and buf[pos + 1] in (2, 3):  # method return, error
            msg = bytes(buf[pos:start + blen])  # jeepney aligns relative to the buffer's start
            out.append((reply, None if buf[pos + 1] == 3 else
                        _body_type(sig).parse_data(msg, start - pos, Endianness.little)[0] if sig else ()))
        pos = start + blen
    del buf[:pos]
    return out


def connect_bus(path: str, timeout_s: float) -> socket.socket:
    """An authenticated D-Bus connection over the unix socket at `path`.

    EXTERNAL without a claimed uid: the bus lives in the desktop's user namespace, where our uid has
    another number or none, so the usual claim (our own uid) would be refused; the bus takes the
    kernel's word on who we are instead, and its policy admits us.
    """
    from computerrl.envs.desktop.sandbox import unix_path

    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(timeout_s)
    try:
        with unix_path(path) as short:
            sock.connect(short)
        sock.sendall(b"\0AUTH EXTERNAL\r\n")
        reply = _auth_line(sock)
        if reply.startswith(b"DATA"):
            sock.sendall(b"DATA\r\n")
            reply = _auth_line(sock)
        if not reply.startswith(b"OK "):
            raise A11yError(f"the AT-SPI bus refused us: {reply.decode(errors='replace').strip()}")
        sock.sendall(b"BEGIN\r\n")
    except BaseException:
        sock.close()
        raise
    return sock


def _auth_line(sock: socket.socket) -> bytes:
    line = b""
    while not line.endswith(b"\r\n"):
        chunk = sock.recv(1)
        if not chunk:
            raise ConnectionResetError("the AT-SPI bus closed the connection while authenticating")
        line += chunk
    return line


class A11yReader:
    """Reads the AT-SPI bus whose unix socket is at `bus_path`."""

    def __init__(self, bus_path: str, *, timeout_s: float = 2.0, max_cells: int = MAX_CELLS):
        self.bus_path, self.timeout_s, self.max_cells = bus_path, timeout_s, max_cells
        self._sock, self._buf, self._serial = None, bytearray(), 1
        # Calc makes a cell object per request and keeps it until the document closes (~6 KB,
        # ~0.1 ms): reuse them while they live. (bus, table path, (row, col)) -> cell path.
        self._cell_paths: dict[tuple, str] = {}

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None

    def applications(self) -> list[AppInfo]:
        return self.guard(self._applications)

    def tree(self, pid: int | None = None, *, max_lines: int = 300, used: CellHint | None = None) -> list[Node]:
        """Showing nodes of the application with that pid (None: the first with a showing window).
        max_lines bounds the table cells kept; the list may be longer (linearize trims it).
        `used` (from the application itself, e.g. over UNO) limits the cells read to the used area."""
        return self.guard(self._tree, pid, max_lines, used)

    def guard(self, fn, *args):
        """fn(*args) over the bus: a lost bus is an A11yError, and the next call connects again."""
        try:
            return fn(*args)
        except (OSError, EOFError) as e:  # the bus went away: reconnect on the next call
            self.close()
            raise A11yError(f"AT-SPI bus connection lost: {e!r}") from e

    def _socket(self):
        if self._sock is None:
            self._sock = connect_bus(self.bus_path, self.timeout_s)  # its timeout bounds sendall too
            self._buf.clear()
            self.batch([("org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus", "Hello")])
        return self._sock

    def batch(self, calls: list[tuple]) -> list:
        """Pipelined calls (dest, path, iface, member[, sig, args]) -> bodies, None for errors."""
        if not calls:
            return []
        sock, first = self._socket(), self._serial
        self._serial += len(calls)
        sock.sendall(b"".join(_call(first + i, *c) for i, c in enumerate(calls)))
        out, missing, deadline = [...] * len(calls), len(calls), time.monotonic() + self.timeout_s  # ...: unanswered
        while missing:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([sock], [], [], left)[0]:
                raise A11yError(f"{missing} of {len(calls)} AT-SPI calls ({calls[0][3]}...) unanswered in "
                                f"{self.timeout_s} s")
            if missing > 50:
                time.sleep(0.001)  # let replies pile up: fewer wake-ups leave the CPU to the application
            chunk = sock.recv(1 << 16)
            if not chunk:
                raise ConnectionResetError("AT-SPI bus closed the connection")
            self._buf += chunk
            for serial, body in _replies(self._buf):
                if 0 <= serial - first < len(calls) and out[serial - first] is ...:
                    out[serial - first], missing = body, missing - 1
        return out

    def _applications(self) -> list[AppInfo]:
        found = self.batch([("org.a11y.atspi.Registry", ROOT, ACC, "GetChildren")])[0]
        if found is None:
            raise A11yError("the AT-SPI registry did not list applications")
        buses, dbus = [b for b, _ in found[0]], ("org.freedesktop.DBus", "/org/freedesktop/DBus")
        r = self.batch([c for b in buses for c in ((b, ROOT, PROPS, "Get", "ss", (ACC, "Name")),
                                                    (*dbus, dbus[0], "GetConnectionUnixProcessID", "s", (b,)))])
        return [AppInfo(n[0][1] if n else "", b, p[0] if p else -1) for b, n, p in zip(buses, r[::2], r[1::2])]

    def _tree(self, pid, max_lines, used) -> list[Node]:
        apps = [a for a in self._applications() if pid is None or a.pid == pid]
        if pid is not None and not apps:
            raise A11yError(f"no accessible application has pid {pid}")
        for app in apps:
            if raw := self._read(app.bus_name, max_lines, used):
                return prune(raw)
        return []

    def _read(self, bus: str, max_lines: int, used: CellHint | None) -> list[RawNode]:
        objs, children, tables = {}, {}, set()
        top = self.batch([(bus, ROOT, ACC, "GetChildren")])[0]
        self._describe(bus, objs, [p for _, p in top[0]] if top else [])
        active = [p for p in objs if objs[p].states & ACTIVE]  # other documents' frames are skipped
        wins = level = active + [p for p in objs if p not in active and not (active and objs[p].role == "frame")]
        for _ in range(MAX_DEPTH):  # breadth first: three pipelined batches per level
            listing = []
            for p in level:
                o = objs[p]
                if o.box and (o.box[2] <= 0 or o.box[3] <= 0):
                    continue  # an empty box hides its subtree (LibreOffice's unused VCL menu bar)
                if o.states & MANAGES and TABLE in o.ifaces:
                    tables.add(p)
                elif o.count > 0 and not (o.states & MANAGES and o.count > MAX_CHILDREN):
                    listing.append(p)
            new = []
            for p, ks in zip(listing, self.batch([(bus, p, ACC, "GetChildren") for p in listing])):
                children[p] = [c for _, c in ks[0][:MAX_CHILDREN]] if ks else []
                new += [c for c in children[p] if c not in objs]
            self._describe(bus, objs, list(dict.fromkeys(new)))
            level = [c for c in dict.fromkeys(new) if c in objs]
        order, stack = {}, [(w, None) for w in reversed(wins)]
        while stack:  # preorder
            p, parent = stack.pop()
            if p not in order and p in objs:
                order[p] = parent
                stack += [(c, p) for c in reversed(children.get(p, ()))]
        texts = [p for p in order if TEXT in objs[p].ifaces and (not objs[p].name or objs[p].states & EDITABLE)]
        r = self.batch([(bus, p, TEXT, "GetText", "ii", (0, -1)) for p in texts])
        text, raw = {p: t[0] for p, t in zip(texts, r) if t and t[0] != objs[p].name}, []
        for p, parent in order.items():
            o = objs[p]
            raw.append(RawNode(p, parent, o.role, o.name, text.get(p, ""),
                               frozenset(s for i, s in STATES.items() if o.states >> i & 1), o.box,
                               parent is not None and o.parent != parent))
            if p in tables and o.box:
                raw += self._cells(bus, p, o.box, max_lines, used)
        return raw

    def _describe(self, bus: str, objs: dict, paths: list[str]) -> None:
        """Add the showing objects among paths to objs: states first, then four calls for each."""
        states = self.batch([(bus, p, ACC, "GetState") for p in paths])
        shown = [(p, from_words(s[0])) for p, s in zip(paths, states) if s and from_words(s[0]) & SHOWN == SHOWN]
        r = self.batch([c for p, _ in shown for c in (
            (bus, p, ACC, "GetRoleName"), (bus, p, PROPS, "GetAll", "s", (ACC,)),
            (bus, p, COMP, "GetExtents", "u", (0,)), (bus, p, ACC, "GetInterfaces"))])
        for (p, bits), role, props, box, ifaces in zip(shown, r[::4], r[1::4], r[2::4], r[3::4]):
            if role and props:
                v = {k: val for k, (_, val) in props[0].items()}
                objs[p] = _Obj(v.get("Parent", ("", ""))[1], v.get("ChildCount", 0),
                               v.get("Name") or v.get("Description", ""), role[0], bits,
                               box[0] if box else None, ifaces[0] if ifaces else [])

    def _cells(self, bus: str, table: str, box: tuple, budget: int, used: CellHint | None) -> list[RawNode]:
        """Non-empty visible cells (and the focused one) of a table too big to enumerate."""
        x, y, w, h = box
        if self.max_cells <= 0:
            return []
        corners = self.batch([(bus, table, COMP, "GetAccessibleAtPoint", "iiu", (x + 1, y + 1, 0)),
                               (bus, table, COMP, "GetAccessibleAtPoint", "iiu", (x + w - 2, y + h - 2, 0))])
        index = self.batch([(bus, c[0][1], ACC, "GetIndexInParent") for c in corners if c])
        rc = self.batch([(bus, table, TABLE, m, "i", i) for i in index if i
                          for m in ("GetRowAtIndex", "GetColumnAtIndex")])
        if len(rc) != 4 or None in rc:
            return []
        (r0,), (c0,), (r1,), (c1,) = rc
        visible = (r0 <= used.cursor[0] <= r1 and c0 <= used.cursor[1] <= c1) if used is not None else False
        if used is not None:  # cells past the used area are empty: no need to ask for them
            r1, c1 = min(r1, used.last_row), min(c1, used.last_col)
        ncols = max(0, min(c1 - c0 + 1, self.max_cells))
        nrows = max(0, min(r1 - r0 + 1, self.max_cells // max(ncols, 1)))
        grid, cache = [(r, c) for r in range(r0, r0 + nrows) for c in range(c0, c0 + ncols)], self._cell_paths
        if visible and used.cursor not in grid:  # the focused cell, even when empty
            grid.append(used.cursor)
        for retry in (False, True):  # cached cell objects die when the bridge's lease on them ends (~15 s)
            if retry or len(cache) > 50_000:
                cache.clear()
            todo = [rc for rc in grid if (bus, table, rc) not in cache]
            refs = self.batch([(bus, table, TABLE, "GetAccessibleAt", "ii", rc) for rc in todo])
            cache.update({(bus, table, rc): ref[0][1] for rc, ref in zip(todo, refs) if ref})
            paths = [cache[bus, table, rc] for rc in grid if (bus, table, rc) in cache]
            r = self.batch([(bus, p, TEXT, "GetText", "ii", (0, -1)) for p in paths]
                            + [(bus, p, ACC, "GetState") for p in paths])
            if None not in r[len(paths):] or retry:  # GetState fails only on dead objects
                break
        focused = {p for p, s in zip(paths, r[len(paths):]) if s and from_words(s[0]) & FOCUSED}
        keep = [(p, t[0] if t else "") for p, t in zip(paths, r) if (t and t[0].strip()) or p in focused][:budget]
        r = self.batch([(bus, p, COMP, "GetExtents", "u", (0,)) for p, _ in keep]
                        + [(bus, p, PROPS, "Get", "ss", (ACC, "Name")) for p, _ in keep])
        return [RawNode(p, table, "table cell", n[0][1] if n else "", t,
                        frozenset({"focused"} if p in focused else ()), e[0] if e else None)
                for (p, t), e, n in zip(keep, r, r[len(keep):])]
