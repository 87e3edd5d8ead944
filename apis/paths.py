"""Paths that tasks and the model write as on OSWorld's VM, mapped onto one desktop's home folder."""

from __future__ import annotations

from pathlib import Path

OSWORLD_HOME = "/home/user"  # the user folder OSWorld's tasks name


def in_home(home: Path, path: str) -> Path:
    """`/home/user/…` or `~/…` (or a relative path) inside `home`; ValueError for anything outside it."""
    p = str(path)
    for prefix in (OSWORLD_HOME, "~"):
        if p == prefix or p.startswith(prefix + "/"):
            p = p[len(prefix):].lstrip("/")
            break
    else:
        if p.startswith("/") and not Path(p).resolve().is_relative_to(home.resolve()):
            raise ValueError(f"path {path!r} is outside the home folder ({OSWORLD_HOME})")
    resolved = (home / p).resolve()
    if not resolved.is_relative_to(home.resolve()):
        raise ValueError(f"path {path!r} leaves the home folder")
    return resolved


def as_osworld(home: Path, path: Path) -> str:
    """How the agent should see a path of this desktop: under /home/user."""
    try:
        return f"{OSWORLD_HOME}/{path.resolve().relative_to(home.resolve())}"
    except ValueError:
        return str(path)
