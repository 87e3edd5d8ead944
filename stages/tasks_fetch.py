"""`computerrl tasks fetch`: every file a folder of task files needs (download steps, cloud_file getters) into a
file cache for env servers' --cache: atomic, resumable (a rerun fetches only what is missing), a clear error
per URL. Task files are treated as hostile (`tasks/fetch.py`): http(s) only, every hop (redirects too) to
public addresses only unless --allow-host names one with its port, a size cap per file, one deadline per URL;
only regular *.json files inside FOLDER are read.

Reads:  FOLDER (*.json task files, recursively).
Writes: --cache (the files, and index.json mapping each URL to its file).

    computerrl tasks fetch ../shared/osworld --cache runs/osworld-files
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from computerrl.data.config import setting


@dataclasses.dataclass
class FetchConfig:
    folder: Path = setting(Path("."), "Folder searched recursively for *.json task files (regular files only: a "
                                      "FIFO, socket or device is skipped, never opened).", argument=True)
    cache: Path = setting(Path("runs/files"), "The file cache: a folder whose index.json maps each URL to a file.")
    timeout_s: float = setting(60.0, "Seconds one URL may take in all (redirects, headers and body; not per read) "
                                     "before it counts as failed.")
    max_mb: float = setting(512.0, "Largest file to keep, in MiB: a bigger one is refused and nothing of it kept.")
    allow_host: list[str] = setting([], "An address or network with its port (192.168.1.20:8080, 10.0.0.0/8:443, "
                                        "[::1]:8000) to fetch from although it is not public, e.g. a mirror on your "
                                        "LAN; repeat for more. Every redirect is still checked: other ports of the "
                                        "same host stay refused.", metavar="ADDRESS:PORT")

    def __post_init__(self):
        from computerrl.tasks.fetch import allowed_hosts

        self.folder, self.cache = Path(self.folder), Path(self.cache)
        try:
            self.allowed = allowed_hosts(self.allow_host or [])
        except ValueError as e:  # a usage error naming the option and the entry
            raise ValueError(f"--allow-host: {e}") from None
        if not all(0 < x < float("inf") for x in (self.timeout_s, self.max_mb)):
            raise ValueError("--timeout-s and --max-mb must be positive numbers")


def run(cfg: FetchConfig, console=None) -> dict[str, str]:
    """Fetch what the task files of `cfg.folder` need and is not in `cfg.cache` yet: the URLs that failed, each
    with its error. ValueError: no task file under FOLDER."""
    import sys

    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from computerrl.tasks.fetch import Cache, download, folder_urls

    files, urls, skipped = folder_urls(cfg.folder)
    for line in skipped:
        print(f"skipped {line}", file=sys.stderr)
    if not files:
        raise ValueError(f"no regular *.json files under {cfg.folder}")
    store = Cache(cfg.cache)
    todo = [u for u in urls if not store.has(u)]
    console = console or Console(soft_wrap=True)
    console.print(f"{len(files)} task files need {len(urls)} files: {len(urls) - len(todo)} already in {cfg.cache}, "
                  f"{len(todo)} to fetch")
    failed = {}
    with Progress(TextColumn("[bold]fetch"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=console) as progress:
        files_bar = progress.add_task("files", total=len(todo))
        for url in todo:
            try:
                store.add(url, download(url, timeout_s=cfg.timeout_s, max_bytes=int(cfg.max_mb * 2**20),
                                        allow=cfg.allowed))
            except OSError as e:
                failed[url] = str(e)
                progress.console.print(f"[red]failed[/] {url}: {e}", highlight=False)
            progress.advance(files_bar)
    console.print(f"fetched {len(todo) - len(failed)}, failed {len(failed)}; serve them with --cache {cfg.cache}")
    return failed
