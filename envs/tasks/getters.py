"""Getters of OSWorld evaluators: what a metric compares, fetched from the desktop or the cache.

A getter returns a local file path (the metric opens it), a string or the rule object; a file
the episode never produced is `None`, which every metric scores 0. Getters read the desktop
through its keeper and run their commands beside it (`Budget.trusted`), out of the agent's reach.
Each declares its parameters, checked when the task loads.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from computerrl.envs.tasks.registry import GETTERS
from computerrl.envs.tasks.setup import (Budget, Parameters, SetupError, _command, _flag, _string, cached,
                                         desktop_path, execute)

if TYPE_CHECKING:
    from computerrl.envs.desktop import Desktop


FILE_LIMIT = 256 << 20  # bytes of a file copied out of a desktop to be scored
GETTER_PARAMETERS: dict[str, Parameters] = {}  # getter type -> its parameters (beside "type")


def _any(v) -> str:
    return ""


def getter(name: str, **parameters: tuple):
    """Register a getter with its parameters: name=(check, required)."""
    def wrap(fn):
        GETTERS.add(name, fn)
        GETTER_PARAMETERS[name] = parameters
        return fn

    return wrap


@getter("vm_file", path=(_string, True), dest=(_string, False))
def vm_file(desktop: "Desktop", spec: dict, out: Path, budget: Budget) -> str | None:
    """Copy the file out of the desktop (read as its user, in its sandbox), so the metric reads a
    snapshot, not a file being saved."""
    src = desktop_path(spec["path"])
    data = desktop.sandbox.read(src, limit=FILE_LIMIT + 1)
    if data is None:
        return None
    if len(data) > FILE_LIMIT:
        raise SetupError(f"{src} is larger than {FILE_LIMIT >> 20} MB")
    dest = Path(tempfile.mkdtemp(dir=out)) / Path(spec.get("dest") or src).name  # one folder each: no clashes
    dest.write_bytes(data)
    return str(dest)


@getter("cloud_file", path=(_string, True), dest=(_string, False))
@getter("cache_file", path=(_string, True), dest=(_string, False))
def cloud_file(desktop: "Desktop", spec: dict, out: Path, budget: Budget) -> str:
    return str(cached(desktop, spec["path"]))


@getter("rule", rules=(_any, True))
def rule(desktop: "Desktop", spec: dict, out: Path, budget: Budget) -> Any:
    return spec.get("rules")


@getter("vm_command_line", command=(_command, True), shell=(_flag, False))
def vm_command_line(desktop: "Desktop", spec: dict, out: Path, budget: Budget) -> str:
    return execute(desktop, budget, spec["command"], spec.get("shell", False))


@getter("vm_terminal_output")
def vm_terminal_output(desktop: "Desktop", spec: dict, out: Path, budget: Budget) -> str | None:
    return desktop.terminal_output()


def fetch(desktop: "Desktop", spec: dict | None, out: Path, budget: Budget) -> Any:
    if spec is None:
        return None
    try:
        return GETTERS[spec["type"]](desktop, spec, out, budget)
    except SetupError:
        raise
    except (KeyError, OSError) as e:
        raise SetupError(f"getter {spec.get('type')!r} failed: {type(e).__name__}: {e}") from None


from computerrl.envs.tasks import chrome, relative_time  # noqa: E402,F401 - register their steps and getters
