"""One real desktop: Xvfb + a sandbox holding D-Bus, the AT-SPI bus, openbox and the apps.

Xvfb runs beside the env server; everything the agent or a task can reach (LibreOffice, the
terminal, browsers, task commands) runs in the desktop's sandbox (`envs/desktop/sandbox.py`), which the
server drives through sockets only the two share: X (with this desktop's cookie), the AT-SPI bus
and LibreOffice's UNO pipe. A desktop is as cheap as its processes: no VM, no boot. `reset()`
restores a clean state in place (close documents, kill everything the episode started, empty
every folder the desktop can write), so one desktop serves thousands of episodes; `health()`
says what died when something did. Its limits (`Limits`) bound what one desktop may take.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import re
import secrets
import shutil
import socket
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from computerrl.apis import generated
from computerrl.apis.app_api import IMPLEMENTATIONS, ApiError, AppApi, api_for_app
from computerrl.envs.desktop.a11y import A11yError, A11yReader, CellHint, linearize
from computerrl.envs.desktop.a11y_xml import osworld_tree
from computerrl.envs.desktop.actions import OPEN_S, ActionError, GuiActions, app_of, app_window
from computerrl.envs.desktop.cgroup import Cgroup
from computerrl.envs.desktop.gsettings import compile_schemas
from computerrl.envs.desktop.office import FACTORIES, Office, office_env
from computerrl.envs.desktop.sandbox import (CONF, HOME, PATH, RUN, SHM, TMP, VAR, X11, Limits, Sandbox, SandboxError,
                                     SandboxProcess, check_bwrap, start_xvfb)
from computerrl.envs.desktop.vlc import http_get
from computerrl.envs.desktop.x11 import X_TIMEOUT_S, Screen, Window, grant, xauthority

log = logging.getLogger("computerrl.envs.desktop.desktop")

APP_INFO_CHARS = 5000  # budget of the observation's app_info (ComputerRL trims it to 5,000 too)
ANSI_ESCAPE = re.compile(r"\x1b(\[[0-?]*[ -/]*[@-~]|\][^\x07]*\x07|[()][A-Za-z0-9]|[=>])")
HOME_SKELETON = ("Desktop", "Documents", "Downloads", "Pictures", "Music", "Videos")
LOGS, TERMINALS = f"{VAR}/logs", f"{VAR}/terminal"  # the apps' logs; the terminals' session logs
BUS_TIMEOUT_S = 10.0  # for a D-Bus daemon to listen
HEALTH_TIMEOUT_S = 5.0  # a session that does not answer the watchdog's poll this fast is stuck
SERVICES = ("dbus", "a11y-bus", "openbox")
BUSES = ("bus", "at-spi-bus")  # their sockets, in RUN
GENERATED_CALL_S = 20.0  # a generated API call that takes longer is killed (the step then fails)
VSCODE_CLI_S = 120.0  # VS Code's command line (an extension install unpacks a package)
TERMINAL_LOG_LIMIT = 16 << 20  # bytes of a terminal's log read for the vm_terminal_output getter

TERMINAL_LOG = re.compile(r"terminal-(\d+)\.log")  # a terminal's session log in TERMINALS: when it opened (ns)
# Ctrl+Alt+T opens a terminal, as on OSWorld's Ubuntu (its os tasks open theirs so, and agents do too)
TERMINAL_HOTKEY = f"sh -c 'exec xterm -T Terminal -l -lf {TERMINALS}/terminal-$(date +%s%N).log'"
OPENBOX_RC = f"""<?xml version="1.0" encoding="UTF-8"?>
<openbox_config xmlns="http://openbox.org/3.4/rc">
  <focus><focusNew>yes</focusNew><followMouse>no</followMouse></focus>
  <placement><policy>Smart</policy></placement>
  <desktops><number>1</number></desktops>
  <applications><application class="*"><maximized>yes</maximized><focus>yes</focus></application></applications>
  <keyboard><keybind key="C-A-t"><action name="Execute"><command>{TERMINAL_HOTKEY}</command></action></keybind>
  </keyboard>
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
    a11y_tree: str  # linearized table of the focused application (see envs/desktop/a11y.py)
    windows: list[Window]
    focused_app: str  # "calc", "writer", "impress", "terminal", … or "" (no window)
    app_info: str  # app-specific summary (filled by the application APIs)
    last_result: str  # what the previous action did, or why it was invalid


