"""Resumable work: a journal of what is finished, and the one driver that works through the rest.

Every stage that does long work item by item (rollout and eval play trajectories, `tasks build` replays
reference solutions, `build-apis` builds APIs) journals each finished item as it comes, so a run killed
half-way is rerun with the same command and does only what is left.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import threading
import time
from pathlib import Path
from typing import Any, Callable, Sequence

from computerrl.data.files import write_atomic


class Journal:
    """A folder: `run.json`, the settings the work began with, and one JSON record per finished item
    (written to a temporary name, then renamed: a kill leaves a whole record or none). Files an item
    keeps beside its record (screenshots) are named by `path(name, suffix)`.

    A run with other settings does not resume it: it is refused, naming the settings that differ, or,
    with `restart`, the old journal is removed and the work starts afresh."""

    def __init__(self, folder: Path | str, settings: dict, *, restart: bool = False):
        self.folder = Path(folder)
        settings = json.loads(json.dumps(settings, default=str))  # as it reads back from run.json
        card = self.folder / "run.json"
        if card.exists() and (before := json.loads(card.read_text())) != settings:
            if not restart:
                changed = sorted(k for k in before.keys() | settings.keys() if before.get(k) != settings.get(k))
                raise ValueError(f"{self.folder} holds work begun with other settings ({', '.join(changed)}): rerun "
                                 "with those to resume it, or start afresh (--overwrite)")
            self.remove()
        self.folder.mkdir(parents=True, exist_ok=True)
        write_atomic(card, json.dumps(settings, indent=1))

    def path(self, name: str, suffix: str = ".json") -> Path:
        return self.folder / f"item-{hashlib.sha256(name.encode()).hexdigest()[:16]}{suffix}"

    def has(self, name: str) -> bool:
        return self.path(name).exists()

    def get(self, name: str) -> dict:
        return json.loads(self.path(name).read_text())

    def add(self, name: str, record: dict) -> None:
        write_atomic(self.path(name), json.dumps(record))

    def records(self) -> list[dict]:
        """Every record journaled, in no particular order."""
        return [json.loads(p.read_text()) for p in self.folder.glob("item-*.json")]

    def __len__(self) -> int:
        return sum(1 for _ in self.folder.glob("item-*.json"))

    def remove(self) -> None:
        """The work is whole (or abandoned): nothing to resume."""
        shutil.rmtree(self.folder, ignore_errors=True)


def work_through(journal: Journal, jobs: Sequence[tuple[str, Any]], do: Callable[[Any], dict], *, workers: int,
                 label: str, console=None, tally: Callable[[dict], dict[str, float]] = lambda record: {},
                 shown: Callable[[dict, float], str] = lambda totals, seconds: "",
                 said: Callable[[str, dict], str] = lambda name, record: "",
                 on_done: Callable[[dict], None] = lambda totals: None,
                 serve: Callable[[Callable[[], bool]], None] | None = None) -> None:
    """Do every (name, job) the journal lacks, `workers` at a time, journaling each record `do(job)` gives.

    One progress bar: `label`, jobs done of all, then `shown(totals, seconds)`, where totals add up
    `tally(record)` over the records of this run (and `done`, their count); `said(name, record)`, when
    not empty, is printed above the bar; `on_done(totals)` hears each. `serve(until)`, when given, runs on
    this thread while the workers work (a model policy answers their batches there). A job that raises
    is reported and left to a rerun; once the others are done, the first such error is raised."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    todo = [(name, job) for name, job in jobs if not journal.has(name)]
    if len(todo) < len(jobs):
        (console.print if console else print)(f"resuming: {len(jobs) - len(todo)} of {len(jobs)} {label} already done")
    lock, pending, failed = threading.Lock(), list(todo), []  # failed: (name, exception)
    totals: dict[str, float] = {"done": 0}
    t0 = time.monotonic()
    with Progress(TextColumn(label), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[shown]}"),
                  TimeElapsedColumn(), console=console) as bar:
        job_bar = bar.add_task(label, total=len(jobs), completed=len(jobs) - len(todo), shown="")

        def worker() -> None:
            while True:
                with lock:
                    if not pending:
                        return
                    name, job = pending.pop(0)
                try:
                    record = do(job)
                except Exception as e:  # noqa: BLE001 - one job's failure is reported, the others go on
                    with lock:
                        failed.append((name, e))
                        bar.console.print(f"[red]failed[/] {name}: {type(e).__name__}: {e}", highlight=False)
                    continue
                journal.add(name, record)
                with lock:
                    for key, value in tally(record).items():
                        totals[key] = totals.get(key, 0) + value
                    totals["done"] += 1
                    if line := said(name, record):
                        bar.console.print(line, highlight=False)
                    bar.update(job_bar, advance=1, shown=shown(totals, time.monotonic() - t0))
                    on_done(dict(totals))

        threads = [threading.Thread(target=worker, name=f"{label}-{k}", daemon=True)
                   for k in range(max(1, min(workers, len(todo))))]
        for th in threads:
            th.start()
        if serve is not None:
            serve(lambda: not any(th.is_alive() for th in threads))
        for th in threads:
            th.join()
    if failed:
        first = failed[0][1]
        first.add_note(f"{len(failed)} of the {label} failed (see above), the others are journaled: rerun the "
                       "same command to resume")
        raise first
