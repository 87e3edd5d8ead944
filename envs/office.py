"""One LibreOffice process per desktop, driven over UNO through a named pipe.

soffice.bin is started directly (not the `soffice` wrapper, whose oosplash parent would hide
the real pid and restart a killed office behind our back). Its user profile lives outside the
desktop's home, so resetting the home folder never touches it; the profile is seeded so no
first-start wizard, tip-of-the-day or document-recovery dialog ever shows.
"""

from __future__ import annotations

import functools
import os
import subprocess
import threading
import time
from pathlib import Path

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
}


def seed_profile(profile: Path) -> None:
    user = profile / "user"
    user.mkdir(parents=True, exist_ok=True)
    items = "\n".join(
        f'<item oor:path="{path}"><prop oor:name="{prop}" oor:op="fuse"><value>{value}</value></prop></item>'
        for (path, prop), value in _SEED_SETTINGS.items())
    (user / "registrymodifications.xcu").write_text(
        '<?xml version="1.0" encoding="UTF-8"?>\n<oor:items xmlns:oor="http://openoffice.org/2001/registry" '
        'xmlns:xs="http://www.w3.org/2001/XMLSchema" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance">\n'
        f"{items}\n</oor:items>\n")


RESTART_EXIT_CODE = 81
MAIN_THREAD_TIMEOUT_S = 30.0  # a document load or close slower than this means a hung office


class _RestartRequested(Exception):
    pass


class Office:
    """The desktop's soffice.bin and a UNO connection to it."""

    def __init__(self, env: dict[str, str], profile: Path, pipe_name: str, log: Path):
        self.env, self.profile, self.pipe_name, self.log = env, profile, pipe_name, log
        self.proc: subprocess.Popen | None = None
        self._desktop = None  # com.sun.star.frame.Desktop proxy

    def start(self, timeout_s: float = 60.0) -> None:
        if not (self.profile / "user" / "registrymodifications.xcu").exists():
            seed_profile(self.profile)
        try:
            self._launch(timeout_s)
        except _RestartRequested:  # a new profile's first run exits 81 and wants a restart (oosplash's job)
            self._launch(timeout_s)

    def _launch(self, timeout_s: float) -> None:
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(
                [SOFFICE, "--norestore", "--nologo", "--nodefault", "--nofirststartwizard", "--nolockcheck",
                 f"-env:UserInstallation={self.profile.as_uri()}",
                 f"--accept=pipe,name={self.pipe_name};urp;StarOffice.ComponentContext"],
                env=self.env, stdout=log, stderr=log, stdin=subprocess.DEVNULL)
        self._connect(timeout_s)

    def _connect(self, timeout_s: float) -> None:
        import uno
        from com.sun.star.connection import NoConnectException

        local = uno.getComponentContext()
        resolver = local.ServiceManager.createInstanceWithContext("com.sun.star.bridge.UnoUrlResolver", local)
        deadline = time.monotonic() + timeout_s
        while True:
            if self.proc.poll() == RESTART_EXIT_CODE:
                raise _RestartRequested
            if self.proc.poll() is not None:
                raise RuntimeError(f"soffice exited with code {self.proc.returncode} while starting; see {self.log}")
            try:
                ctx = resolver.resolve(f"uno:pipe,name={self.pipe_name};urp;StarOffice.ComponentContext")
                break
            except NoConnectException:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"soffice did not accept UNO connections within {timeout_s:.0f} s")
                time.sleep(0.1)
        self._desktop = ctx.ServiceManager.createInstanceWithContext("com.sun.star.frame.Desktop", ctx)
        self._async = ctx.ServiceManager.createInstanceWithContext("com.sun.star.awt.AsyncCallback", ctx)

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    @property
    def desktop(self):
        if not self.running:
            self.start()
        return self._desktop

    def on_main_thread(self, fn, timeout_s: float = MAIN_THREAD_TIMEOUT_S):
        """Run `fn` (which makes UNO calls) on LibreOffice's main thread and return its result.

        A UNO call that touches the GUI runs on one of LibreOffice's bridge threads; with gtk3 that
        thread may query the clipboard while the main thread iterates the GLib loop, and both wait
        forever (seen under load when loading a document). com.sun.star.awt.AsyncCallback calls us
        back from the main thread, and the URP bridge runs our nested calls on that same thread.
        A callback that does not finish in time means a hung office: it is killed, so the desktop
        reports itself dead and gets replaced instead of hanging its caller.
        """
        call = _main_thread_call_class()(fn)
        self._async.addCallback(call, None)
        if not call.done.wait(timeout_s):
            self.stop()
            raise TimeoutError(f"LibreOffice did not run a call within {timeout_s:.0f} s; killed it")
        if call.error is not None:
            raise call.error
        return call.result

    def open_app(self, app: str) -> None:
        self.desktop  # (re)start a dead office before queueing work for it
        self.on_main_thread(lambda: self._desktop.loadComponentFromURL(FACTORIES[app], "_blank", 0, ()))

    def open_file(self, path: Path) -> None:
        self.desktop
        self.on_main_thread(lambda: self._desktop.loadComponentFromURL(path.as_uri(), "_blank", 0, ()))

    def close_documents(self) -> int:
        """Close every open document without saving; returns how many were closed."""
        return self.on_main_thread(self._close_documents) if self.running else 0

    def _close_documents(self) -> int:
        docs = list(_iterate(self._desktop.getComponents()))
        for doc in docs:
            try:
                if hasattr(doc, "setModified"):
                    doc.setModified(False)
                doc.close(True)
            except Exception:  # a vetoed or half-dead document: dispose is the hard way out
                doc.dispose()
        return len(docs)

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
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:  # stuck in the kernel (D state): nothing more to do here
                pass
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

