"""How an application API call (`CalcTools.set_cell_value(...)`) is carried out on a live document.

An app module (e.g. `apis/calc.py`) declares two classes: the stub class the model sees
(`@register_api class CalcTools`, signatures and one-line docs) and its implementation
(`@implements("CalcTools") class CalcApi(AppApi)`), whose methods have the same names and
parameters and act on the focused document over UNO. Implementations run only inside a
desktop's env server, on LibreOffice's main thread (see `Office.on_main_thread`); the `uno`
module is imported inside them, so the parser and the trainer never need LibreOffice.
"""

from __future__ import annotations

import inspect
from pathlib import PurePosixPath
from typing import Any, ClassVar

from computerrl.apis.kit import ApiError, in_home  # noqa: F401 (ApiError: re-exported)
from computerrl.apis.registry import REGISTRY
from computerrl.data.registry import Registry


class AppApi:
    """Base of an implementation: one instance per call, bound to the focused document.

    Paths are the desktop's (/home/user/…): checked as text here, and looked up only by
    LibreOffice itself, inside the desktop's sandbox (`ctx`'s SimpleFileAccess)."""

    app: ClassVar[str]  # focused app it needs: "calc", "writer" or "impress"
    service: ClassVar[str]  # UNO service the document must support
    noun: ClassVar[str] = "document"  # what messages call it ("workbook", "presentation")
    save_as_hint: ClassVar[str] = "use Save As (ctrl+shift+s) to choose one"  # for a document with no file yet

    def __init__(self, doc: Any, ctx: Any):
        self.doc, self.ctx = doc, ctx  # ctx: the office's UNO component context

    def path(self, given: str, what: str = "file_path") -> PurePosixPath:
        """A path the model gave, on this desktop: only inside its home folder (/home/user/…)."""
        try:
            if not given.startswith(("/", "~")):
                raise ValueError("relative")  # the model must say where: relative paths are ambiguous
            return in_home(given)
        except ValueError:
            raise ApiError(f"{what} {given!r} must be in the home folder, like /home/user/report.pdf") from None

    def existing(self, given: str, what: str = "file_path") -> PurePosixPath:
        path = self.path(given, what)
        if not self.is_file(path):
            raise ApiError(f"no file at {given!r}")
        return path

    def _files(self):
        return self.ctx.ServiceManager.createInstanceWithContext("com.sun.star.ucb.SimpleFileAccess", self.ctx)

    def is_file(self, path: PurePosixPath) -> bool:
        url = self.url(path)
        files = self._files()
        return files.exists(url) and not files.isFolder(url)

    def is_dir(self, path: PurePosixPath) -> bool:
        url = self.url(path)
        files = self._files()
        return files.exists(url) and files.isFolder(url)

    def url(self, path: PurePosixPath) -> str:
        """The file URL LibreOffice (in the desktop's sandbox) knows `path` by."""
        import uno

        return uno.systemPathToFileUrl(str(path))

    def local(self, url: str) -> PurePosixPath:
        """The path of a document's URL (a document outside home is refused)."""
        import uno

        return self.path(uno.fileUrlToSystemPath(url), "the document's location")

    def store(self, path: PurePosixPath, filter_name: str, *, to: bool = True, **extra) -> None:
        """Write the document to `path` with a filter: a copy (storeToURL), or with `to` False, as its
        new file (storeAsURL). `extra`: the filter's other properties."""
        from com.sun.star.beans import PropertyValue

        props = [PropertyValue(Name="FilterName", Value=filter_name)]
        props += [PropertyValue(Name=k, Value=v) for k, v in extra.items()]
        try:
            (self.doc.storeToURL if to else self.doc.storeAsURL)(self.url(path), tuple(props))
        except Exception as e:  # noqa: BLE001 - an IOException from UNO: a path it cannot write
            raise ApiError(f"could not write {path}: {getattr(e, 'Message', e) or type(e).__name__}") from None

    def save(self) -> str:
        """The stub's `save()`, for every app: the document to its own file, in its format."""
        if not self.doc.hasLocation():
            raise ApiError(f"the {self.noun} has no file yet; {self.save_as_hint}")
        try:
            self.doc.store()
        except Exception as e:  # noqa: BLE001 - an IOException from UNO: a read-only or vanished file
            raise ApiError(f"could not save: {getattr(e, 'Message', e) or type(e).__name__}") from None
        return f"Saved {self.doc.getLocation()}"

    @classmethod
    def app_info(cls, doc: Any, max_chars: int) -> str:
        """What the observation's `app_info` says about this document ('' = nothing)."""
        return ""


class DesktopApi:
    """Base of an implementation that acts on its app through the desktop, not on a document over UNO
    (the browser, VLC). One instance per call, bound to the env server's desktop, which it uses only
    through these (this package never imports the env side):
        desktop.devtools()      the browser's DevTools (tabs, open, activate, close)
        desktop.press(keys)     a key combination, pressed in the focused window
        desktop.vlc(path)       a page of VLC's HTTP interface (bytes), None when no VLC answers
        desktop.vscode(args)    VS Code's command line (its output); opens_window=True starts VS Code if needed
        desktop.sandbox         read(path), write(path, data), run(argv, env=desktop.env, …)
    Unreachable apps raise `AppUnreachable`."""

    app: ClassVar[str]  # the focused app whose API this is ("chromium", "vlc")

    def __init__(self, desktop: Any):
        self.desktop = desktop

    def app_info(self, max_chars: int) -> str:
        """What the observation's `app_info` says about the app ('' = nothing)."""
        return ""


IMPLEMENTATIONS = Registry("app API")  # API class name -> implementation


def implements(api: str):
    """Class decorator: register the implementation of the stub class `api`, checking they match."""

    def wrap(cls: type[AppApi]) -> type[AppApi]:
        for name, fn in REGISTRY.functions(api).items():
            method = getattr(cls, name, None)
            if method is None:
                raise TypeError(f"{cls.__name__} lacks {api}.{name}")
            want = list(fn.signature.parameters)
            got = list(inspect.signature(method).parameters)[1:]  # without self
            if got != want:
                raise TypeError(f"{cls.__name__}.{name}{tuple(got)} does not match {api}.{name}{tuple(want)}")
        return IMPLEMENTATIONS.add(api, cls)

    return wrap


def api_for_app(app: str) -> str | None:
    """The API class shown to the model when `app` ("calc", …) is focused."""
    return next((api for api, impl in IMPLEMENTATIONS.items() if impl.app == app), None)
