"""`computerrl async-rl`: rollout and training at once. The desktops keep playing while the trainer
trains, each answer from the newest policy version the live engine holds.

    a worker per desktop ── trajectories ──▶ groups (G plays of a task) ── lag ≤ K ──▶ trainer (`grpo`)
            ▲                                                                            │
            └──── live engine (ModelPolicy.publish: weights switched in place) ◀── policy-v

- The live engine is the policy every episode asks (`policy.agent.ModelPolicy`, served by this
  process's main thread). A new version is switched in between two of its batches: its weights
  loaded in place (`Engine.load_weights`), the caches of the old ones dropped; each switch is timed,
  and one that does not finish within --sync-timeout fails the run, saying so.
- Groups: tasks are drawn in a seeded order, round after round; each draw is played G times
  (--samples) and is complete when its G trajectories are. A trajectory whose desktop was lost is
  played again (the pool replaces the desktop): it costs its episode, never a training step.
- The trainer takes the --groups oldest complete groups whose lag — the current version minus the
  oldest version that answered in them — is at most --max-lag (older ones are dropped, counted),
  writes them as OUT/rollout-v (the step schema plus `lag`, the lag each row was trained at) and runs
  `computerrl grpo` on them from policy-(v-1) to OUT/policy-v, a process of its own (--launcher);
  GRPO recomputes πold for rows an older version sampled and weighs the lag with truncated importance
  weights (their mean and clip fraction are in its summary). Desktops never wait for the trainer, and
  a reset does not hold the other desktops' batches.
- `--sync` plays the textbook way, for comparison: each version's groups are played, then trained
  on while the desktops wait.

The outputs are `rollout` and `grpo`'s own (step datasets, checkpoints with lineage), so `eval`,
`filter-success`, `sft` and the schedule take them as they are. Killed, rerun the same command: the
journaled trajectories and the published checkpoints are kept, a batch written but not trained is
trained (grpo resumes from its state), and a trainer process that fails is run again (--retries).

Reads:  --tasks, --envs (a spawn-envs run), --model (the starting policy).
Writes: OUT/policy-1..N and OUT/rollout-1..N; OUT/loop.jsonl, a line per update (version, groups, lag,
        dropped groups, weight sync and trainer seconds, grpo's figures); OUT/summary.json (wall time,
        steps/s, the desktops' and the trainer's busy shares, lag, sync times).

    computerrl async-rl --tasks runs/tasks/train --envs runs/envs --model runs/sft-bc --samples 4 --groups 4 \\
        --updates 2 --max-lag 1 --out runs/async
"""

from __future__ import annotations

import dataclasses
import json
import shlex
import sys
import threading
import time
from pathlib import Path
from typing import Callable

from computerrl.data.config import setting
from computerrl.stages.playing import PlayConfig

LOOP_LOG = "loop.jsonl"
DRAWS = "draws.json"  # in a batch's folder: the draws (groups) it holds


@dataclasses.dataclass
class AsyncRLConfig(PlayConfig):
    tasks: Path = Path("runs/tasks/train")
    out: Path = setting(Path("runs/async"), "Run folder: OUT/policy-v, OUT/rollout-v, the loop's log and summary.",
                        "--out", "-o")
    samples: int = 4  # G
    max_steps: int = 8
    temperature: float = 1.0
    groups: int = setting(4, "Groups (a task's G trajectories) per update.")
    updates: int = setting(2, "Policy versions to train and publish.")
    max_lag: int = setting(1, "K: a group is trained on only while the current version is at most K past the "
                              "oldest version that answered in it; older ones are dropped.")
    sync: bool = setting(False, "Play each version's groups, then train while the desktops wait (the synchronous "
                                "loop, to compare).")
    launcher: str = setting("", "The trainer's command up to `-m computerrl.cli.main grpo …` ('' = this Python; "
                                "e.g. 'accelerate launch --config_file configs/accelerate/ddp.yaml', or "
                                ".venv/bin/python beside .venv-vllm's engine).")
    grpo: list[str] = setting([], "A setting of each update, KEY=VALUE by `computerrl grpo`'s option names (repeat): "
                                  "e.g. lr=5e-5, epochs=2, updates_per_epoch=4, train_layers=8, anchor=nll. The "
                                  "starting --model is the KL reference.")
    sync_timeout: float = setting(600.0, "Seconds a weight sync may take before the run fails, saying so.")
    retries: int = setting(2, "Times a failed trainer process is run again (it resumes from its state).")

    def __post_init__(self):
        super().__post_init__()
        if bad := [item for item in self.grpo if "=" not in item]:
            raise ValueError(f"--grpo {bad[0]!r}: expected KEY=VALUE")  # names, types, values: cli/async_rl.py
        if self.groups < 1 or self.updates < 1 or self.max_lag < 0 or self.retries < 0:
            raise ValueError("--groups and --updates must be at least 1, --max-lag and --retries at least 0")
        if self.engine == "openai":
            raise ValueError("async-rl needs a live engine it can switch to a new version: transformers, vllm or "
                             "llamacpp (an openai server's weights are its owner's)")

    @property
    def journal(self) -> Path:
        return self.out / ".journal"

    def key(self) -> dict:
        """Settings a resumed run must share (the trajectories journaled belong to them)."""
        return {k: v for k, v in super().key().items() if k not in ("out", "updates", "sync_timeout", "retries",
                                                                   "launcher")}


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
    on the caller's thread (`run`)."""

    def __init__(self, cfg: AsyncRLConfig, items: list, pool, policy, journal, train: Train, console,
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
        from computerrl.envs.service.episode import DESKTOP_LOST
        from computerrl.envs.service.trajectories import play_for_journal

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
        from computerrl.envs.service.trajectories import rows_dataset

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


def grpo_process(cfg: AsyncRLConfig, console) -> Train:
    """The trainer: `computerrl grpo` on the batch, a process of its own (--launcher); a failed one raises."""
    import subprocess

    def train(version: int, batch: Path, checkpoint: str) -> tuple[str, str]:
        from computerrl.data.config import cli_args
        from computerrl.policy.checkpoint import policy_version

        out = cfg.out / f"policy-{version}"
        command = (shlex.split(cfg.launcher) if cfg.launcher else [sys.executable]) + [
            "-m", "computerrl.cli.main", "grpo", "--rollouts", str(batch), "--model", checkpoint, "--out", str(out),
            "--ref", cfg.model, "--temperature", str(cfg.temperature or 1.0), "--seed", str(cfg.seed + version),
            *cli_args({k: {"true": True, "false": False}.get(v.lower(), v)  # booleans as grpo's flags
                       for k, _, v in (item.partition("=") for item in cfg.grpo)})]
        done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"`{shlex.join(command)}` exited with {done.returncode}:\n{done.stderr[-2000:]}")
        return str(out), policy_version(out)

    return train


