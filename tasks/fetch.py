"""`computerrl tasks fetch`: every file a folder of tasks downloads, into a file cache env servers read
with `--cache` (nothing is fetched at run time).

The cache is a folder with index.json (URL → file in the folder), the same one `tasks build` writes.
Each file is written to a temporary name and renamed, and the index is rewritten (atomically) after
each one, so a fetch that is killed keeps what it finished and a rerun fetches only what is missing.
A URL that fails is named with why; the others go on.

Task files come from strangers, so a URL is treated as hostile: a `download` step copies whatever the
cache holds into a desktop the agent sees. Hence:
- http and https only, on every hop; at most 10 redirects.
- Public addresses only: each hop's host is resolved and every address checked (loopback, link-local,
  private, multicast, reserved and unspecified are refused), then the connection goes to the address
  checked, so a second DNS answer cannot send it elsewhere. `allow` (`--allow-host`) names an address or
  network with its port, let through anyway: a mirror on the LAN, or a test server on loopback. A port,
  not a host: a redirect from an allowed mirror on loopback must not reach every other loopback service
  (the fleet's console, the env servers).
- A size cap per file and one deadline per URL (every hop, header and byte, not per read). A file
  refused or cut short leaves nothing in the cache.
- No proxies from the environment: the address checked must be the one connected to.
Only regular files inside the task folder are read (`task.task_files`): a FIFO named *.json would block, and
a link out of the folder would have a fetch run as root read any file it names.
"""

from __future__ import annotations

import hashlib
import http.client
import ipaddress
import json
import os
import socket
import ssl
import threading
import time
from collections.abc import Sequence
from pathlib import Path, PurePosixPath
from urllib.parse import urljoin, urlparse, urlsplit

from computerrl.data.files import write_atomic
from computerrl.tasks import catalog  # noqa: F401 - registers the steps, and the files they bring
from computerrl.tasks.setup import STEP_FILES
from computerrl.tasks.task import Task, TaskError, load_task, task_files

CHUNK = 1 << 20
MAX_REDIRECTS = 10
REDIRECTS = (301, 302, 303, 307, 308)
Network = ipaddress.IPv4Network | ipaddress.IPv6Network
Allowed = tuple[Network, int]  # an --allow-host: the addresses and the one port let through


def task_urls(task: Task) -> list[str]:
    """The http(s) URLs a task copies files from: download steps, the files steps bring of their own
    (update_browse_history's empty History) and cloud_file getters (multi too)."""
    steps = task.config + task.evaluator.get("postconfig", [])
    urls = [f.get("url") for s in steps if s.get("type") == "download"
            for f in s.get("parameters", {}).get("files", []) if isinstance(f, dict)]
    urls += [url for s in steps for url in STEP_FILES.get(s.get("type"), [])]
    for g in task.getters:
        if g.get("type") == "cloud_file":
            urls += g["path"] if isinstance(g.get("path"), list) else [g.get("path")]
    return [u for u in dict.fromkeys(urls) if isinstance(u, str) and urlparse(u).scheme in ("http", "https")]


def folder_urls(folder: Path) -> tuple[list[Path], list[str], list[str]]:
    """The regular task files under `folder`, the URLs they need (each once), and what was skipped, a line
    each: a file that is no regular file (never opened), a malformed one."""
    files, skipped = task_files(folder)
    urls: list[str] = []
    for f in files:
        try:
            urls += task_urls(load_task(f))
        except TaskError as e:
            skipped.append(str(e))
    return files, list(dict.fromkeys(urls)), skipped


def cache_name(url: str) -> str:
    """Where a URL's file lives in the cache: a short hash (two URLs, one name) and the URL's file name."""
    name = PurePosixPath(urlparse(url).path).name or "file"
    return f"files/{hashlib.sha256(url.encode()).hexdigest()[:16]}-{name[-80:]}"


