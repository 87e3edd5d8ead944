"""Setup steps of OSWorld tasks (`config` and `evaluator.postconfig`), run inside a desktop.

Paths under `/home/user` (OSWorld's user) mean the desktop's own home folder, so task files
run unchanged. `download` reads a local file cache, never the network: an uncached URL fails
the task at once with the URL in the message.
"""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import time
from pathlib import Path
from typing import TYPE_CHECKING

from computerrl.envs.paths import OSWORLD_HOME, in_home
from computerrl.envs.tasks.registry import SETUP_STEPS

if TYPE_CHECKING:
    from computerrl.envs.desktop import Desktop

COMMAND_TIMEOUT_S = 60.0
OFFICE_SUFFIXES = {".xlsx", ".xls", ".ods", ".csv", ".docx", ".doc", ".odt", ".rtf", ".pptx", ".ppt", ".odp", ".txt"}


class SetupError(RuntimeError):
    """A setup step that cannot run; the task is skipped with this message."""


def step(name: str):
    def wrap(fn):
        SETUP_STEPS[name] = fn
        return fn

    return wrap


def desktop_path(desktop: "Desktop", path: str) -> Path:
    """A task's path on this desktop: /home/user/… and ~/… map into its home folder."""
    try:
        return in_home(desktop.home, path)
    except ValueError as e:
        raise SetupError(str(e)) from None


def cached(cache: Path | None, url: str) -> Path:
    """The local copy of `url`: a file:// path, or the cache's entry (CACHE/index.json maps URL -> file)."""
    if url.startswith("file://"):
        local = Path(url[len("file://"):])
    else:
        import json

        index = json.loads((cache / "index.json").read_text()) if cache and (cache / "index.json").exists() else {}
        if url not in index:
            raise SetupError(f"{url} is not in the file cache ({cache or 'none given'}); add it to "
                             f"index.json there — nothing is downloaded at run time")
        local = cache / index[url]
    if not local.is_file():
        raise SetupError(f"{url}: cached file {local} does not exist")
    return local


@step("download")
def download(desktop: "Desktop", files: list[dict], **_) -> None:
    for f in files:
        dest = desktop_path(desktop, f["path"])
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(cached(desktop.file_cache, f["url"]), dest)


@step("upload_file")
def upload_file(desktop: "Desktop", files: list[dict], **_) -> None:
    for f in files:
        dest = desktop_path(desktop, f["path"])
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(f["local_path"], dest)


@step("open")
def open_file(desktop: "Desktop", path: str, **_) -> None:
    target = desktop_path(desktop, path)
    if not target.exists():
        raise SetupError(f"open: {path} does not exist on the desktop")
    if target.suffix.lower() not in OFFICE_SUFFIXES:
        raise SetupError(f"open: no application here opens {target.suffix or 'files without a suffix'}")
    desktop.office.open_file(target)


def _argv(desktop: "Desktop", command: list[str] | str, shell: bool) -> list[str]:
    """The command as argv, with OSWorld's home folder rewritten to the desktop's."""
    if shell or isinstance(command, str):
        argv = ["bash", "-c", command if isinstance(command, str) else shlex.join(command)]
    else:
        argv = [str(c) for c in command]
    # Only the folder itself: /home/user/x and "/home/user" change, /home/username does not.
    return [re.sub(re.escape(OSWORLD_HOME) + r"(?![\w.-])", lambda _: str(desktop.home), a) for a in argv]


@step("launch")
def launch(desktop: "Desktop", command: list[str] | str, shell: bool = False, **_) -> None:
    raw = command.split() if isinstance(command, str) else [str(c) for c in command]
    office_app = next((a for a in ("calc", "writer", "impress") if f"--{a}" in raw), None)
    if raw and Path(raw[0]).name in ("libreoffice", "soffice") and office_app:  # the desktop's own office
        files = [a for a in raw[1:] if not a.startswith("-")]
        if files:
            desktop.office.open_file(desktop_path(desktop, files[0]))
        else:
            desktop.office.open_app(office_app)
        return
    if raw and Path(raw[0]).name in ("gnome-terminal", "xterm", "x-terminal-emulator"):  # OSWorld's terminal
        desktop.launch(["xterm", *desktop.terminal_log_args()])
        return
    desktop.launch(_argv(desktop, command, shell))


@step("execute")
@step("command")
def execute(desktop: "Desktop", command: list[str] | str, shell: bool = False, **_) -> str:
    """Run to completion in the home folder; its output is returned (the getter vm_command_line uses it)."""
    argv = _argv(desktop, command, shell)
    try:
        r = subprocess.run(argv, env=desktop.env, cwd=desktop.home, capture_output=True, text=True,
                           timeout=COMMAND_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise SetupError(f"command did not finish within {COMMAND_TIMEOUT_S:.0f} s: {argv}") from None
    except FileNotFoundError as e:
        raise SetupError(f"command not found: {e.filename}") from None
    return r.stdout


@step("sleep")
def sleep(desktop: "Desktop", seconds: float, **_) -> None:
    time.sleep(min(float(seconds), 30.0))  # a task cannot park a desktop for long


def _window(desktop: "Desktop", window_name: str, strict: bool = False, by_class: bool = False):
    def matches(w) -> bool:
        name = w.wm_class if by_class else w.title
        return name == window_name if strict else window_name.lower() in name.lower()

    return desktop.wait_for_window(matches, timeout_s=5.0)


@step("activate_window")
def activate_window(desktop: "Desktop", window_name: str, strict: bool = False, by_class: bool = False, **_) -> None:
    w = _window(desktop, window_name, strict, by_class)
    if w is None:
        raise SetupError(f"activate_window: no window matches {window_name!r}")
    subprocess.run(["xdotool", "windowactivate", "--sync", str(w.id)], env=desktop.env, timeout=10, check=False)


@step("close_window")
def close_window(desktop: "Desktop", window_name: str, strict: bool = False, by_class: bool = False, **_) -> None:
    w = _window(desktop, window_name, strict, by_class)
    if w is None:
        raise SetupError(f"close_window: no window matches {window_name!r}")
    subprocess.run(["xdotool", "windowclose", str(w.id)], env=desktop.env, timeout=10, check=False)


def run_steps(desktop: "Desktop", steps: list[dict]) -> None:
    for i, s in enumerate(steps):
        try:
            SETUP_STEPS[s["type"]](desktop, **s.get("parameters", {}))
        except SetupError:
            raise
        except TimeoutError:  # a hung office: the desktop's problem, reported as such by the caller
            raise
        except Exception as e:  # noqa: BLE001 - bad parameters, a corrupt file LibreOffice refuses, …
            raise SetupError(f"setup step {i} ({s['type']}) failed: {type(e).__name__}: {e}") from None
