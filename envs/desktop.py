"""One real desktop: Xvfb + a sandbox holding D-Bus, the AT-SPI bus, openbox and the apps.

Xvfb runs beside the env server; everything the agent or a task can reach (LibreOffice, the
terminal, browsers, task commands) runs in the desktop's sandbox (`envs/sandbox.py`), which the
server drives through sockets only the two share: X, the AT-SPI bus and LibreOffice's UNO pipe.
A desktop is as cheap as its processes: no VM, no boot. `reset()` restores a clean state in place
(close documents, kill everything the episode started, empty home and /tmp), so one desktop
serves thousands of episodes; `health()` says what died when something did.
"""

from __future__ import annotations

import dataclasses
import re
import secrets
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from computerrl.apis.app_api import IMPLEMENTATIONS, ApiError, api_for_app
from computerrl.envs.a11y import A11yError, A11yReader, CellHint, linearize
from computerrl.envs.office import FACTORIES, Office, office_env
from computerrl.envs.sandbox import (CONF, HOME, PATH, RUN, TMP, VAR, X11, Sandbox, SandboxError, SandboxProcess,
                                     check_bwrap, start_xvfb)
from computerrl.envs.x11 import Screen, Window

APP_INFO_CHARS = 5000  # budget of the observation's app_info (ComputerRL trims it to 5,000 too)
OFFICE_CLOSE_S = 1.0  # how long closed documents' windows may linger before the office is restarted
ANSI_ESCAPE = re.compile(r"\x1b(\[[0-?]*[ -/]*[@-~]|\][^\x07]*\x07|[()][A-Za-z0-9]|[=>])")
HOME_SKELETON = ("Desktop", "Documents", "Downloads", "Pictures", "Music", "Videos")
LOGS, TERMINALS = f"{VAR}/logs", f"{VAR}/terminal"  # the apps' logs; the terminals' session logs
BUS_TIMEOUT_S = 10.0  # for a D-Bus daemon to listen

