"""One real desktop: Xvfb + a D-Bus session (with its AT-SPI bus) + openbox + apps on demand.

Every process of a desktop is a child of the env server that hosts it, so a desktop is as
cheap as its processes: no VM, no boot. `reset()` restores a clean state in place (close
documents, kill launched apps, restore the home folder), so one desktop serves thousands of
episodes; `health()` says what died when something did.
"""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from computerrl.apis.app_api import IMPLEMENTATIONS, ApiError, api_for_app
from computerrl.envs.a11y import A11yError, A11yReader, CellHint, linearize
from computerrl.envs.office import FACTORIES, Office, office_env
from computerrl.envs.x11 import Screen, Window

APP_INFO_CHARS = 5000  # budget of the observation's app_info (ComputerRL trims it to 5,000 too)
OFFICE_CLOSE_S = 1.0  # how long closed documents' windows may linger before the office is restarted
ANSI_ESCAPE = re.compile(r"\x1b(\[[0-?]*[ -/]*[@-~]|\][^\x07]*\x07|[()][A-Za-z0-9]|[=>])")
MARKER = "COMPUTERRL_DESKTOP"  # environment variable naming the desktop a process belongs to
HOME_SKELETON = ("Desktop", "Documents", "Downloads", "Pictures", "Music", "Videos")

OPENBOX_RC = """<?xml version="1.0" encoding="UTF-8"?>
<openbox_config xmlns="http://openbox.org/3.4/rc">
  <focus><focusNew>yes</focusNew><followMouse>no</followMouse></focus>
  <placement><policy>Smart</policy></placement>
  <desktops><number>1</number></desktops>
  <applications><application class="*"><maximized>yes</maximized><focus>yes</focus></application></applications>
</openbox_config>
"""


@dataclasses.dataclass
class Observation:
    screenshot: bytes  # PNG; b"" when not asked for
    a11y_tree: str  # linearized table of the focused application (see envs/a11y.py)
    windows: list[Window]
    focused_app: str  # "calc", "writer", "impress", "terminal", … or "" (no window)
    app_info: str  # app-specific summary (filled by the application APIs)
    last_result: str  # what the previous action did, or why it was invalid


def app_of(window: Window | None) -> str:
    """Short app name of a window, from its WM_CLASS."""
    if window is None:
        return ""
    cls = window.wm_class.lower()
    for app in FACTORIES:
        if app in cls:
            return app
    return {"xterm": "terminal", "chromium": "chromium", "vlc": "vlc"}.get(cls, cls)