class Cache:
    def __init__(self, folder: Path):
        self.folder = Path(folder)
        self.index_path = self.folder / "index.json"
        self.index: dict[str, str] = json.loads(self.index_path.read_text()) if self.index_path.exists() else {}

    def has(self, url: str) -> bool:
        """Whether the cache holds the URL's file, inside the cache (as env servers will look for it)."""
        if url not in self.index:
            return False
        path = (self.folder / self.index[url]).resolve()
        return path.is_relative_to(self.folder.resolve()) and path.is_file()

    def add(self, url: str, fetch) -> int:
        """Write `fetch(file)`'s bytes for `url` (atomically), then record it in the index; the size."""
        rel = cache_name(url)
        path = self.folder / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.part")
        try:
            with open(tmp, "wb") as f:
                size = fetch(f)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        finally:
            tmp.unlink(missing_ok=True)
        self.index[url] = rel
        write_atomic(self.index_path, json.dumps(self.index, indent=0, sort_keys=True))
        return size


def allowed_hosts(values: list[str]) -> list[Allowed]:
    """`--allow-host` values, each an address or network and a port (192.168.1.20:8080, 10.0.0.0/8:443,
    [::1]:8000); ValueError names a bad one."""
    allowed = []
    for value in values:
        host, _, port = value.rpartition(":")
        host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
        try:
            if not (port.isdigit() and 0 < int(port) < 65536):
                raise ValueError
            allowed.append((ipaddress.ip_network(host, strict=False), int(port)))
        except ValueError:
            raise ValueError("takes an address or network with its port (e.g. 192.168.1.20:8080, 10.0.0.0/8:443, "
                             f"[::1]:8000), not {value!r}") from None
    return allowed


NOT_PUBLIC = {"unspecified": "the unspecified address", "loopback": "a loopback address",
              "link_local": "a link-local address", "site_local": "a site-local address",
              "multicast": "a multicast address", "reserved": "a reserved address", "private": "a private address"}


def not_public(ip: ipaddress.IPv4Address | ipaddress.IPv6Address) -> str | None:
    """Why a download may not go to `ip` (e.g. "a loopback address"), or None for a public address."""
    for kind, why in NOT_PUBLIC.items():
        if getattr(ip, f"is_{kind}", False):  # IPv4 has no site-local
            return why
    return None if ip.is_global else "not a public address"  # e.g. 100.64.0.0/10, carrier NAT


def resolve(host: str, port: int, allow: list[Allowed]) -> tuple[int, tuple]:
    """(family, socket address) to connect to for `host`; OSError when any address it resolves to is
    neither public nor allowed (one bad answer is enough to distrust the name)."""
    try:
        answers = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as e:
        raise OSError(f"cannot resolve {host}: {e.strerror}") from None
    for _family, _type, _proto, _name, sockaddr in answers:
        ip = ipaddress.ip_address(sockaddr[0].split("%")[0])
        if ip.version == 6 and ip.ipv4_mapped:  # ::ffff:127.0.0.1 is 127.0.0.1
            ip = ip.ipv4_mapped
        if any(ip in net and port == allowed_port for net, allowed_port in allow):
            continue
        if why := not_public(ip):
            shown = host if host == str(ip) else f"{host} ({ip})"
            raise OSError(f"refused: {shown} is {why} (only public addresses, unless --allow-host names it with "
                          f"port {port})")
    return answers[0][0], answers[0][4]


class Deadline:
    """One time limit for everything a URL takes (every hop, header and byte): when it passes, the
    socket in use is shut down, which ends a read however slowly the server trickles its bytes."""

    def __init__(self, seconds: float):
        self.seconds = seconds
        self.end = time.monotonic() + seconds
        self.expired = threading.Event()
        self._lock = threading.Lock()
        self._sock: socket.socket | None = None
        self._timer = threading.Timer(seconds, self._expire)
        self._timer.daemon = True
        self._timer.start()

    def error(self) -> OSError:
        return OSError(f"not done within {self.seconds:g} s (the whole download, redirects included)")

    def left(self) -> float:
        """Seconds left; the deadline's OSError once there are none."""
        left = self.end - time.monotonic()
        if left <= 0 or self.expired.is_set():
            raise self.error()
        return left

    def watch(self, sock: socket.socket | None) -> None:
        """Shut `sock` down at the deadline. A duplicate is kept: shutting it down ends the connection
        even after TLS has taken the original socket over."""
        with self._lock:
            if self._sock is not None:
                self._sock.close()
            self._sock = sock.dup() if sock is not None else None

    def _expire(self) -> None:
        self.expired.set()
        with self._lock:
            if self._sock is not None:
                try:
                    self._sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass  # already closed by the other side

    def close(self) -> None:
        self._timer.cancel()
        self.watch(None)