class Desktop:
    """A desktop's processes and state. Not thread-safe: the env server serializes calls."""

    def __init__(self, workdir: Path, *, width: int = 1920, height: int = 1080, a11y_lines: int = 300,
                 file_cache: Path | None = None, network: bool = False, limits: Limits = Limits()):
        self.workdir = Path(workdir).resolve()
        self.width, self.height, self.a11y_lines = width, height, a11y_lines
        self.file_cache = Path(file_cache).resolve() if file_cache else None  # tasks' `download` reads it
        self.network = network  # whether the sandbox has outbound network (a namespace of its own, slirp4netns)
        self.limits = limits
        self.env: dict[str, str] = {}  # the environment of every process started in the sandbox
        self.x_env: dict[str, str] = {}  # the environment of the server's own X clients (xdotool)
        self.sandbox: Sandbox | None = None
        self.cgroup: Cgroup | None = None
        self._bus_fd = -1  # O_PATH descriptor of the AT-SPI bus's socket (see Sandbox.open_socket)
        self._buses: dict[str, tuple[int, int]] = {}  # bus socket -> (device, inode) as its daemon made it
        self._xvfb: subprocess.Popen | None = None
        self._services: dict[str, SandboxProcess] = {}  # D-Bus, the AT-SPI bus, openbox
        self._keep: dict[int, int] = {}  # session pids (and start times) a reset spares: the services
        self.setup_notes: list[str] = []  # what the task's setup commands reported (failures), this reset
        self.task_dir: Path | None = None  # the running task's folder: its file:// sources may come from it
        self.office: Office | None = None
        self.screen: Screen | None = None
        self._a11y: A11yReader | None = None
        self._shooter = ThreadPoolExecutor(1, thread_name_prefix="screenshot")
        self.last_result = ""

    # ---- lifecycle -------------------------------------------------------------------------
    def start(self) -> "Desktop":
        """Start X, the sandbox with D-Bus, the AT-SPI bus and the window manager, and make the
        office's pristine profile (the office itself starts on first use)."""
        try:
            return self._start()
        except BaseException:
            self.close()  # never leave half a desktop running
            raise

    def _start(self) -> "Desktop":
        check_bwrap()
        self.workdir.mkdir(parents=True, exist_ok=True)
        conf = self.workdir / "conf"
        for fresh in (conf, self.workdir / "x11"):  # nothing of an earlier desktop here (the logs stay)
            shutil.rmtree(fresh, ignore_errors=True)
        conf.mkdir()
        if self.limits.memory_mb:
            self.cgroup, why_not = Cgroup.make(f"computerrl-{os.getpid()}-{secrets.token_hex(4)}",
                                               self.limits.memory_mb * (1 << 20))
            if self.cgroup is None:
                log.warning("desktop %s: its memory is not capped (no writable cgroup: %s)", self.workdir, why_not)
        # This desktop's X cookie: Xvfb and the server hold it on the host, the sandbox a read-only copy.
        cookie = secrets.token_bytes(16)
        auth = xauthority(cookie, [socket.gethostname(), "desktop"])
        for path, mode in ((self.workdir / "xauth", 0o600), (conf / "Xauthority", 0o644)):
            path.write_bytes(auth)
            os.chmod(path, mode)
        self._xvfb, display = start_xvfb(self.workdir, self.width, self.height, self.workdir / "xauth", self.cgroup)
        grant(display, cookie)
        self.x_env = {"PATH": PATH, "DISPLAY": display, "XAUTHORITY": str(self.workdir / "xauth")}
        self.sandbox = Sandbox(self.workdir, x11_dir=self.workdir / "x11", network=self.network, limits=self.limits,
                               cgroup=self.cgroup)
        (conf / "openbox.xml").write_text(OPENBOX_RC)
        (conf / "a11y-bus.conf").write_text(A11Y_BUS_CONF)
        compile_schemas(conf / "schemas")
        self.sandbox.start()
        # A clean environment, as on OSWorld's VM: Debian's PATH and python3, the user's home.
        self.env = office_env({"PATH": PATH, "HOME": HOME, "USER": "user", "LOGNAME": "user", "SHELL": "/bin/bash",
                               "LANG": "C.UTF-8", "DISPLAY": display, "XAUTHORITY": f"{CONF}/Xauthority",
                               "XDG_RUNTIME_DIR": RUN, "DBUS_SESSION_BUS_ADDRESS": f"unix:path={RUN}/bus",
                               "AT_SPI_BUS_ADDRESS": f"unix:path={RUN}/at-spi-bus",
                               "GSETTINGS_SCHEMA_DIR": f"{CONF}/schemas"})  # OSWorld's VM's defaults
        self.office = Office(self.sandbox, {**self.env, "TMPDIR": f"{VAR}/office-tmp"}, f"{VAR}/lo-profile",
                             f"{CONF}/lo-profile", f"{LOGS}/soffice.log")
        self.sandbox.wipe([], skeleton=[LOGS])
        if not self.sandbox.launch_apps(self.env, f"{LOGS}/apps.log"):
            log.warning("desktop %s: this kernel has no Landlock, so the agent's programs can trace the apps a "
                        "score is read from (VLC, Chromium) and write their memory", self.workdir)
        self._clear_files()
        self._service("dbus", ["dbus-daemon", "--session", "--nofork", "--nopidfile", f"--address=unix:path={RUN}/bus"])
        self._service("a11y-bus", ["dbus-daemon", f"--config-file={CONF}/a11y-bus.conf", "--nofork", "--nopidfile"])
        self._service("openbox", ["openbox", "--sm-disable", "--config-file", f"{CONF}/openbox.xml"])
        self.screen = Screen(display)
        # Asking for the registry starts it (D-Bus activation): now, so it counts among the services
        # below and apps find it from their first second. A bus whose socket exists may not listen yet.
        self._wait_for(self._a11y_up, "the D-Bus daemons")
        self._buses = {name: self._bus_id(name) for name in BUSES}
        self._keep = self.sandbox.pids()
        self._make_office_profile(conf / "lo-profile")
        return self

    def _make_office_profile(self, pristine: Path) -> None:
        """The office's first start fills in its profile; a copy on our side, read-only in the sandbox
        (conf/), is what every later start begins from. Before any episode: nothing of an agent's is in it."""
        self.office.make_profile()
        self.office.stop()
        made = Path(f"/proc/{self.sandbox.pid}/root{self.office.profile}")  # the sandbox's file system
        shutil.rmtree(pristine, ignore_errors=True)
        shutil.copytree(made, pristine, symlinks=True, ignore=shutil.ignore_patterns(".lock"))
        for folder, dirs, files in os.walk(pristine):  # the desktop's user must read what we own
            os.chmod(folder, 0o755)
            for name in files:
                os.chmod(os.path.join(folder, name), 0o644)

    def _a11y_up(self) -> bool:
        """Whether both buses listen (the AT-SPI one answering us)."""
        try:
            os.close(self.sandbox.open_socket(f"{RUN}/bus"))
            if self._a11y is None:  # once there, the socket is held by its descriptor: no path is followed again
                self._bus_fd = self.sandbox.open_socket(f"{RUN}/at-spi-bus")
                self._a11y = A11yReader(f"/proc/self/fd/{self._bus_fd}")
            return self._a11y.applications() is not None
        except (A11yError, OSError, SandboxError):
            return False

    def _bus_id(self, name: str) -> tuple[int, int] | None:
        """(device, inode) of a bus's socket; None when something else is in its place."""
        try:
            fd = self.sandbox.open_socket(f"{RUN}/{name}")
        except (OSError, SandboxError):
            return None
        try:
            st = os.fstat(fd)
            return st.st_dev, st.st_ino
        finally:
            os.close(fd)

    def _service(self, name: str, argv: list[str]) -> None:
        self._services[name] = self.sandbox.spawn(argv, env=self.env, log=f"{LOGS}/{name}.log")

    def _wait_for(self, ready, what: str) -> None:
        deadline = time.monotonic() + BUS_TIMEOUT_S
        while not ready():
            dead = self.health()
            if dead or time.monotonic() > deadline:
                raise RuntimeError(f"{what} did not start ({dead or 'timeout'}){self.logs_tail()}")
            time.sleep(0.01)

    def logs_tail(self, chars: int = 1500) -> str:
        """The end of each of the desktop's logs (they live in the sandbox), for error messages."""
        try:
            logs = {name: self.sandbox.read(f"{LOGS}/{name}.log", limit=1 << 20) for name in (*SERVICES, "soffice")}
        except (OSError, SandboxError):
            return ""
        return "".join(f"\n--- {LOGS}/{name}.log:\n{data[-chars:].decode(errors='replace')}"
                       for name, data in logs.items() if data)

    def health(self) -> str:
        """'' when healthy, else what died (e.g. 'soffice exited with code -9')."""
        if self._xvfb is not None and self._xvfb.poll() is not None:
            return f"xvfb exited with code {self._xvfb.returncode}"
        if self.sandbox is None or not self.sandbox.alive():
            return "the sandbox is gone"
        if self.office is not None and self.office.problem:  # reaching it again would meet the same wall
            return self.office.problem
        watched = dict(self._services)
        if self.office is not None and self.office.proc is not None:
            watched["soffice"] = self.office.proc
        try:  # one request for all, with a short deadline: the watchdog asks every second
            exited = self.sandbox.poll([p.pid for p in watched.values()], timeout_s=HEALTH_TIMEOUT_S)
        except (OSError, SandboxError) as e:  # the session is stuck or gone
            return f"the desktop's session does not answer: {e}"
        try:
            self.sandbox.request({"op": "ping"}, to="keeper", timeout_s=HEALTH_TIMEOUT_S)
        except (OSError, SandboxError) as e:
            return f"the sandbox's keeper does not answer: {e}"
        for name, proc in watched.items():
            if proc.pid in exited:
                proc.returncode = exited[proc.pid]
                return f"{name} exited with code {proc.returncode}"
        return ""

    def kill(self) -> None:
        """End every process of the desktop at once, from any thread: a call blocked on one of them (an
        office, a bus, the X server) then fails at once. `close()` still tidies up after."""
        if self.sandbox is not None:
            self.sandbox.kill()
        if self._xvfb is not None:
            self._xvfb.kill()

    def close(self) -> None:
        """Stop every process of the desktop; safe to call twice."""
        if self._a11y is not None:
            self._a11y.close()
            self._a11y = None
        if self._bus_fd >= 0:
            os.close(self._bus_fd)
            self._bus_fd = -1
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
        if self.x_env:
            grant(self.x_env["DISPLAY"], None)
        if self._xvfb is not None:
            self._xvfb.terminate()
            try:
                self._xvfb.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self._xvfb.kill()
                self._xvfb.wait(timeout=5)
            self._xvfb = None
        if self.cgroup is not None:
            self.cgroup.remove()
            self.cgroup = None

    # ---- episodes ------------------------------------------------------------------------
    def reset(self) -> None:
        """Back to a clean desktop: nothing the last episode started runs, and every folder the
        desktop can write is emptied (home, /tmp, /dev/shm, the runtime and state folders). The
        office goes too: its next start (on first use) is from its pristine profile, so no
        document, setting or macro of the episode carries over."""
        if self.office is not None:
            self.office.stop()
        # The pid namespace holds exactly this desktop's processes: whatever escaped its parent,
        # started a new session or cleared its environment is killed here too.
        self.sandbox.kill_all(self._keep)
        self._clear_files()
        for name, made in self._buses.items():  # one the agent replaced stays lost to the apps: rebuild
            if self._bus_id(name) != made:
                raise RuntimeError(f"the desktop's {name} socket was replaced; its apps can no longer reach it")
        self.setup_notes.clear()
        self.last_result = ""

    def _clear_files(self) -> None:
        """Every folder the desktop may write, emptied but for the sockets of its services (and their
        logs, which they hold open: emptied in place)."""
        logs = [f"{LOGS}/{s}.log" for s in SERVICES]
        self.sandbox.wipe([HOME, TMP, SHM, RUN, VAR, LOGS], keep=[X11, *(f"{RUN}/{b}" for b in BUSES), LOGS, *logs],
                          skeleton=[TERMINALS, self.office.temp, *(f"{HOME}/{d}" for d in HOME_SKELETON)], empty=logs)

    def terminal_log_args(self) -> list[str]:
        """xterm options that log the session outside home (the vm_terminal_output getter reads it)."""
        return ["-l", "-lf", f"{TERMINALS}/terminal-{time.time_ns()}.log"]

    def terminal_output(self) -> str | None:
        """What the most recently opened terminal printed (escape sequences removed), None if none was opened.
        Opened by an app start or by Ctrl+Alt+T: the newest log in TERMINALS (emptied at each reset)."""
        try:
            names = os.listdir(f"/proc/{self.sandbox.pid}/root{TERMINALS}")  # the sandbox's file system
        except OSError:
            return None
        opened = [(int(m.group(1)), name) for name in names if (m := TERMINAL_LOG.fullmatch(name))]
        raw = self.sandbox.read(f"{TERMINALS}/{max(opened)[1]}", limit=TERMINAL_LOG_LIMIT) if opened else None
        if raw is None:
            return None
        return ANSI_ESCAPE.sub("", raw.decode(errors="replace")).replace("\r\n", "\n").replace("\r", "")

    def launch(self, argv: list[str]) -> SandboxProcess:
        """Start an app in the sandbox; reset kills it with everything it started."""
        return self.sandbox.spawn(argv, env=self.env, log=f"{LOGS}/apps.log")

    # ---- what app APIs of their own (apis.app_api.DesktopApi) may ask of the desktop ----------
    def devtools(self):
        """The browser's DevTools (envs/desktop/devtools.py)."""
        from computerrl.envs.desktop.devtools import DevTools

        return DevTools(self.sandbox)

    def press(self, keys: list[str]) -> None:
        """A key combination, pressed in the focused window as `Agent.hotkey` presses it."""
        try:
            GuiActions(self).hotkey(keys)
        except ActionError as e:
            raise ApiError(str(e)) from None

    def vlc(self, path: str) -> bytes | None:
        """A page of VLC's HTTP interface; None when no VLC answers."""
        return http_get(self, path)

    def vscode(self, args: list[str], opens_window: bool = False) -> str:
        """VS Code's command line, `code ARGS`, in the session: its output. A command that opens a window,
        with no VS Code window open, starts VS Code and returns once its window is ready."""
        if opens_window and not any(app_window(w, "code") for w in self.screen.windows()):
            self.launch(["code", *args])
            if self.wait_for_window(lambda w: app_window(w, "code"), OPEN_S) is None:
                raise ApiError(f"VS Code showed no window within {OPEN_S:.0f} s")
            return ""
        r = self.sandbox.run(["code", *args], env=self.env, timeout_s=VSCODE_CLI_S)
        if r.returncode != 0:
            said = (r.stderr.strip() or r.stdout.strip()).splitlines()
            raise ApiError(f"code {' '.join(args)}: " + (said[-1] if said else f"exit code {r.returncode}"))
        return r.stdout

    # ---- observation ---------------------------------------------------------------------
    def screenshot(self) -> bytes:
        """A PNG of the screen now (on the grabber's own thread, as `observe` takes it)."""
        return self._shooter.submit(self.screen.screenshot_png).result(timeout=X_TIMEOUT_S)

    def observe(self, *, screenshot: bool = True) -> Observation:
        windows = self.screen.windows()
        focused = next((w for w in windows if w.focused), None)
        tree = self._a11y_tree(focused.pid, app_of(focused)) if focused is not None and focused.pid else ""
        # The screenshot is taken after the tree is read, so it shows at least what the tree says (an app
        # may repaint after its accessible text changed), and overlaps the app info (X read and PNG encode
        # release the GIL); one dedicated thread, because the grabber must stay on the thread that made it.
        shot = self._shooter.submit(self.screen.screenshot_png) if screenshot else None
        info = self._app_info(app_of(focused))
        return Observation(screenshot=shot.result(timeout=X_TIMEOUT_S) if shot else b"", a11y_tree=tree,
                           windows=windows, focused_app=app_of(focused), app_info=info, last_result=self.last_result)

    def _app_info(self, app: str) -> str:
        """The focused document as its application API sees it (used range, paragraphs, slides)."""
        api = api_for_app(app)
        if api is None:
            return ""
        impl = IMPLEMENTATIONS[api]
        if not issubclass(impl, AppApi):  # an app of its own (the browser), not an office document
            return impl(self).app_info(APP_INFO_CHARS)

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
        if (api, name) in generated.LOADED:
            gen = generated.LOADED[(api, name)]
            answer = self.run_generated(generated.worker_request(gen.app, gen.code, mode="call", function=name,
                                                                 args=args), GENERATED_CALL_S)
            if not answer["ok"]:
                raise ApiError(answer["error"])
            return answer["result"]
        impl = IMPLEMENTATIONS.get(api)
        if impl is None:
            raise ApiError(f"{api} is not available on this desktop")
        if not issubclass(impl, AppApi):  # acts on its app through the desktop (DevTools, keys), not over UNO
            result = getattr(impl(self), name)(**args)
            return "Done" if result is None else str(result)

        def call() -> str:
            doc = self.office.desktop.getCurrentComponent()
            if doc is None or not doc.supportsService(impl.service):
                raise ApiError(f"{api} needs a focused {impl.app} document; open or switch to one first")
            result = getattr(impl(doc, self.office.context), name)(**args)
            return "Done" if result is None else str(result)

        return self.office.on_main_thread(call)

    def run_generated(self, request: dict, timeout_s: float) -> dict:
        """Run model-written API code (`apis/worker.py`) in the desktop's session, with the agent's
        rights only, against this desktop's office; the worker's answer. A call that outlives
        `timeout_s` raises TimeoutError (the worker killed; the office may be wedged: reset it)."""
        self.office.desktop  # the office up, its pipe named
        try:
            app = request["app"]  # the worker is told what it cannot import: the app's document kind
            facts = {"pipe": self.office.pipe_name, "factory": FACTORIES[app],
                     "service": IMPLEMENTATIONS[generated.api_class(app)].service}
            done = self.sandbox.run(generated.worker_argv(), env=self.env, input=json.dumps({**request, **facts}),
                                    timeout_s=timeout_s)
        except SandboxError as e:
            if "did not finish" in str(e):
                raise TimeoutError(f"the generated code did not finish within {timeout_s:.0f} s") from None
            raise
        answer = generated.worker_reply(done.stdout)
        if answer is None:
            return {"ok": False, "error": f"the worker died (exit {done.returncode}): {done.stderr[-800:].strip()}"}
        return answer

    def a11y_rows(self, pid: int, app: str) -> list[str]:
        """An app's accessibility tree as the agent sees it: one row per node (tag, name, text, …, tab-separated)."""
        return self._a11y_tree(pid, app).splitlines()

    def _a11y_tree(self, pid: int, app: str) -> str:
        # Calc's own word on where its content ends spares reading ~1,000 empty cells per step.
        extent = self.office.on_main_thread(self.office.sheet_extent, timeout_s=5.0) if app == "calc" else None
        used = CellHint(*extent) if extent else None
        try:
            return linearize(self._a11y.tree(pid, max_lines=self.a11y_lines, used=used), self.a11y_lines)
        except A11yError as e:  # an app busy past the deadline gives an empty tree, not a dead step
            return f"(accessibility tree unavailable: {e})"

    def a11y_xml(self) -> str:
        """The whole desktop's accessibility tree as OSWorld's XML (envs/desktop/a11y_xml.py), for evaluators."""
        if self._a11y is None and not self._a11y_up():
            raise A11yError("the desktop's accessibility bus does not answer")
        return self._a11y.guard(osworld_tree, self._a11y)

    def wait_for_window(self, predicate, timeout_s: float = 10.0) -> Window | None:
        """Poll the window list until a window matches (apps map their windows asynchronously)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            for w in self.screen.windows():
                if predicate(w):
                    return w
            time.sleep(0.05)
        return None

