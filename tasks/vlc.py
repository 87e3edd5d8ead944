"""VLC's getters, with the semantics of OSWorld's (`getters/vlc.py`, `vm_screen_size`, `vm_window_size`).

They read the desktop's VLC through its HTTP interface (envs/desktop/vlc.py) and its configuration,
`~/.config/vlc/vlcrc`.
Departure: with no VLC answering, `vlc_playing_info` gives None (the metric then fails the episode)
where OSWorld's raises a connection error out of the evaluation.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from computerrl.apis.vlc import VLCRC
from computerrl.envs.desktop.vlc import http_get
from computerrl.tasks.getters import check_any, getter, vm_file
from computerrl.tasks.setup import Budget

if TYPE_CHECKING:
    from computerrl.envs.desktop.desktop import Desktop


@getter("vlc_playing_info", dest=(check_any, False))
def vlc_playing_info(desktop: "Desktop", spec: dict, out: Path, budget: Budget) -> str | None:
    status = http_get(desktop, "/requests/status.xml")
    if status is None:
        return None
    path = Path(tempfile.mkdtemp(dir=out)) / Path(spec.get("dest") or "status.xml").name
    path.write_bytes(status)
    return str(path)


@getter("vlc_config", dest=(check_any, False))
def vlc_config(desktop: "Desktop", spec: dict, out: Path, budget: Budget) -> str | None:
    return vm_file(desktop, {"path": VLCRC, "dest": spec.get("dest") or "vlcrc"}, out, budget)


@getter("vm_screen_size")
def vm_screen_size(desktop: "Desktop", spec: dict, out: Path, budget: Budget) -> dict:
    return {"width": desktop.width, "height": desktop.height}


@getter("vm_window_size", app_class_name=(check_any, True))
def vm_window_size(desktop: "Desktop", spec: dict, out: Path, budget: Budget) -> dict | None:
    """The first window of that class (any case): its own size, without the frame."""
    want = str(spec["app_class_name"]).lower()
    window = next((w for w in desktop.screen.windows() if w.wm_class.lower() == want), None)
    if window is None:
        return None
    width, height = desktop.screen.window_size(window.id)
    return {"width": width, "height": height}
