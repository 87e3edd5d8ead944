"""The desktop's VLC, as the env server reaches it: its HTTP interface.

The desktop's VLC (compat/bin/vlc) serves its HTTP interface on the sandbox's loopback, port 8080
with the password "password", as OSWorld's VM is set up by hand; the server reaches it through the
keeper, which checks that VLC itself listens there, started as the launcher starts it (`LAUNCHED`).
"""

from __future__ import annotations

import base64
from typing import TYPE_CHECKING

from computerrl.apis.kit import AppUnreachable
from computerrl.envs.desktop.loopback import http_request

if TYPE_CHECKING:
    from computerrl.envs.desktop.desktop import Desktop

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
