"""One LibreOffice process per desktop, driven over UNO through a named pipe.

soffice.bin is started directly (not the `soffice` wrapper, whose oosplash parent would hide
the real pid and restart a killed office behind our back). Its user profile lives outside the
desktop's home, so resetting the home folder never touches it; the profile is seeded so no
first-start wizard, tip-of-the-day or document-recovery dialog ever shows.
"""

from __future__ import annotations

import os
import subprocess
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

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    @property
    def desktop(self):
        if not self.running:
            self.start()
        return self._desktop

    def open_app(self, app: str) -> None:
        self.desktop.loadComponentFromURL(FACTORIES[app], "_blank", 0, ())

    def open_file(self, path: Path) -> None:
        self.desktop.loadComponentFromURL(path.as_uri(), "_blank", 0, ())

    def close_documents(self) -> int:
        """Close every open document without saving; returns how many were closed."""
        if not self.running:
            return 0
        docs = list(_iterate(self._desktop.getComponents()))
        for doc in docs:
            try:
                if hasattr(doc, "setModified"):
                    doc.setModified(False)
                doc.close(True)
            except Exception:  # a vetoed or half-dead document: dispose is the hard way out
                doc.dispose()
        return len(docs)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)
        self._desktop = None


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

