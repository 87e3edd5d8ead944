"""GUI primitives (`Agent.*`) executed on a desktop through XTest, via xdotool.

xdotool is one short-lived process per action (~3 ms): cheap next to the observation, and it
types any unicode text by remapping a spare keycode, which raw XTest cannot do by itself.
`mousemove` never takes `--sync`: xdotool then waits forever when the pointer is already there.
Every function returns the sentence the agent sees as the action's result.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from computerrl.envs.desktop.compat.xkeys import BUTTONS, keysym
from computerrl.envs.desktop.office import FACTORIES
from computerrl.envs.desktop.sandbox import STAND_IN_NEEDS
from computerrl.envs.desktop.x11 import Window

if TYPE_CHECKING:
    from computerrl.envs.desktop.desktop import Desktop

TERMINAL_KEYS = sorted(keysym(k).lower() for k in ("ctrl", "alt", "t"))  # ctrl+alt+t opens a terminal
SCROLL_BUTTONS = {"up": "4", "down": "5", "left": "6", "right": "7"}
SCROLL_CLICKS = 5  # wheel notches per Agent.scroll: about a screenful of rows in LibreOffice
WAIT_S = 1.0  # what Agent.wait() waits
OPEN_S = 20.0  # how long Agent.open_app waits for the app's window (VS Code's workbench loads in seconds)
TYPE_DELAY_MS = 4  # between keystrokes; 0 lets LibreOffice drop characters under load

# Apps Agent.open_app knows besides LibreOffice's: name -> argv (used only when installed).
EXTERNAL_APPS = {
    "terminal": ["xterm", "-T", "Terminal"],  # titled as Ubuntu's; its output is logged (Desktop.terminal_log_args)
    "chromium": ["chromium"],  # the desktop's stand-in: its profile, DevTools for the getters (compat/bin/chromium)
    "vlc": ["vlc"],  # the desktop's stand-in: its HTTP interface for the getters (compat/bin/vlc)
    "gimp": ["gimp"],
    "thunderbird": ["thunderbird"],
    "nautilus": ["nautilus"],  # GNOME's file manager, as on OSWorld's Ubuntu
    "code": ["code"],  # the desktop's stand-in: VS Code's own code (code-server) in a Chromium window (compat/bin/code)
}
READY_TITLES = {"code": "Visual Studio Code"}  # app -> how its window's title ends once it is ready to use
APP_ALIASES = {"libreoffice calc": "calc", "libreoffice writer": "writer", "libreoffice impress": "impress",
               "spreadsheet": "calc", "xterm": "terminal", "chrome": "chromium", "browser": "chromium",
               "google-chrome": "chromium", "google-chrome-stable": "chromium", "chromium-browser": "chromium",
               "google chrome": "chromium", "files": "nautilus", "vs code": "code", "vscode": "code",
               "visual studio code": "code"}


class ActionError(Exception):
    """An action that cannot be carried out; its message is the action's result."""


def installed(app: str) -> bool:
    program = EXTERNAL_APPS[app][0]
    return Path(STAND_IN_NEEDS[program]).exists() if program in STAND_IN_NEEDS else shutil.which(program) is not None


def app_of(window: Window | None) -> str:
    """Short app name of a window, from its WM_CLASS."""
    if window is None:
        return ""
    cls = window.wm_class.lower()
    for app in FACTORIES:
        if app in cls:
            return app
    return {"xterm": "terminal", "chromium-browser": "chromium", "thunderbird-default": "thunderbird",
            "org.gnome.nautilus": "nautilus"}.get(cls, cls)


def app_window(window, app: str) -> bool:
    """Whether `window` is one of `app`'s, ready to use."""
    return app_of(window) == app and window.title.endswith(READY_TITLES.get(app, ""))


def available_apps() -> list[str]:
    return sorted(list(FACTORIES) + [a for a in EXTERNAL_APPS if installed(a)])


