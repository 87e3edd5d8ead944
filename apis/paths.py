"""Paths as tasks and the model write them on OSWorld's VM, where the user's folder is /home/user.

They are sandbox paths, resolved only inside the desktop's sandbox (by LibreOffice, the keeper):
here they are normalised as text, never looked up on the env server's side.
"""

from __future__ import annotations

import posixpath
from pathlib import PurePosixPath

OSWORLD_HOME = "/home/user"  # the user folder OSWorld's tasks name


def desktop_path(path: str) -> str:
    """A path on the desktop: ~/… and relative paths are in /home/user; absolute ones as given (normalised)."""
    p = str(path)
    if p == "~" or p.startswith("~/"):
        p = OSWORLD_HOME + p[1:]
    elif not p.startswith("/"):
        p = f"{OSWORLD_HOME}/{p}"
    return posixpath.normpath(p)


def in_home(path: str) -> PurePosixPath:
    """`desktop_path(path)` when it lies in /home/user; ValueError for anything outside it (`..` included)."""
    p = desktop_path(path)
    if p != OSWORLD_HOME and not p.startswith(OSWORLD_HOME + "/"):
        raise ValueError(f"path {path!r} is outside the home folder ({OSWORLD_HOME})")
    return PurePosixPath(p)
