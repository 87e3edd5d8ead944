"""VLC's getters, with the semantics of OSWorld's (`getters/vlc.py`, `vm_screen_size`, `vm_window_size`).

The desktop's VLC (compat/bin/vlc) serves its HTTP interface on the sandbox's loopback, port 8080
with the password "password", as OSWorld's VM is set up by hand; the server reaches it through the
keeper, which checks that VLC itself listens there, started as the launcher starts it (`LAUNCHED`).
Its configuration is `~/.config/vlc/vlcrc`.
Departure: with no VLC answering, `vlc_playing_info` gives None (the metric then fails the episode)
where OSWorld's raises a connection error out of the evaluation.
"""

from __future__ import annotations

import base64
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from computerrl.apis.kit import AppUnreachable
from computerrl.apis.vlc import VLCRC
from computerrl.envs.loopback import http_request
from computerrl.envs.tasks.getters import _any, getter, vm_file
from computerrl.envs.tasks.setup import Budget

if TYPE_CHECKING:
    from computerrl.envs.desktop import Desktop

HTTP_PORT, HTTP_PASSWORD = 8080, "password"  # as OSWorld's VM has VLC's web interface
PROGRAM = "/usr/bin/vlc"
# Only a VLC started as the desktop's launcher starts it (compat/bin/vlc) is believed: one of the
# agent's could serve a status.xml of its own making, from pages or Lua scripts of its own.
LAUNCHED = {
    # VLC runs Lua scripts from $XDG_DATA_HOME/vlc/lua before its own (a folder nobody can create
    # here), and loads plugins, data and code from where these name (VLC_DATA_PATH: its web pages).
    "environ": {"XDG_DATA_HOME": "/usr/share/computerrl-none",
                **dict.fromkeys(["VLC_PLUGIN_PATH", "VLC_DATA_PATH", "VLC_LIB_PATH", "LUA_PATH", "LUA_CPATH",
                                 "LUA_PATH_5_2", "LUA_CPATH_5_2", "QT_PLUGIN_PATH", "LD_PRELOAD", "LD_LIBRARY_PATH",
                                 "LD_AUDIT"])},
    # The web interface's pages from VLC's own folder, and no `lua-config` (Lua run as the interface
    # starts, which may name a folder of its own, and wins over http-src): VLC takes an option's last
    # occurrence, over earlier ones and over vlcrc. The first is a flag an option left without its
    # value at the end of "$@" may take as its value, so that the two after it stay options.
    "argv_ends": ["--no-qt-privacy-ask", "--http-src=/usr/share/vlc/lua/http", "--lua-config="],
}


def http_get(desktop: "Desktop", path: str, timeout_s: float = 10.0) -> bytes | None:
    """A page of VLC's HTTP interface (e.g. /requests/status.xml?command=pl_pause); None when no VLC answers."""
    auth = base64.b64encode(f":{HTTP_PASSWORD}".encode()).decode()
    try:
        status, body = http_request(desktop.sandbox, HTTP_PORT, PROGRAM, path, timeout_s=timeout_s, launched=LAUNCHED,
                                    headers={"Authorization": f"Basic {auth}"})
    except AppUnreachable:
        return None
    return body if status == 200 else None


@getter("vlc_playing_info", dest=(_any, False))
def vlc_playing_info(desktop: "Desktop", spec: dict, out: Path, budget: Budget) -> str | None:
    status = http_get(desktop, "/requests/status.xml")
    if status is None:
        return None
    path = Path(tempfile.mkdtemp(dir=out)) / Path(spec.get("dest") or "status.xml").name
    path.write_bytes(status)
    return str(path)


@getter("vlc_config", dest=(_any, False))
def vlc_config(desktop: "Desktop", spec: dict, out: Path, budget: Budget) -> str | None:
    return vm_file(desktop, {"path": VLCRC, "dest": spec.get("dest") or "vlcrc"}, out, budget)


@getter("vm_screen_size")
def vm_screen_size(desktop: "Desktop", spec: dict, out: Path, budget: Budget) -> dict:
    return {"width": desktop.width, "height": desktop.height}


@getter("vm_window_size", app_class_name=(_any, True))
def vm_window_size(desktop: "Desktop", spec: dict, out: Path, budget: Budget) -> dict | None:
    """The first window of that class (any case): its own size, without the frame."""
    want = str(spec["app_class_name"]).lower()
    window = next((w for w in desktop.screen.windows() if w.wm_class.lower() == want), None)
    if window is None:
        return None
    width, height = desktop.screen.window_size(window.id)
    return {"width": width, "height": height}
