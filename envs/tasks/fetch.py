"""`computerrl tasks fetch`: every file a folder of tasks downloads, into a file cache env servers read
with `--cache` (nothing is fetched at run time).

The cache is a folder with index.json (URL → file in the folder), the same one `tasks build` writes.
Each file is written to a temporary name and renamed, and the index is rewritten (atomically) after
each one, so a fetch that is killed keeps what it finished and a rerun fetches only what is missing.
A URL that fails is named with why; the others go on.
"""

from __future__ import annotations

import hashlib
import http.client
import json
import os
import urllib.error
import urllib.request
from pathlib import Path, PurePosixPath
from urllib.parse import urlparse

from computerrl.data.files import write_atomic
from computerrl.envs.tasks import getters  # noqa: F401 - registers the steps, and the files they bring
from computerrl.envs.tasks.setup import STEP_FILES
from computerrl.envs.tasks.task import Task

CHUNK = 1 << 20


def task_urls(task: Task) -> list[str]:
    """The http(s) URLs a task copies files from: download steps, the files steps bring of their own
    (update_browse_history's empty History) and cloud_file getters (multi too)."""
    steps = task.config + task.evaluator.get("postconfig", [])
    urls = [f.get("url") for s in steps if s.get("type") == "download"
            for f in s.get("parameters", {}).get("files", []) if isinstance(f, dict)]
    urls += [url for s in steps for url in STEP_FILES.get(s.get("type"), [])]
    for g in task.getters:
        if g.get("type") == "cloud_file":
            urls += g["path"] if isinstance(g.get("path"), list) else [g.get("path")]
    return [u for u in dict.fromkeys(urls) if isinstance(u, str) and urlparse(u).scheme in ("http", "https")]


def cache_name(url: str) -> str:
    """Where a URL's file lives in the cache: a short hash (two URLs, one name) and the URL's file name."""
    name = PurePosixPath(urlparse(url).path).name or "file"
    return f"files/{hashlib.sha256(url.encode()).hexdigest()[:16]}-{name[-80:]}"


class Cache:
    def __init__(self, folder: Path):
        self.folder = Path(folder)
        self.index_path = self.folder / "index.json"
        self.index: dict[str, str] = json.loads(self.index_path.read_text()) if self.index_path.exists() else {}

    def has(self, url: str) -> bool:
        """Whether the cache holds the URL's file, inside the cache (as env servers will look for it)."""
        if url not in self.index:
            return False
        path = (self.folder / self.index[url]).resolve()
        return path.is_relative_to(self.folder.resolve()) and path.is_file()

    def add(self, url: str, fetch) -> int:
        """Write `fetch(file)`'s bytes for `url` (atomically), then record it in the index; the size."""
        rel = cache_name(url)
        path = self.folder / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.part")
        try:
            with open(tmp, "wb") as f:
                size = fetch(f)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        finally:
            tmp.unlink(missing_ok=True)
        self.index[url] = rel
        write_atomic(self.index_path, json.dumps(self.index, indent=0, sort_keys=True))
        return size


def download(url: str, timeout_s: float):
    """A `fetch` for Cache.add: the URL's body streamed into the file; OSError (with why) on failure."""
    def fetch(f) -> int:
        request = urllib.request.Request(url, headers={"User-Agent": "computerrl-tasks-fetch"})
        try:
            with urllib.request.urlopen(request, timeout=timeout_s) as reply:
                total, announced = 0, reply.headers.get("Content-Length")
                while chunk := reply.read(CHUNK):
                    f.write(chunk)
                    total += len(chunk)
                if announced is not None and announced.isdigit() and int(announced) != total:
                    raise OSError(f"cut short: {total} of {announced} bytes")
                return total
        except urllib.error.HTTPError as e:
            raise OSError(f"HTTP {e.code} {e.reason}") from None
        except urllib.error.URLError as e:
            raise OSError(str(e.reason)) from None
        except TimeoutError:
            raise OSError(f"no answer within {timeout_s:.0f} s") from None
        except (http.client.HTTPException, ValueError) as e:  # a malformed URL or reply: that URL's problem
            raise OSError(f"{type(e).__name__}: {e}") from None
    return fetch
