"""Getters of OSWorld evaluators: what a metric compares, fetched from the desktop or the cache.

A getter returns a local file path (the metric opens it), a string or the rule object; a file
the episode never produced is `None`, which every metric scores 0. Getters read the desktop
through its keeper and run their commands beside it (`Budget.trusted`), out of the agent's reach.
Each declares its parameters, checked when the task loads.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from computerrl.tasks.registry import GETTERS
from computerrl.tasks.setup import (Budget, Parameters, SetupError, cached, check_command, check_flag,
                                    desktop_path, execute)

if TYPE_CHECKING:
    from computerrl.envs.desktop.desktop import Desktop


FILE_LIMIT = 256 << 20  # bytes of a file copied out of a desktop to be scored
GETTER_PARAMETERS: dict[str, Parameters] = {}  # getter type -> its parameters (beside "type")


def check_any(v) -> str:
    return ""


def getter(name: str, **parameters: tuple):
    """Register a getter with its parameters: name=(check, required)."""
    def wrap(fn):
        GETTERS.add(name, fn)
        GETTER_PARAMETERS[name] = parameters
        return fn

    return wrap


def _one_or_more(v) -> str:
    ok = isinstance(v, str) and v or isinstance(v, list) and v and all(isinstance(x, str) and x for x in v)
    return "" if ok else "expected a non-empty string, or (with multi) a list of them"


def _indices(v) -> str:
    return "" if isinstance(v, list) and all(isinstance(i, int) for i in v) else "expected a list of indices"


def _files(spec: dict) -> tuple[list[str], list[str | None], list[int]]:
    """(paths, dests, the indices the metric is given): one file, or with `multi` lists of them."""
    if spec.get("multi"):
        paths = spec["path"] if isinstance(spec["path"], list) else [spec["path"]]
        dests = spec.get("dest") if isinstance(spec.get("dest"), list) else [None] * len(paths)
    elif isinstance(spec["path"], list):
        raise SetupError(f"getter {spec.get('type')!r}: a list of paths needs \"multi\": true")
    else:
        paths, dests = [spec["path"]], [spec.get("dest")]
    return paths, dests, spec.get("gives", [0])


def _given(files: list[str | None]) -> str | None | list[str | None]:
    return files[0] if len(files) == 1 else files  # as OSWorld's: one file alone, several as a list


OSWORLD_OFFICE_PROFILE = "/home/user/.config/libreoffice/4"  # LibreOffice's profile on OSWorld's VM


def _office_profile(desktop: "Desktop", path: str) -> str:
    """A file of LibreOffice's profile where OSWorld's tasks look for it (its settings,
    registrymodifications.xcu), read where this desktop's office keeps its profile."""
    if path == OSWORLD_OFFICE_PROFILE or path.startswith(OSWORLD_OFFICE_PROFILE + "/"):
        return desktop.office.profile + path[len(OSWORLD_OFFICE_PROFILE):]
    return path


@getter("vm_file", path=(_one_or_more, True), dest=(_one_or_more, False), multi=(check_flag, False),
        gives=(_indices, False))
def vm_file(desktop: "Desktop", spec: dict, out: Path, budget: Budget) -> str | None | list[str | None]:
    """Copy the files out of the desktop (read as its user, in its sandbox), so the metric reads a
    snapshot, not a file being saved; together in one folder under their `dest` names (a metric may
    look for one beside another). A file the episode did not produce is None."""
    from computerrl.envs.desktop.sandbox import SandboxError

    paths, dests, gives = _files(spec)
    folder, given = Path(tempfile.mkdtemp(dir=out)), []  # one folder each call: no clashes
    for i, (path, dest) in enumerate(zip(paths, dests)):
        src = _office_profile(desktop, desktop_path(path))
        target = folder / Path(dest or src).name
        try:  # in pieces: a file of hundreds of MB never sits whole in the server's memory
            copied = desktop.sandbox.copy_out(src, target, FILE_LIMIT)
        except SandboxError as e:
            raise SetupError(str(e)) from None
        if i in gives:
            given.append(str(target) if copied is not None else None)
    return _given(given)


def _file_name(v) -> str:
    return "" if isinstance(v, str) and v and "/" not in v and v not in (".", "..") else "expected a file name"


@getter("gimp_config_file", file_name=(_file_name, True), dest=(_one_or_more, False))
def gimp_config_file(desktop: "Desktop", spec: dict, out: Path, budget: Budget) -> str | None:
    """A file of GIMP's profile (gimprc, sessionrc), which GIMP writes when it quits."""
    return vm_file(desktop, {"path": f"/home/user/.config/GIMP/2.10/{spec['file_name']}",
                             "dest": spec.get("dest") or spec["file_name"]}, out, budget)


@getter("cloud_file", path=(_one_or_more, True), dest=(_one_or_more, False), multi=(check_flag, False),
        gives=(_indices, False))
@getter("cache_file", path=(_one_or_more, True), dest=(_one_or_more, False), multi=(check_flag, False),
        gives=(_indices, False))
def cloud_file(desktop: "Desktop", spec: dict, out: Path, budget: Budget) -> str | list[str]:
    """The cached files, copied side by side under their `dest` names, as OSWorld's cache holds them (a
    metric may look for one beside another: the CSV a sheet printed to, beside its book)."""
    paths, dests, gives = _files(spec)
    folder, given = Path(tempfile.mkdtemp(dir=out)), []
    for i, (url, dest) in enumerate(zip(paths, dests)):
        source = cached(desktop, url)
        target = folder / Path(dest or source.name).name
        shutil.copyfile(source, target)
        if i in gives:
            given.append(str(target))
    return _given(given)


@getter("rule", rules=(check_any, True))
def rule(desktop: "Desktop", spec: dict, out: Path, budget: Budget) -> Any:
    return spec.get("rules")


@getter("vm_command_line", command=(check_command, True), shell=(check_flag, False))
def vm_command_line(desktop: "Desktop", spec: dict, out: Path, budget: Budget) -> str:
    return execute(desktop, budget, spec["command"], spec.get("shell", False))


@getter("vm_terminal_output")
def vm_terminal_output(desktop: "Desktop", spec: dict, out: Path, budget: Budget) -> str | None:
    return desktop.terminal_output()


@getter("accessibility_tree")
def accessibility_tree(desktop: "Desktop", spec: dict, out: Path, budget: Budget) -> str | None:
    """The whole desktop's accessibility tree as OSWorld's XML (envs/desktop/a11y_xml.py); None when the bus
    fails (an application that hangs it), which the metrics score 0."""
    from computerrl.envs.desktop.a11y import A11yError

    try:
        return desktop.a11y_xml()
    except A11yError as e:
        desktop.setup_notes.append(f"accessibility_tree: {e}")
        return None


def fetch(desktop: "Desktop", spec: dict | None, out: Path, budget: Budget) -> Any:
    if spec is None:
        return None
    try:
        return GETTERS[spec["type"]](desktop, spec, out, budget)
    except SetupError:
        raise
    except (KeyError, OSError) as e:
        raise SetupError(f"getter {spec.get('type')!r} failed: {type(e).__name__}: {e}") from None
