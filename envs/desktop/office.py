"""One LibreOffice process per desktop, in its sandbox, driven over UNO through a named pipe.

soffice.bin is started directly (not the `soffice` wrapper, whose oosplash parent would hide
the real pid and restart a killed office behind our back). Its user profile lives outside the
desktop's home. The desktop's first start of the office, before any episode, makes it from a
seed (no first-start wizard, tip-of-the-day or document-recovery dialog ever shows); the env
server keeps that profile, read-only to the desktop, and every later start begins from a fresh
copy of it, so nothing an episode did to the office (its settings, macros, templates, files in
its profile) reaches the next.

The UNO pipe is a socket in the sandbox's /tmp, whose name is new at every start. The env server
reaches it through the sandbox's root without following any link (`Sandbox.open_socket`); UNO
derives a pipe's path from its name (`/tmp/OSL_PIPE_<uid>_<name>`), so the server dials it
through a symbolic link of a random name, to that descriptor, that lives only while it connects.

The agent can read that name in soffice's command line and bind the path first. So before any
byte goes to the pipe, the kernel says who listens on it (`Sandbox.listener`): only the soffice.bin
started here is believed. Any other listener, or an office that does not answer within the
deadline (connecting is a remote call too, and the agent can stop soffice), makes the office
unreachable: `problem` says why, the desktop reports it as its health, and the server rebuilds it,
which ends the episode as a failure.
"""

from __future__ import annotations

import functools
import os
import secrets
import subprocess
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from computerrl.envs.desktop.sandbox import Sandbox

# Overridable for another LibreOffice build (e.g. a container image with its own path).
SOFFICE = os.environ.get("COMPUTERRL_SOFFICE", "/usr/lib/libreoffice/program/soffice.bin")

# App names the agent may open (lower-case) -> LibreOffice factory URL.
FACTORIES = {
    "calc": "private:factory/scalc",
    "writer": "private:factory/swriter",
    "impress": "private:factory/simpress",
}

_SEED_SETTINGS = {  # (node path, property) -> value, written into registrymodifications.xcu
    ("/org.openoffice.Office.Common/Misc", "ShowTipOfTheDay"): "false",
    ("/org.openoffice.Office.Common/Misc", "FirstRun"): "false",
    ("/org.openoffice.Setup/Office", "ooSetupInstCompleted"): "true",
    ("/org.openoffice.Setup/Product", "ooSetupLastVersion"): "99.0",  # no "what's new" bar
    ("/org.openoffice.Office.Recovery/AutoSave", "Enabled"): "false",
    ("/org.openoffice.Office.Recovery/RecoveryInfo", "Enabled"): "false",
    ("/org.openoffice.Office.Common/Save/Document", "WarnAlienFormat"): "false",
    ("/org.openoffice.Office.Common/Misc", "UseSystemFileDialog"): "false",
    # No macro ever runs: not a document's (whatever MacroExecutionMode a load asks for), not the user's.
    # Generated API code and tasks' files must not reach Basic's Shell() through the office.
    ("/org.openoffice.Office.Common/Security/Scripting", "DisableMacrosExecution"): "true",
    ("/org.openoffice.Office.Common/Security/Scripting", "MacroSecurityLevel"): "3",
}


def seed_profile() -> bytes:
    """registrymodifications.xcu of a fresh profile that shows no wizard, tip or recovery dialog."""
    items = "\n".join(
        f'<item oor:path="{path}"><prop oor:name="{prop}" oor:op="fuse"><value>{value}</value></prop></item>'
        for (path, prop), value in _SEED_SETTINGS.items())
    return ('<?xml version="1.0" encoding="UTF-8"?>\n<oor:items xmlns:oor="http://openoffice.org/2001/registry" '
            'xmlns:xs="http://www.w3.org/2001/XMLSchema" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance">\n'
            f"{items}\n</oor:items>\n").encode()


RESTART_EXIT_CODE = 81
MAIN_THREAD_TIMEOUT_S = 30.0  # a document load or close slower than this means a hung office