class GuiActions:
    """The `Agent.*` primitives of one desktop."""

    def __init__(self, desktop: Desktop):
        self.d = desktop

    def run(self, name: str, args: dict[str, Any]) -> str:
        return getattr(self, name)(**args)

    def _xdotool(self, *argv: str, timeout_s: float = 30.0) -> None:
        try:
            r = subprocess.run(["xdotool", *argv], env=self.d.x_env, capture_output=True, timeout=timeout_s)
        except subprocess.TimeoutExpired:
            raise ActionError(f"xdotool did not finish within {timeout_s:.0f} s") from None
        if r.returncode != 0:
            raise ActionError(f"xdotool failed: {r.stderr.decode(errors='replace').strip()[:200]}")

    def _xy(self, coordinates) -> tuple[str, str]:
        x, y = (int(round(c)) for c in coordinates)
        if not (0 <= x < self.d.width and 0 <= y < self.d.height):
            raise ActionError(f"coordinates ({x}, {y}) are off the {self.d.width}x{self.d.height} screen")
        return str(x), str(y)

    def click(self, coordinates, num_clicks: int = 1, button_type: str = "left") -> str:
        self._xdotool("mousemove", *self._xy(coordinates), "click", "--repeat", str(num_clicks),
                      "--delay", "60", BUTTONS[button_type])
        return f"Clicked {button_type} x{num_clicks} at {list(coordinates)}"

    def type(self, coordinates=None, text: str = "", overwrite: bool = False, enter: bool = False) -> str:
        if coordinates is not None:
            self.click(coordinates)
        if overwrite:
            self._xdotool("key", "--clearmodifiers", "ctrl+a", "BackSpace")
        if text:
            self._xdotool("type", "--clearmodifiers", "--delay", str(TYPE_DELAY_MS), "--", text,
                          timeout_s=30.0 + len(text) * TYPE_DELAY_MS / 100)  # 10x the nominal typing time
        if enter:
            self._xdotool("key", "Return")
        return f"Typed {len(text)} characters" + (" and pressed Enter" if enter else "")

    def drag_and_drop(self, drag_from_coordinates, drop_on_coordinates) -> str:
        (x1, y1), (x2, y2) = self._xy(drag_from_coordinates), self._xy(drop_on_coordinates)
        # Intermediate moves and short pauses: toolkits only start a drag after seeing motion.
        self._xdotool("mousemove", x1, y1, "mousedown", "1", "sleep", "0.05",
                      "mousemove", str((int(x1) + int(x2)) // 2), str((int(y1) + int(y2)) // 2),
                      "sleep", "0.05", "mousemove", x2, y2, "sleep", "0.05", "mouseup", "1")
        return f"Dragged from {list(drag_from_coordinates)} to {list(drop_on_coordinates)}"

    def scroll(self, coordinates, direction: str) -> str:
        self._xdotool("mousemove", *self._xy(coordinates), "click", "--repeat", str(SCROLL_CLICKS),
                      "--delay", "20", SCROLL_BUTTONS[direction])
        return f"Scrolled {direction} at {list(coordinates)}"

    def hotkey(self, keys: list[str]) -> str:
        if sorted(keysym(k).lower() for k in keys) == TERMINAL_KEYS:  # Ubuntu's shortcut, as on OSWorld's VM
            return self.open_app("terminal")
        self._xdotool("key", "--clearmodifiers", "+".join(keysym(k) for k in keys))
        return f"Pressed {'+'.join(keys)}"

    def open_app(self, app_name: str) -> str:
        app = APP_ALIASES.get(app_name.strip().lower(), app_name.strip().lower())
        if app in FACTORIES:
            self.d.office.open_app(app)
        elif app in EXTERNAL_APPS and installed(app):
            before = {w.id for w in self.d.screen.windows()}
            self.d.launch(EXTERNAL_APPS[app] + (self.d.terminal_log_args() if app == "terminal" else []))
            if self.d.wait_for_window(lambda w: w.id not in before and app_window(w, app), OPEN_S) is None:
                raise ActionError(f"{app} started but showed no window within {OPEN_S:.0f} s")
        else:
            raise ActionError(f"unknown app {app_name!r}; available: {', '.join(available_apps())}")
        return f"Opened {app}"

    def switch_window(self, window_id) -> str:
        wid = int(str(window_id), 0)
        if wid not in {w.id for w in self.d.screen.windows()}:
            raise ActionError(f"no window {window_id}; see the window list")
        self._xdotool("windowactivate", "--sync", str(wid))
        return f"Switched to window {window_id}"

    def quote(self, content: str) -> str:
        return f"Quoted: {content}"

    def wait(self) -> str:
        time.sleep(WAIT_S)
        return f"Waited {WAIT_S:g} s"

    def exit(self, success: bool) -> str:
        return f"Exited, reporting {'success' if success else 'failure'}"
