"""The asynchronous loop (`async-rl`): a worker per desktop keeps playing groups (a task's G plays) with the
newest policy version, while a trainer thread takes the oldest complete groups whose lag is at most K, writes
them as a batch and trains the next version on it; the policy is served on the caller's thread and takes
each version between two of its batches. The stage (stages/async_rl.py) gives it its settings, desktops,
policy and trainer."""

from __future__ import annotations

import dataclasses
import json
import threading
import time
from pathlib import Path
from typing import Callable

LOOP_LOG = "loop.jsonl"
DRAWS = "draws.json"  # in a batch's folder: the draws (groups) it holds


Train = Callable[[int, Path, str], tuple[str, str]]  # (version, batch, checkpoint) -> (new checkpoint, its version)


@dataclasses.dataclass
class Group:
    draw: int  # the draw's number: its group id is <task>:<draw>
    item: object  # the TaskItem played
    trajectories: dict[int, dict] = dataclasses.field(default_factory=dict)  # sample -> journaled record

    @property
    def id(self) -> str:
        return f"{self.item.task_id}:{self.draw}"


class Loop:
    """The asynchronous loop's state and its threads: a worker per desktop, a trainer, the policy served
    on the caller's thread (`run`). `cfg`: the stage's settings (stages/async_rl.py's AsyncRLConfig)."""

    def __init__(self, cfg, items: list, pool, policy, journal, train: Train, console,
                 versions: list[str], trained: set[int]):
        import random

        self.cfg, self.pool, self.policy, self.journal, self.train = cfg, pool, policy, journal, train
        self.console, self.versions, self.trained = console, versions, trained
        self.order = list(items)
        random.Random(cfg.seed).shuffle(self.order)
        self.cond = threading.Condition()
        self.groups: dict[int, Group] = {}
        self.todo: list[tuple[int, int]] = []  # (draw, sample) to play before any new draw
        self.next_draw = 0
        self.stopping = False
        self.failure: BaseException | None = None
        self.busy = {"desktops": 0.0, "trainer": 0.0}
        self.counts = {"steps": 0, "trajectories": 0, "replayed": 0, "dropped_groups": 0}
        self.updates: list[dict] = []
        self.bar = None  # (rich Progress, its task) while `run` runs
        self._resume_journal()

    def _resume_journal(self) -> None:
        """Groups whose trajectories a killed run journaled: complete ones wait for the trainer, the rest
        are finished first."""
        played: dict[int, dict[int, dict]] = {}
        for record in self.journal.records():
            played.setdefault(record["draw"], {})[record["sample"]] = record
        for draw, records in sorted(played.items()):
            if draw not in self.trained:
                group = self.groups[draw] = Group(draw, self.order[draw % len(self.order)], records)
                self.todo += [(draw, s) for s in range(self.cfg.samples) if s not in group.trajectories]
        self.next_draw = max([*played, *self.trained], default=-1) + 1

    # --- the desktops' side ---------------------------------------------------------------------
    def _next_job(self) -> tuple[Group, int] | None:
        with self.cond:
            while not self.stopping:
                if self.todo:
                    draw, sample = self.todo.pop(0)
                    return self.groups[draw], sample
                if not self.cfg.sync or self.next_draw < len(self.versions) * self.cfg.groups:
                    draw, self.next_draw = self.next_draw, self.next_draw + 1
                    self.groups[draw] = Group(draw, self.order[draw % len(self.order)])
                    self.todo += [(draw, s) for s in range(1, self.cfg.samples)]
                    return self.groups[draw], 0
                self.cond.wait()  # sync: this version's groups are all handed out
            return None

    def worker(self) -> None:
        from computerrl.play.episode import DESKTOP_LOST
        from computerrl.play.trajectories import play_for_journal

        while (job := self._next_job()) is not None:
            group, sample = job
            t0 = time.monotonic()
            try:
                record = play_for_journal(self.pool, self.policy, group.item, sample, group.id, self.journal,
                                          f"{group.id}#{sample}", screenshots=self.policy.sees_screen,
                                          reset_holds_batch=False)
            except Exception as e:  # noqa: BLE001 - the run stops, saying why; a rerun resumes
                if not self.stopping:  # else the policy closed under the episode: the run is over
                    self._fail(e)
                return
            with self.cond:
                self.busy["desktops"] += time.monotonic() - t0
                if self.stopping:
                    return  # the policy closed under it: the episode did not end on its own
                if record["error"].startswith(DESKTOP_LOST):  # played again, on another desktop
                    self.counts["replayed"] += 1
                    self.todo.insert(0, (group.draw, sample))
                    continue
                self.journal.add(f"{group.id}#{sample}", dict(record, draw=group.draw))
                group.trajectories[sample] = record
                self.counts["trajectories"] += 1
                self.counts["steps"] += len(record["rows"])
                self._show()
                self.cond.notify_all()

    # --- the trainer's side ---------------------------------------------------------------------
    def row_lag(self, row: dict) -> int:
        """The current version minus the one that answered the row (a version not published here: 0's)."""
        return len(self.versions) - 1 - (self.versions.index(row["policy_version"])
                                         if row["policy_version"] in self.versions else 0)

    def lag(self, group: Group) -> int:
        """The lag of the oldest version that answered in the group."""
        return max((self.row_lag(r) for t in group.trajectories.values() for r in t["rows"]), default=0)

    def _take_batch(self) -> list[Group] | None:
        """The --groups oldest complete groups within the lag bound (waits for them); None when stopping."""
        with self.cond:
            while not self.stopping:
                complete = [g for d, g in sorted(self.groups.items()) if len(g.trajectories) == self.cfg.samples]
                for g in complete:
                    if self.lag(g) > self.cfg.max_lag:
                        del self.groups[g.draw]
                        self.counts["dropped_groups"] += 1
                ready = [g for g in complete if g.draw in self.groups]
                if len(ready) >= self.cfg.groups:
                    batch = ready[:self.cfg.groups]
                    for g in batch:
                        del self.groups[g.draw]
                    return batch
                self.cond.wait(timeout=1.0)
            return None

    def trainer(self) -> None:
        try:
            while len(self.versions) <= self.cfg.updates:
                version = len(self.versions)
                batch_path = self.cfg.out / f"rollout-{version}"
                if batch_path.exists():  # written before a kill, not yet trained: trained as it is
                    import datasets

                    draws, lags = batch_draws(batch_path), datasets.load_from_disk(str(batch_path))["lag"]
                    with self.cond:
                        for draw in draws:
                            self.groups.pop(draw, None)
                else:
                    batch = self._take_batch()
                    if batch is None:
                        return
                    if all(errors := [t["error"] for g in batch for t in g.trajectories.values()]):
                        raise RuntimeError(f"none of the {len(errors)} trajectories for version {version} was "
                                           f"played to its end, so there is nothing to train on; the first: "
                                           f"{errors[0]}")
                    draws, lags = [g.draw for g in batch], self._write_batch(batch, batch_path)
                t0 = time.monotonic()
                checkpoint, name = self._train(version, batch_path)
                trained_s = time.monotonic() - t0
                sync = self.policy.publish(checkpoint, name, timeout_s=self.cfg.sync_timeout)
                with self.cond:
                    self.busy["trainer"] += trained_s
                    self.versions.append(name)
                    self.trained.update(draws)
                    self._show()
                    self.cond.notify_all()
                line = {"version": version, "policy_version": name, "draws": draws, "groups": len(draws),
                        "lag_mean": sum(lags) / len(lags) if lags else None, "lag_max": max(lags, default=None),
                        "dropped_groups": self.counts["dropped_groups"], "trainer_s": trained_s,
                        "sync_wait_s": sync.waited_s, "sync_load_s": sync.load_s,
                        "grpo": json.loads((Path(checkpoint) / "summary.json").read_text())
                        if (Path(checkpoint) / "summary.json").exists() else {}}
                with open(self.cfg.out / LOOP_LOG, "a") as log:
                    log.write(json.dumps(line) + "\n")
                self.updates.append(line)
                self.console.print(f"version {version} published ({name}): {len(draws)} groups, lag "
                                   f"{line['lag_mean'] or 0:.2f} mean / {line['lag_max']} max, trained in "
                                   f"{trained_s:.0f} s, switched in {sync.load_s:.2f} s (+{sync.waited_s:.2f} s "
                                   f"waiting for the batch in flight), {self.counts['dropped_groups']} groups dropped")
        except Exception as e:  # noqa: BLE001 - the run stops, saying why; a rerun resumes
            self._fail(e)
        finally:
            self.stop()

    def _train(self, version: int, batch_path: Path) -> tuple[str, str]:
        for attempt in range(self.cfg.retries + 1):
            try:
                return self.train(version, batch_path, self._checkpoint(version - 1))
            except Exception as e:  # noqa: BLE001 - run again, up to --retries: grpo resumes from its state
                if attempt == self.cfg.retries:
                    raise
                self.console.print(f"[yellow]trainer for version {version} failed ({e}); running it again[/]")
        raise AssertionError("unreachable")

    def _checkpoint(self, version: int) -> str:
        return self.cfg.model if version == 0 else str(self.cfg.out / f"policy-{version}")

    def _write_batch(self, batch: list[Group], path: Path) -> list[int]:
        """The batch's rows as a step dataset with `lag` (atomically), and the draws it holds; the rows' lags."""
        import datasets

        from computerrl.data.datasets_io import lineage, save_atomic
        from computerrl.play.trajectories import rows_dataset

        now = len(self.versions) - 1
        rows = [dict(r, lag=self.row_lag(r)) for g in batch for s in sorted(g.trajectories)
                for r in g.trajectories[s]["rows"]]
        ds = rows_dataset(rows, self.policy.sees_screen, {"lag": datasets.Value("int32")})
        card = lineage("async-rl", self.cfg, {"tasks": str(self.cfg.tasks), "envs": str(self.cfg.envs),
                                              "model": self._checkpoint(now)})
        save_atomic(ds, path, lineage=card)
        (path / DRAWS).write_text(json.dumps([g.draw for g in batch]))
        return [r["lag"] for r in rows]

    # --- both -----------------------------------------------------------------------------------
    def _show(self) -> None:
        """The progress bar: versions published, and what the desktops have played so far."""
        if self.bar is not None:
            bar, task = self.bar
            seconds = time.monotonic() - self.started
            bar.update(task, completed=len(self.versions) - 1, shown=(
                f"{self.counts['trajectories']} trajectories · {self.counts['steps'] / seconds:.2f} steps/s · "
                f"{self.counts['dropped_groups']} groups dropped"))

    def _fail(self, e: BaseException) -> None:
        with self.cond:
            self.failure = self.failure or e
        self.stop()

    def stop(self) -> None:
        with self.cond:
            self.stopping = True
            self.cond.notify_all()

    def run(self) -> dict:
        """Workers and trainer in threads, the policy served on this one, until N versions are published."""
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        t0 = self.started = time.monotonic()
        workers = [threading.Thread(target=self.worker, name=f"desktop-{k}", daemon=True) for k in range(self.pool.size)]
        trainer = threading.Thread(target=self.trainer, name="trainer", daemon=True)
        with Progress(TextColumn("versions"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[shown]}"),
                      TimeElapsedColumn(), console=self.console) as bar:
            self.bar = bar, bar.add_task("versions", total=self.cfg.updates, completed=len(self.versions) - 1,
                                         shown="")
            for th in [*workers, trainer]:
                th.start()
            self.policy.serve(lambda: self.stopping)
            self.policy.close(engine=False)  # episodes in flight end now (aborted): they are not journaled
            for th in [*workers, trainer]:
                th.join(timeout=120)
        wall = time.monotonic() - t0  # the desktops' last episodes included: busy ≤ wall
        if self.failure is not None:
            raise self.failure
        lags = [u["lag_max"] for u in self.updates if u["lag_max"] is not None]
        return {"wall_s": wall, "versions": len(self.versions) - 1, "updates": len(self.updates),
                "desktops": self.pool.size, **self.counts,
                "steps_per_s": self.counts["steps"] / wall,
                "desktop_busy": self.busy["desktops"] / (wall * self.pool.size),
                "trainer_busy": self.busy["trainer"] / wall,
                "lag_mean": _mean([u["lag_mean"] for u in self.updates if u["lag_mean"] is not None]),
                "lag_max": max(lags, default=None), "sync_load_s": _mean([u["sync_load_s"] for u in self.updates]),
                "sync": self.cfg.sync, "max_lag": self.cfg.max_lag}


def _mean(xs: list) -> float | None:
    return sum(xs) / len(xs) if xs else None


def batch_draws(batch: Path) -> list[int]:
    """The draws (groups) a batch written for the trainer holds."""
    return json.loads((batch / DRAWS).read_text())
