"""Small files written whole: a reader sees the old file or the new one, never half of one."""

from __future__ import annotations

import json
import os
from pathlib import Path


def write_atomic(path: Path | str, data: str | bytes) -> None:
    """Write `data` to a temporary name beside `path`, then rename it over `path`."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp")
    if isinstance(data, str):
        tmp.write_text(data)
    else:
        tmp.write_bytes(data)
    os.replace(tmp, path)


def append_line(path: Path | str, record: dict) -> None:
    """One JSON line more at the end of `path`, durably; a last line a kill cut short is dropped first
    (it never finished)."""
    with open(path, "a+b") as f:
        size = f.seek(0, os.SEEK_END)
        if size:
            f.seek(max(0, size - (1 << 20)))
            tail = f.read()
            if not tail.endswith(b"\n"):
                f.truncate(size - len(tail) + tail.rfind(b"\n") + 1 if b"\n" in tail else 0)
        f.write(json.dumps(record).encode() + b"\n")
        f.flush()
        os.fsync(f.fileno())
