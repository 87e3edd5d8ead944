"""A stand-in for pyautogui inside a desktop, for task files' own scripts.

OSWorld's task files drive the desktop from their setup and postconfig steps with snippets such
as `python -c "import pyautogui; pyautogui.hotkey('ctrl', 's')"`. Debian's python3 in a desktop's
sandbox finds this module in /usr/local/lib/python3.X/dist-packages (this folder, bound there): it
does the calls those snippets use with xdotool, on the desktop's own display ($DISPLAY), so the
task files run unchanged. Standard library only, like xkeys beside it.
"""

from __future__ import annotations

import subprocess
import time

from xkeys import BUTTONS, keysym  # beside this file, in the sandbox too

PAUSE = 0.1  # pyautogui's default pause after each call


def _xdotool(*argv: str) -> None:
    subprocess.run(["xdotool", *argv], check=True, timeout=60)
    time.sleep(PAUSE)


def hotkey(*keys: str, **_) -> None:
    _xdotool("key", "--clearmodifiers", "+".join(keysym(k) for k in keys))


def press(keys, presses: int = 1, interval: float = 0.0, **_) -> None:
    for _ in range(presses):
        for k in [keys] if isinstance(keys, str) else keys:
            _xdotool("key", "--clearmodifiers", keysym(k))
        time.sleep(interval)


def keyDown(key: str, **_) -> None:  # noqa: N802 - pyautogui's names
    _xdotool("keydown", keysym(key))


def keyUp(key: str, **_) -> None:  # noqa: N802
    _xdotool("keyup", keysym(key))


def typewrite(message, interval: float = 0.0, **_) -> None:
    if isinstance(message, str):
        _xdotool("type", "--delay", str(max(4, int(interval * 1000))), "--", message)
    else:  # a list of key names
        press(list(message), interval=interval)


write = typewrite


def moveTo(x: int, y: int, duration: float = 0.0, **_) -> None:  # noqa: N802
    _xdotool("mousemove", str(int(x)), str(int(y)))


def click(x: int | None = None, y: int | None = None, clicks: int = 1, button: str = "left", **_) -> None:
    if x is not None and y is not None:
        moveTo(x, y)
    _xdotool("click", "--repeat", str(clicks), BUTTONS[button])


def doubleClick(x: int | None = None, y: int | None = None, **kw) -> None:  # noqa: N802
    click(x, y, clicks=2, **kw)


def rightClick(x: int | None = None, y: int | None = None, **kw) -> None:  # noqa: N802
    click(x, y, button="right", **kw)