class Desktop:
    """A desktop's processes and state. Not thread-safe: the env server serializes calls."""

    def __init__(self, workdir: Path, *, width: int = 1920, height: int = 1080, a11y_lines: int = 300,
                 file_cache: Path | None = None):
        self.workdir = Path(workdir).resolve()  # LibreOffice takes its profile as a file:// URI
        self.width, self.height, self.a11y_lines = width, height, a11y_lines
        self.file_cache = Path(file_cache).resolve() if file_cache else None  # tasks' `download` reads it
        self.home = self.workdir / "home"
        self.env: dict[str, str] = {}
        self._procs: dict[str, subprocess.Popen] = {}  # infrastructure: xvfb, dbus, openbox
        self._apps: list[subprocess.Popen] = []  # launched by actions / task setup; killed at reset
        self.terminal_logs: list[Path] = []  # session logs of the terminals opened this episode
        self.marker = uuid.uuid4().hex  # in the environment of everything this desktop starts
        self.office: Office | None = None
        self.screen: Screen | None = None
        self._a11y: A11yReader | None = None
        self._services: set[int] = set()  # processes the desktop runs besides _procs (the AT-SPI bus)
        self._shooter = ThreadPoolExecutor(1, thread_name_prefix="screenshot")
        self.last_result = ""

    # ---- lifecycle -------------------------------------------------------------------------
    def start(self, *, office: bool = True) -> "Desktop":
        """Start X, D-Bus, the window manager and (unless told not to) LibreOffice."""
        try:
            return self._start(office)
        except BaseException:
            self.close()  # never leave half a desktop running
            raise

    def _start(self, office: bool) -> "Desktop":
        for sub in ("run", "logs", "config/openbox"):
            (self.workdir / sub).mkdir(parents=True, exist_ok=True)
        os.chmod(self.workdir / "run", 0o700)
        self._restore_home()
        display = self._start_xvfb()
        base = {k: v for k, v in os.environ.items() if k in ("PATH", "LANG", "LC_ALL", "USER", "LOGNAME", "SHELL")}
        base[MARKER] = self.marker
        # Tasks' own scripts (OSWorld's `python -c "import pyautogui; …"` steps) get this
        # environment's python and the pyautogui stand-in of envs/compat, on this display.
        base["PATH"] = f"{Path(sys.executable).parent}:{base.get('PATH', '')}"
        base["PYTHONPATH"] = str(Path(__file__).parent / "compat")
        base.update(DISPLAY=display, HOME=str(self.home), XDG_RUNTIME_DIR=str(self.workdir / "run"),
                    XDG_CONFIG_HOME=str(self.workdir / "config"), LANG=base.get("LANG", "C.UTF-8"))
        self.env = office_env(base)
        self.env["DBUS_SESSION_BUS_ADDRESS"] = self._start_dbus()
        (self.workdir / "config/openbox/rc.xml").write_text(OPENBOX_RC)
        self._spawn("openbox", ["openbox", "--sm-disable", "--config-file", str(self.workdir / "config/openbox/rc.xml")])
        self.screen = Screen(display)
        # Asking for the AT-SPI bus starts it (D-Bus activation; the launcher daemonizes): now, so
        # it is part of the desktop's services below and apps find it from their first second.
        self._a11y = A11yReader(self.env["DBUS_SESSION_BUS_ADDRESS"])
        self._a11y.applications()
        self._services = set(_scan_processes(f"{MARKER}={self.marker}".encode())[1])
        self.office = Office(self.env, self.workdir / "lo-profile", f"computerrl-{os.getpid()}-{display[1:]}",
                             self.workdir / "logs" / "soffice.log")
        if office:
            self.office.start()
        return self

    def _spawn(self, name: str, argv: list[str], **kw) -> subprocess.Popen:
        log = open(self.workdir / "logs" / f"{name}.log", "ab")
        proc = subprocess.Popen(argv, env=kw.pop("env", self.env), stdout=kw.pop("stdout", log), stderr=log,
                                stdin=subprocess.DEVNULL, **kw)
        log.close()
        self._procs[name] = proc
        return proc

    def _start_xvfb(self) -> str:
        # -displayfd: the X server picks a free display number itself, so servers never collide.
        r, w = os.pipe()
        self._spawn("xvfb", ["Xvfb", "-displayfd", str(w), "-screen", "0", f"{self.width}x{self.height}x24",
                             "-nolisten", "tcp", "-noreset", "-dpi", "96"], env={"PATH": os.environ.get("PATH", "")},
                    pass_fds=(w,))
        os.close(w)
        with os.fdopen(r) as f:
            number = f.readline().strip()
        if not number:
            raise RuntimeError(f"Xvfb failed to start; see {self.workdir / 'logs' / 'xvfb.log'}")
        return f":{number}"

    def _start_dbus(self) -> str:
        proc = self._spawn("dbus", ["dbus-daemon", "--session", "--nofork", "--nopidfile", "--print-address=1"],
                           stdout=subprocess.PIPE)
        address = proc.stdout.readline().decode().strip()
        if not address:
            raise RuntimeError(f"dbus-daemon failed to start; see {self.workdir / 'logs' / 'dbus.log'}")
        return address

    def health(self) -> str:
        """'' when healthy, else what died (e.g. 'soffice exited with code -9')."""
        for name, proc in list(self._procs.items()):
            if proc.poll() is not None:
                return f"{name} exited with code {proc.returncode}"
        if self.office is not None and self.office.proc is not None and not self.office.running:
            return f"soffice exited with code {self.office.proc.returncode}"
        return ""

    def close(self) -> None:
        """Stop every process of the desktop; safe to call twice."""
        self._kill_apps()
        if self._a11y is not None:
            self._a11y.close()
            self._a11y = None
        if self.office is not None:
            self.office.stop()
        if self.screen is not None:
            try:
                self._shooter.submit(self.screen.close).result(timeout=10)  # on the grabber's own thread
            except Exception:  # the X server may already be gone
                pass
            self.screen = None
            self._shooter.shutdown(wait=False)
        for proc in reversed(list(self._procs.values())):
            if proc.poll() is None:
                proc.terminate()
        for proc in self._procs.values():
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
        self._procs.clear()
        # The AT-SPI launcher daemonizes out of our process tree and outlives its bus: the marker finds it.
        for pid in _scan_processes(f"{MARKER}={self.marker}".encode())[1]:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    # ---- episodes ------------------------------------------------------------------------
    def reset(self) -> None:
        """Back to a clean desktop: no documents, no launched apps, a fresh home folder."""
        if self.office is not None:
            if self.office.proc is None:
                self.office.start()
            self.office.close_documents()
            # A modal dialog (Format Cells, Save As…) vetoes closing its document: restart the office.
            if not self._windows_gone(lambda w: w.pid == self.office.proc.pid, OFFICE_CLOSE_S):
                self.office.stop()
                self.office.start()
        self._kill_apps()
        self._restore_home()
        for log in self.terminal_logs:
            log.unlink(missing_ok=True)
        self.terminal_logs.clear()
        self.last_result = ""

    def terminal_log_args(self) -> list[str]:
        """xterm options that log the session to a file outside home (the vm_terminal_output getter reads it)."""
        self.terminal_logs.append(self.workdir / "logs" / f"terminal-{len(self.terminal_logs)}.log")
        return ["-l", "-lf", str(self.terminal_logs[-1])]

    def terminal_output(self) -> str | None:
        """What the most recently opened terminal printed (escape sequences removed), None if none was opened."""
        if not self.terminal_logs or not self.terminal_logs[-1].exists():
            return None
        raw = self.terminal_logs[-1].read_text(errors="replace")
        return ANSI_ESCAPE.sub("", raw).replace("\r\n", "\n").replace("\r", "")

    def _restore_home(self) -> None:
        def writable_then_retry(fn, path, _exc):  # the agent may have made things read-only
            os.chmod(os.path.dirname(path), 0o700)
            if os.path.isdir(path):
                os.chmod(path, 0o700)
            fn(path)

        if self.home.exists():
            shutil.rmtree(self.home, onerror=writable_then_retry)
        for d in HOME_SKELETON:
            (self.home / d).mkdir(parents=True, exist_ok=True)

    def launch(self, argv: list[str], **kw) -> subprocess.Popen:
        """Start an app process in its own session so reset can kill it with all its children."""
        log = open(self.workdir / "logs" / "apps.log", "ab")
        proc = subprocess.Popen(argv, env=self.env, cwd=self.home, stdout=log, stderr=log,
                                stdin=subprocess.DEVNULL, start_new_session=True, **kw)
        log.close()
        self._apps.append(proc)
        return proc

    def _kill_apps(self) -> None:
        # Everything the desktop started carries its marker in the environment: what is not its
        # infrastructure goes, including a shell's nohup'd or double-forked children (a process
        # tree walk would miss them), and before a dying shell could write ~/.bash_history.
        for pid in self._strays():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for proc in self._apps:  # their own sessions too, for children that cleared their environment
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:  # stuck in the kernel: it no longer holds the episode up
                pass
        self._apps.clear()

    def _strays(self) -> list[int]:
        children, marked = _scan_processes(f"{MARKER}={self.marker}".encode())
        keep, todo = set(), [*self._services, *(p.pid for p in self._procs.values())]
        if self.office is not None and self.office.proc is not None:
            todo.append(self.office.proc.pid)
        while todo:  # the desktop's own services and everything under them stay
            keep.add(pid := todo.pop())
            todo.extend(children.get(pid, ()))
        return [pid for pid in marked if pid not in keep]

    # ---- observation ---------------------------------------------------------------------
    def observe(self, *, screenshot: bool = True) -> Observation:
        # The screenshot (X read + PNG encode, GIL released) overlaps the accessibility reads
        # (D-Bus waits); one dedicated thread, because the grabber must stay on the thread that made it.
        shot = self._shooter.submit(self.screen.screenshot_png) if screenshot else None
        windows = self.screen.windows()
        focused = next((w for w in windows if w.focused), None)
        tree = self._a11y_tree(focused.pid, app_of(focused)) if focused is not None and focused.pid else ""
        return Observation(screenshot=shot.result() if shot else b"", a11y_tree=tree, windows=windows,
                           focused_app=app_of(focused), app_info=self._app_info(app_of(focused)),
                           last_result=self.last_result)

    def _app_info(self, app: str) -> str:
        """The focused document as its application API sees it (used range, paragraphs, slides)."""
        api = api_for_app(app)
        if api is None:
            return ""
        impl = IMPLEMENTATIONS[api]

        def describe() -> str:
            doc = self.office.desktop.getCurrentComponent()
            return impl.app_info(doc, APP_INFO_CHARS) if doc is not None and doc.supportsService(impl.service) else ""

        try:
            return self.office.on_main_thread(describe, timeout_s=5.0)
        except TimeoutError:  # a hung office: let the step report the desktop's death
            raise
        except Exception as e:  # noqa: BLE001 - a document closing under us (UNO errors are no RuntimeError)
            return f"(app info unavailable: {type(e).__name__})"

    def run_api(self, api: str, name: str, args: dict) -> str:
        """Carry out an application API call on the focused document; its result sentence."""
        impl = IMPLEMENTATIONS.get(api)
        if impl is None:
            raise ApiError(f"{api} is not available on this desktop")

        def call() -> str:
            doc = self.office.desktop.getCurrentComponent()
            if doc is None or not doc.supportsService(impl.service):
                raise ApiError(f"{api} needs a focused {impl.app} document; open or switch to one first")
            result = getattr(impl(doc, self.home), name)(**args)
            return "Done" if result is None else str(result)

        return self.office.on_main_thread(call)

    def _a11y_tree(self, pid: int, app: str) -> str:
        # Calc's own word on where its content ends spares reading ~1,000 empty cells per step.
        extent = self.office.on_main_thread(self.office.sheet_extent, timeout_s=5.0) if app == "calc" else None
        used = CellHint(*extent) if extent else None
        try:
            return linearize(self._a11y.tree(pid, max_lines=self.a11y_lines, used=used), self.a11y_lines)
        except A11yError as e:  # an app busy past the deadline gives an empty tree, not a dead step
            return f"(accessibility tree unavailable: {e})"

    def _windows_gone(self, predicate, timeout_s: float) -> bool:
        """Whether every window matching `predicate` is gone within timeout_s (unmapping lags a little)."""
        deadline = time.monotonic() + timeout_s
        while any(predicate(w) for w in self.screen.windows()):
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.02)
        return True

    def wait_for_window(self, predicate, timeout_s: float = 10.0) -> Window | None:
        """Poll the window list until a window matches (apps map their windows asynchronously)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            for w in self.screen.windows():
                if predicate(w):
                    return w
            time.sleep(0.05)
        return None


def _scan_processes(marker: bytes) -> tuple[dict[int, list[int]], list[int]]:
    """(children by parent pid, pids whose environment holds `marker`), from one pass over /proc."""
    children: dict[int, list[int]] = {}
    marked = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            children.setdefault(ppid, []).append(int(entry))
            with open(f"/proc/{entry}/environ", "rb") as f:
                if marker in f.read().split(b"\0"):
                    marked.append(int(entry))
        except (FileNotFoundError, ProcessLookupError, PermissionError, IndexError):
            continue
    return children, marked