def published(cfg: AsyncRLConfig) -> list[str]:
    """The policy versions so far: the starting model's, then each OUT/policy-v a run finished."""
    from computerrl.policy.checkpoint import policy_version, resolve

    versions = [policy_version(resolve(cfg.model))]
    while (cfg.out / f"policy-{len(versions)}" / "summary.json").exists():
        versions.append(policy_version(cfg.out / f"policy-{len(versions)}"))
    return versions


def run(cfg: AsyncRLConfig, console=None, *, train: Train | None = None, policy=None) -> dict:
    """The loop until --updates versions are published. `train` and `policy`: stand-ins for the GRPO
    process and the live engine (the benchmark's GPU-scale simulation)."""
    from rich.console import Console

    from computerrl.data.journal import Journal
    from computerrl.envs.fleet.pool import EnvPool
    from computerrl.envs.tasks.task_set import load_task_set, playable

    console = console or Console(soft_wrap=True)
    summary_path = cfg.out / "summary.json"
    if summary_path.exists() and not cfg.overwrite:
        console.print(f"{cfg.out} is already complete (--overwrite runs it again)")
        return json.loads(summary_path.read_text())
    if cfg.overwrite and cfg.out.exists():
        import shutil

        shutil.rmtree(cfg.out)
    cfg.check_inputs()
    items = playable(load_task_set(cfg.tasks, cfg.limit), cfg.tasks, console)
    cfg.out.mkdir(parents=True, exist_ok=True)
    versions = published(cfg)
    trained = {d for v in range(1, len(versions)) for d in batch_draws(cfg.out / f"rollout-{v}")}
    journal = Journal(cfg.journal, cfg.key())
    if len(versions) > 1 or len(journal):
        console.print(f"resuming: {len(versions) - 1} of {cfg.updates} versions published, {len(journal)} "
                      "trajectories journaled")
    policy = policy or cfg.open_policy(cfg.out / f"policy-{len(versions) - 1}" if len(versions) > 1 else cfg.model)
    pool = EnvPool.from_manifest(cfg.envs, max_steps=cfg.max_steps, screenshot=policy.sees_screen)
    try:
        summary = Loop(cfg, items, pool, policy, journal, train or grpo_process(cfg, console), console,
                       versions, trained).run()
    finally:
        pool.close()
        policy.close()
    summary["policy"] = str(cfg.out / f"policy-{summary['versions']}")
    summary_path.write_text(json.dumps(summary, indent=2))
    console.print(f"wrote {cfg.out}: {summary['versions']} versions ({summary['updates']} this run, "
                  f"{summary['wall_s']:.0f} s), "
                  f"{summary['steps_per_s']:.2f} steps/s, desktops busy {summary['desktop_busy']:.0%}, trainer busy "
                  f"{summary['trainer_busy']:.0%}, lag {summary['lag_mean'] or 0:.2f} mean / {summary['lag_max']} max")
    return summary


def batch_draws(batch: Path) -> list[int]:
    """The draws (groups) a batch written for the trainer holds."""
    return json.loads((batch / DRAWS).read_text())
