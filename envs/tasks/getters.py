"""Getters of OSWorld evaluators: what a metric compares, fetched from the desktop or the cache.

A getter returns a local file path (the metric opens it), a string or the rule object; a file
the episode never produced is `None`, which every metric scores 0.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from computerrl.envs.tasks.registry import GETTERS
from computerrl.envs.tasks.setup import SetupError, cached, desktop_path, execute

if TYPE_CHECKING:
    from computerrl.envs.desktop import Desktop


getter = GETTERS.register


@getter("vm_file")
def vm_file(desktop: "Desktop", spec: dict, out: Path) -> str | None:
    """Copy the file out of the desktop (read as its user, in its sandbox), so the metric reads a
    snapshot, not a file being saved."""
    src = desktop_path(spec["path"])
    data = desktop.sandbox.read(src)
    if data is None:
        return None
    dest = Path(tempfile.mkdtemp(dir=out)) / Path(spec.get("dest") or src).name  # one folder each: no clashes
    dest.write_bytes(data)
    return str(dest)


@getter("cloud_file")
@getter("cache_file")
def cloud_file(desktop: "Desktop", spec: dict, out: Path) -> str:
    return str(cached(desktop, spec["path"]))


@getter("rule")
def rule(desktop: "Desktop", spec: dict, out: Path) -> Any:
    return spec.get("rules")


@getter("vm_command_line")
def vm_command_line(desktop: "Desktop", spec: dict, out: Path) -> str:
    return execute(desktop, spec["command"], spec.get("shell", False))


@getter("vm_terminal_output")
def vm_terminal_output(desktop: "Desktop", spec: dict, out: Path) -> str | None:
    return desktop.terminal_output()


def fetch(desktop: "Desktop", spec: dict | None, out: Path) -> Any:
    if spec is None:
        return None
    try:
        return GETTERS[spec["type"]](desktop, spec, out)
    except SetupError:
        raise
    except (KeyError, OSError) as e:
        raise SetupError(f"getter {spec.get('type')!r} failed: {type(e).__name__}: {e}") from None