def _open(url: str, deadline: Deadline, allow: list[Allowed]) -> http.client.HTTPConnection:
    """A connection to `url`'s host, made to the address `resolve` checked (a 2nd lookup could differ)."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https"):
        raise OSError(f"refused: {parts.scheme}:// (only http and https)")
    if not parts.hostname:
        raise OSError("refused: no host in the URL")
    port = parts.port or (443 if parts.scheme == "https" else 80)
    family, sockaddr = resolve(parts.hostname, port, allow)

    def connect(_address, _timeout, _source):
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            deadline.watch(sock)
            sock.settimeout(deadline.left())
            sock.connect(sockaddr)
        except BaseException:
            sock.close()
            raise
        return sock

    if parts.scheme == "https":
        conn = http.client.HTTPSConnection(parts.hostname, port, context=ssl.create_default_context())
    else:
        conn = http.client.HTTPConnection(parts.hostname, port)
    conn._create_connection = connect  # the hook http.client keeps for this; TLS still checks the host name
    return conn


def _get(url: str, f, deadline: Deadline, max_bytes: int, allow: list[Allowed]) -> int:
    """`url`'s body written to `f`, following redirects, each hop checked as the first; its size."""
    for hop in range(MAX_REDIRECTS + 1):
        try:
            conn = _open(url, deadline, allow)
        except (OSError, ValueError) as e:  # ValueError: a bad port
            if hop:
                raise OSError(f"redirected to {url}: {e}") from None
            raise
        try:
            target = urlsplit(url)
            conn.request("GET", (target.path or "/") + (f"?{target.query}" if target.query else ""),
                         headers={"User-Agent": "computerrl-tasks-fetch"})
            reply = conn.getresponse()
            if reply.status in REDIRECTS:
                if not (location := reply.getheader("Location")):
                    raise OSError(f"HTTP {reply.status} without a Location")
                url = urljoin(url, location)
                continue
            if reply.status != 200:
                raise OSError(f"HTTP {reply.status} {reply.reason}")
            announced = reply.getheader("Content-Length")
            if announced is not None and announced.isdigit() and int(announced) > max_bytes:
                raise OSError(f"refused: {int(announced):,} bytes, over the {max_bytes:,}-byte cap (--max-mb)")
            total = 0
            while chunk := reply.read(CHUNK):
                deadline.left()
                total += len(chunk)
                if total > max_bytes:
                    raise OSError(f"refused: over the {max_bytes:,}-byte cap (--max-mb)")
                f.write(chunk)
            deadline.left()  # a shut-down socket reads as the end: not a whole file
            if announced is not None and announced.isdigit() and int(announced) != total:
                raise OSError(f"cut short: {total} of {announced} bytes")
            return total
        finally:
            deadline.watch(None)
            conn.close()
    raise OSError(f"more than {MAX_REDIRECTS} redirects")


def download(url: str, *, timeout_s: float, max_bytes: int, allow: Sequence[Allowed] = ()):
    """A `fetch` for Cache.add: the URL's body streamed into the file, under the rules in the module's
    docstring; OSError (with why) on failure."""
    def fetch(f) -> int:
        deadline = Deadline(timeout_s)
        try:
            return _get(url, f, deadline, max_bytes, list(allow))
        except (OSError, http.client.HTTPException, ValueError) as e:  # a malformed URL or reply: that URL's problem
            if deadline.expired.is_set() or isinstance(e, TimeoutError):  # socket timeouts are the deadline's
                raise deadline.error() from None
            raise OSError(str(e) if type(e) is OSError else f"{type(e).__name__}: {e}") from None
        finally:
            deadline.close()
    return fetch