OPENBOX_RC = """<?xml version="1.0" encoding="UTF-8"?>
<openbox_config xmlns="http://openbox.org/3.4/rc">
  <focus><focusNew>yes</focusNew><followMouse>no</followMouse></focus>
  <placement><policy>Smart</policy></placement>
  <desktops><number>1</number></desktops>
  <applications><application class="*"><maximized>yes</maximized><focus>yes</focus></application></applications>
</openbox_config>
"""
# The AT-SPI bus as Debian's at-spi-bus-launcher makes it (with its limits: reads are pipelined), but
# open to the env server, which connects from outside the sandbox's user namespace.
A11Y_BUS_CONF = f"""<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>accessibility</type>
  <servicedir>/usr/share/dbus-1/accessibility-services</servicedir>
  <auth>EXTERNAL</auth>
  <listen>unix:path={RUN}/at-spi-bus</listen>
  <policy context="default">
    <allow user="*"/>
    <allow send_destination="*" eavesdrop="true"/>
    <allow eavesdrop="true"/>
    <allow own="*"/>
  </policy>
  <limit name="max_replies_per_connection">50000</limit>
  <limit name="max_match_rules_per_connection">50000</limit>
  <limit name="max_incoming_bytes">1000000000</limit>
  <limit name="max_outgoing_bytes">1000000000</limit>
  <limit name="max_message_size">1000000000</limit>
  <limit name="service_start_timeout">120000</limit>
  <limit name="reply_timeout">300000</limit>
</busconfig>
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
                 file_cache: Path | None = None, network: bool = False):
        self.workdir = Path(workdir).resolve()
        self.width, self.height, self.a11y_lines = width, height, a11y_lines
        self.file_cache = Path(file_cache).resolve() if file_cache else None  # tasks' `download` reads it
        self.network = network  # whether the sandbox shares the host's network
        self.home = self.workdir / "home"  # /home/user as the env server sees it (read it through the sandbox)
        self.env: dict[str, str] = {}  # the environment of every process started in the sandbox
        self.sandbox: Sandbox | None = None
        self._xvfb: subprocess.Popen | None = None
        self._services: dict[str, SandboxProcess] = {}  # D-Bus, the AT-SPI bus, openbox
        self._keep: set[int] = set()  # sandbox pids that a reset spares (services and what they started)
        self.terminal_logs: list[str] = []  # session logs of the terminals opened this episode (sandbox paths)
        self.setup_notes: list[str] = []  # what the task's setup commands reported (failures), this reset
        self.task_dir: Path | None = None  # the running task's folder: its file:// sources may come from it
        self.office: Office | None = None
        self.screen: Screen | None = None
        self._a11y: A11yReader | None = None
        self._shooter = ThreadPoolExecutor(1, thread_name_prefix="screenshot")
        self.last_result = ""

    # ---- lifecycle -------------------------------------------------------------------------
    def start(self, *, office: bool = True) -> "Desktop":
        """Start X, the sandbox with D-Bus, the AT-SPI bus and the window manager, and LibreOffice."""
        try:
            return self._start(office)
        except BaseException:
            self.close()  # never leave half a desktop running
            raise

    def _start(self, office: bool) -> "Desktop":
        check_bwrap()
        self.workdir.mkdir(parents=True, exist_ok=True)
        self._xvfb, display = start_xvfb(self.workdir, self.width, self.height)
        self.sandbox = Sandbox(self.workdir, x11_dir=self.workdir / "x11", network=self.network)
        (self.workdir / "conf").mkdir(exist_ok=True)
        (self.workdir / "conf" / "openbox.xml").write_text(OPENBOX_RC)
        (self.workdir / "conf" / "a11y-bus.conf").write_text(A11Y_BUS_CONF)
        self.sandbox.start()
        # A clean environment, as on OSWorld's VM: Debian's PATH and python3, the user's home.
        self.env = office_env({"PATH": PATH, "HOME": HOME, "USER": "user", "LOGNAME": "user", "SHELL": "/bin/bash",
                               "LANG": "C.UTF-8", "DISPLAY": display, "XDG_RUNTIME_DIR": RUN,
                               "DBUS_SESSION_BUS_ADDRESS": f"unix:path={RUN}/bus",
                               "AT_SPI_BUS_ADDRESS": f"unix:path={RUN}/at-spi-bus"})
        self.sandbox.wipe([], skeleton=[LOGS, TERMINALS, f"{VAR}/office-tmp"])
        self._restore_home()
        self._service("dbus", ["dbus-daemon", "--session", "--nofork", "--nopidfile", f"--address=unix:path={RUN}/bus"])
        self._service("a11y-bus", ["dbus-daemon", f"--config-file={CONF}/a11y-bus.conf", "--nofork", "--nopidfile"])
        self._service("openbox", ["openbox", "--sm-disable", "--config-file", f"{CONF}/openbox.xml"])
        self.screen = Screen(display)
        bus = self.sandbox.host(f"{RUN}/at-spi-bus")
        self._a11y = A11yReader(str(bus))
        # Asking for the registry starts it (D-Bus activation): now, so it counts among the services
        # below and apps find it from their first second. A bus whose socket exists may not listen yet.
        self._wait_for(lambda: self.sandbox.host(f"{RUN}/bus").exists() and self._a11y_up(), "the D-Bus daemons")
        self._keep = self.sandbox.pids()
        self.office = Office(self.sandbox, {**self.env, "TMPDIR": f"{VAR}/office-tmp"}, f"{VAR}/lo-profile",
                             f"computerrl-{secrets.token_hex(6)}", f"{LOGS}/soffice.log")
        if office:
            self.office.start()
        return self

    def _a11y_up(self) -> bool:
        try:
            return self._a11y.applications() is not None
        except A11yError:
            return False

    def _service(self, name: str, argv: list[str]) -> None:
        self._services[name] = self.sandbox.spawn(argv, env=self.env, log=f"{LOGS}/{name}.log")

    def _wait_for(self, ready, what: str) -> None:
        deadline = time.monotonic() + BUS_TIMEOUT_S
        while not ready():
            dead = self.health()
            if dead or time.monotonic() > deadline:
                raise RuntimeError(f"{what} did not start ({dead or 'timeout'}); see {self.workdir / 'var/logs'}")
            time.sleep(0.01)

    def health(self) -> str:
        """'' when healthy, else what died (e.g. 'soffice exited with code -9')."""
        if self._xvfb is not None and self._xvfb.poll() is not None:
            return f"xvfb exited with code {self._xvfb.returncode}"
        if self.sandbox is None or not self.sandbox.alive():
            return "the sandbox is gone"
        watched = dict(self._services)
        if self.office is not None and self.office.proc is not None:
            watched["soffice"] = self.office.proc
        try:  # one request for all: the watchdog asks every second
            exited = self.sandbox.request({"op": "poll", "pids": [p.pid for p in watched.values()]})["exited"]
        except (OSError, SandboxError) as e:  # the keeper stopped answering
            return f"the sandbox does not answer: {e}"
        for name, proc in watched.items():
            if str(proc.pid) in exited:
                proc.returncode = exited[str(proc.pid)]
                return f"{name} exited with code {proc.returncode}"
        return ""

    def close(self) -> None:
        """Stop every process of the desktop; safe to call twice."""
        if self._a11y is not None:
            self._a11y.close()
            self._a11y = None
        if self.office is not None:
            self.office.disconnect()
        if self.screen is not None:
            try:
                self._shooter.submit(self.screen.close).result(timeout=10)  # on the grabber's own thread
            except Exception:  # the X server may already be gone
                pass
            self.screen = None
            self._shooter.shutdown(wait=False)
        if self.sandbox is not None:
            self.sandbox.close()  # ends every process inside at once (pid namespace)
        if self._xvfb is not None:
            self._xvfb.terminate()
            try:
                self._xvfb.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self._xvfb.kill()
                self._xvfb.wait(timeout=5)
            self._xvfb = None

    # ---- episodes ------------------------------------------------------------------------
    def reset(self) -> None:
        """Back to a clean desktop: no documents, nothing the last episode started, empty home and /tmp."""
        if self.office is not None:
            if self.office.proc is None:
                self.office.start()
            self.office.close_documents()
            # A modal dialog (Format Cells, Save As…) vetoes closing its document: restart the office.
            if not self._windows_gone(lambda w: w.pid == self.office.proc.pid, OFFICE_CLOSE_S):
                self.office.stop()
                self.office.start()
        # The pid namespace holds exactly this desktop's processes: whatever escaped its parent,
        # started a new session or cleared its environment is killed here too.
        self.sandbox.kill_all(self._keep | ({self.office.proc.pid} if self.office and self.office.running else set()))
        self._restore_home()
        self.terminal_logs.clear()
        self.setup_notes.clear()
        self.last_result = ""

    def _restore_home(self) -> None:
        self.sandbox.wipe([HOME, TMP, TERMINALS], keep=[X11, f"{TMP}/OSL_PIPE_*"],
                          skeleton=[f"{HOME}/{d}" for d in HOME_SKELETON])

    def terminal_log_args(self) -> list[str]:
        """xterm options that log the session outside home (the vm_terminal_output getter reads it)."""
        self.terminal_logs.append(f"{TERMINALS}/terminal-{len(self.terminal_logs)}.log")
        return ["-l", "-lf", self.terminal_logs[-1]]

    def terminal_output(self) -> str | None:
        """What the most recently opened terminal printed (escape sequences removed), None if none was opened."""
        raw = self.sandbox.read(self.terminal_logs[-1]) if self.terminal_logs else None
        if raw is None:
            return None
        return ANSI_ESCAPE.sub("", raw.decode(errors="replace")).replace("\r\n", "\n").replace("\r", "")

    def launch(self, argv: list[str]) -> SandboxProcess:
        """Start an app in the sandbox; reset kills it with everything it started."""
        return self.sandbox.spawn(argv, env=self.env, log=f"{LOGS}/apps.log")

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