class _RestartRequested(Exception):
    pass


class OfficeUnreachable(RuntimeError):
    """The office cannot be reached over UNO: its pipe is held by another process, or it does not answer."""


class Office:
    """The desktop's soffice.bin and a UNO connection to it."""

    def __init__(self, sandbox: "Sandbox", env: dict[str, str], profile: str, pristine: str, log: str):
        # profile, pristine, log: paths inside the sandbox (pristine: read-only there, the profile
        # every start begins from); env["TMPDIR"]: the office's temporary files
        self.sandbox, self.env, self.profile, self.pristine, self.log = sandbox, env, profile, pristine, log
        self.temp = env["TMPDIR"]
        self.pipe_name = ""  # new at every start
        self.proc = None  # SandboxProcess of soffice.bin
        self.started = 0  # soffice.bin's start time (clock ticks): with its pid, the process itself
        self.context = None  # the office's UNO component context
        self._desktop = None  # com.sun.star.frame.Desktop proxy
        self.problem = ""  # why the office cannot be reached ("" = no known problem); the desktop is then broken
        self.hang_s = MAIN_THREAD_TIMEOUT_S  # a call on its main thread slower than this: a hung office

    @property
    def pipe_path(self) -> str:
        from computerrl.envs.desktop.sandbox import UID

        return f"/tmp/OSL_PIPE_{UID}_{self.pipe_name}"

    def start(self, timeout_s: float = 60.0) -> None:
        """Start soffice on a fresh copy of the pristine profile."""
        self.sandbox.copy(self.pristine, self.profile)
        self._launch_until_up(timeout_s)

    def make_profile(self, timeout_s: float = 60.0) -> None:
        """The first start, on a seeded profile: LibreOffice fills it in (the pristine one to keep)."""
        self.sandbox.write(f"{self.profile}/user/registrymodifications.xcu", seed_profile())
        self._launch_until_up(timeout_s)

    def _launch_until_up(self, timeout_s: float) -> None:
        try:
            self._launch(timeout_s)
        except _RestartRequested:  # a new profile's first run exits 81 and wants a restart (oosplash's job)
            self._launch(timeout_s)

    def _launch(self, timeout_s: float) -> None:
        self.pipe_name = f"computerrl-{secrets.token_hex(12)}"
        self.proc = self.sandbox.spawn(
            [SOFFICE, "--norestore", "--nologo", "--nodefault", "--nofirststartwizard", "--nolockcheck",
             f"-env:UserInstallation=file://{self.profile}",
             f"--accept=pipe,name={self.pipe_name};urp;StarOffice.ComponentContext"], env=self.env, log=self.log)
        try:
            self.started = self.sandbox.pids().get(self.proc.pid, 0)  # 0: already gone (poll says so)
            self._connect(timeout_s)
        except BaseException:
            self.stop()  # an office we cannot reach is no office: the next use starts another
            raise

    def _connect(self, timeout_s: float) -> None:
        import uno

        from computerrl.envs.desktop.sandbox import SandboxError

        local = uno.getComponentContext()
        resolver = local.ServiceManager.createInstanceWithContext("com.sun.star.bridge.UnoUrlResolver", local)
        deadline = time.monotonic() + timeout_s
        while True:
            code = self.proc.poll()  # once: a second look could see an exit the first did not
            if code == RESTART_EXIT_CODE:
                raise _RestartRequested
            if code is not None:
                raise RuntimeError(f"soffice exited with code {code} while starting; see {self.log} in the sandbox")
            try:
                fd = self.sandbox.open_socket(self.pipe_path)
            except FileNotFoundError:
                fd = -1  # not listening yet
            except SandboxError as e:
                self._unreachable(f"its pipe was replaced by something that is not a socket of the desktop's: {e}")
            if fd >= 0:
                try:
                    if self._listens(fd) and self._resolve(resolver, fd, deadline):
                        return
                finally:
                    os.close(fd)
            if time.monotonic() > deadline:
                self._unreachable(f"soffice did not accept UNO connections within {timeout_s:.0f} s")
            time.sleep(0.1)

    def _listens(self, fd: int) -> bool:
        """Whether our soffice.bin listens on the pipe `fd`: False while nobody does yet; a stranger there
        (the agent's program bound the path first, or in its place) makes the office unreachable."""
        from computerrl.envs.desktop.sandbox import SandboxError

        try:
            who = self.sandbox.listener(fd)
        except SandboxError:
            return False  # bound but not listening yet, or the listener already gone: look again
        if who != (self.proc.pid, self.started):
            self._unreachable(f"its pipe {self.pipe_path} is held by another process (pid {who[0]} of the "
                              f"desktop, not soffice's {self.proc.pid})")
        return True

    def _resolve(self, resolver, fd: int, deadline: float) -> bool:
        """Connect over the pipe `fd`, on a thread of its own: a remote call that outlives the deadline
        kills soffice (the bridge then ends) and makes the office unreachable. False: not accepting yet."""
        from com.sun.star.connection import NoConnectException

        alias = f"computerrl-{secrets.token_hex(12)}"
        link = Path(f"/tmp/OSL_PIPE_{os.getuid()}_{alias}")  # where UNO looks for a pipe of that name
        link.symlink_to(f"/proc/{os.getpid()}/fd/{fd}")
        done: dict = {}

        def connect() -> None:
            try:
                ctx = resolver.resolve(f"uno:pipe,name={alias};urp;StarOffice.ComponentContext")
                make = ctx.ServiceManager.createInstanceWithContext
                done["office"] = ctx, make("com.sun.star.frame.Desktop", ctx), \
                    make("com.sun.star.awt.AsyncCallback", ctx)
            except NoConnectException:
                done["office"] = None
            except Exception as e:  # noqa: BLE001 - handed to the caller
                done["error"] = e

        worker = threading.Thread(target=connect, daemon=True, name="uno-connect")
        try:
            worker.start()
            worker.join(max(0.0, deadline - time.monotonic()) + 1.0)
        finally:
            link.unlink(missing_ok=True)
        if worker.is_alive():
            self.proc.kill()
            self._unreachable("soffice took its UNO connection but did not answer in time; killed it")
        if "error" in done:
            self._unreachable(f"its UNO connection failed: {type(done['error']).__name__}: {done['error']}")
        if done["office"] is None:
            return False
        self.context, self._desktop, self._async = done["office"]
        return True

    def _unreachable(self, why: str):
        self.problem = f"the office cannot be reached: {why}"
        raise OfficeUnreachable(self.problem)

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    @property
    def desktop(self):
        if not self.running:
            self.start()
        return self._desktop

    def on_main_thread(self, fn, timeout_s: float | None = None):
        """Run `fn` (which makes UNO calls) on LibreOffice's main thread and return its result.

        A UNO call that touches the GUI runs on one of LibreOffice's bridge threads; with gtk3 that
        thread may query the clipboard while the main thread iterates the GLib loop, and both wait
        forever (seen under load when loading a document). com.sun.star.awt.AsyncCallback calls us
        back from the main thread, and the URP bridge runs our nested calls on that same thread.
        A callback that does not finish in time means a hung office: it is killed, so the desktop
        reports itself dead and gets replaced instead of hanging its caller. Queueing it is a remote
        call too, which a stopped office never answers: it waits on a thread of its own.
        """
        timeout_s = self.hang_s if timeout_s is None else timeout_s
        call = _main_thread_call_class()(fn)

        def queue() -> None:
            try:
                self._async.addCallback(call, None)
            except Exception as e:  # noqa: BLE001 - a dead bridge: no callback will come
                call.error = e
                call.done.set()

        threading.Thread(target=queue, daemon=True, name="uno-queue").start()
        if not call.done.wait(timeout_s):
            self.proc.kill()  # its death is the desktop's: `Desktop.health` reports it
            self.disconnect()
            raise TimeoutError(f"LibreOffice did not run a call within {timeout_s:.0f} s; killed it")
        if call.error is not None:
            raise call.error
        return call.result

    def open_app(self, app: str) -> None:
        self.desktop  # (re)start a dead office before queueing work for it
        self.on_main_thread(lambda: self._desktop.loadComponentFromURL(FACTORIES[app], "_blank", 0, ()))

    def warm(self, apps: tuple[str, ...]) -> None:
        """Load each app's code with a hidden document, closed at once: the first document an episode opens then
        costs its own load only. Nothing of it shows or stays (no window, no recent file)."""
        import uno

        hidden = uno.createUnoStruct("com.sun.star.beans.PropertyValue")
        hidden.Name, hidden.Value = "Hidden", True
        self.desktop
        for app in apps:
            self.on_main_thread(lambda: self._desktop.loadComponentFromURL(FACTORIES[app], "_blank", 0,
                                                                           (hidden,)).close(True))

    def open_file(self, path: str) -> None:
        """Open a document by its path in the sandbox (e.g. /home/user/a.xlsx)."""
        import uno

        self.desktop
        url = uno.systemPathToFileUrl(path)
        self.on_main_thread(lambda: self._desktop.loadComponentFromURL(url, "_blank", 0, ()))

    def sheet_extent(self) -> tuple[int, int, tuple[int, int]] | None:
        """(last used row, last used column, cursor (row, col)), 0-based, of the active Calc sheet;
        None when the current document is no spreadsheet or cannot tell (closing, in a dialog…)."""
        try:
            return self._sheet_extent()
        except Exception:  # noqa: BLE001 - a hint only: without it the a11y reader reads the whole view
            return None

    def _sheet_extent(self) -> tuple[int, int, tuple[int, int]] | None:
        doc = self._desktop.getCurrentComponent() if self.running else None
        if doc is None or not doc.supportsService("com.sun.star.sheet.SpreadsheetDocument"):
            return None
        cursor = doc.CurrentController.ActiveSheet.createCursor()
        cursor.gotoEndOfUsedArea(False)
        end, sel = cursor.RangeAddress, doc.CurrentSelection
        at = sel.CellAddress if hasattr(sel, "CellAddress") else getattr(sel, "RangeAddress", None)
        row, col = (at.Row, at.Column) if hasattr(at, "Row") else (at.StartRow, at.StartColumn) if at else (0, 0)
        return end.EndRow, end.EndColumn, (row, col)

    def stop(self) -> None:
        """Kill soffice (the next use starts it again); its death is then no news to `Desktop.health`."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:  # stuck in the kernel (D state): nothing more to do here
                pass
        self.proc = None
        self.disconnect()

    def disconnect(self) -> None:
        """Forget the UNO connection (the sandbox ends the process itself)."""
        self._desktop = None


@functools.cache
def _main_thread_call_class():
    """Built lazily: `uno` is importable only where LibreOffice's Python bridge is installed."""
    import unohelper
    from com.sun.star.awt import XCallback

    class MainThreadCall(unohelper.Base, XCallback):
        def __init__(self, fn):
            self.fn, self.done, self.result, self.error = fn, threading.Event(), None, None

        def notify(self, _data):  # called by LibreOffice, on its main thread
            try:
                self.result = self.fn()
            except Exception as e:  # noqa: BLE001 - handed to the waiting caller
                self.error = e
            finally:
                self.done.set()

    return MainThreadCall


def _iterate(enumeration_access):
    e = enumeration_access.createEnumeration()
    while e.hasMoreElements():
        yield e.nextElement()


def office_env(base: dict[str, str]) -> dict[str, str]:
    """Environment under which LibreOffice exposes its widgets over AT-SPI."""
    env = dict(base)
    env.update(SAL_USE_VCLPLUGIN="gtk3", SAL_ACCESSIBILITY_ENABLED="1")
    env.pop("NO_AT_BRIDGE", None)
    return env

