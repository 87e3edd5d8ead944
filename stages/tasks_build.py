"""`computerrl tasks build`: generate a task suite and prove every task solvable on real desktops.

Instances come from templates × parameters (`envs/tasks/suites`), split so that train, test, valid
(`--valid`, drawn from train's templates, for choosing settings without looking at test) and rl
(`--rl`, from train's templates too: tasks for RL that behaviour cloning never imitated) never
share an instance; their files go to a cache folder (`files/`, read by env servers with
`--cache`). With `--replay` (the default) every reference solution is played on local desktops
through the same episode loop, parser and prompt a model gets (`envs.service.episode`,
`policy.agent.ExpertPolicy`): a task is kept only if it scores 1.0, and the replays become the
expert step dataset for behaviour cloning, whose `messages` are the prompts the model will see
(built for `--model`'s tokenizer and prompt budgets).

Reads:  nothing (templates are code), and `--model`'s tokenizer.
Writes: OUT/train, OUT/test, OUT/valid, OUT/rl (task datasets: task_id, domain, template, instruction,
        task_json, solution, gui_solution; valid and rl only when asked for), OUT/expert (step dataset of
        the train tasks' replays: the BC data),
        OUT/files (cache + index.json).
        A build killed half-way resumes from OUT/.replays.jsonl.

    computerrl tasks build --out runs/tasks --train 20 --test 10 --envs 1
    computerrl tasks build --out runs/tasks            # 2000 train + 300 test, 2 desktops
"""

from __future__ import annotations

import dataclasses
import json
import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from computerrl.data.config import OUT, SEED, setting

if TYPE_CHECKING:  # the templates load when a suite is built: `computerrl --help` builds this config
    from computerrl.envs.tasks.suites import Instance

JOURNAL = ".replays.jsonl"  # replays of a build in progress, one JSON line each: a rerun resumes from them


@dataclasses.dataclass
class BuildConfig:
    # the suite folder: files/ (the cache), train/, test/, expert/ (the CLI asks for it: no default there)
    out: Path = setting(Path("runs/tasks"), OUT, "--out", "-o")
    train: int = setting(2000, "Train instances to generate.")  # before replay drops any
    test: int = setting(300, "Test instances to generate.")  # before replay drops any
    valid: int = setting(0, "Validation instances to generate, from train's templates (OUT/valid: choose settings on "
                            "them, never on test).")
    rl: int = setting(0, "RL instances to generate, from train's templates (OUT/rl: tasks for RL that behaviour "
                         "cloning never imitated).")
    seed: int = setting(0, SEED)  # the same seed (and counts, templates) gives the same suite
    templates: str = setting("", "Comma-separated template names (default: all; an unknown name lists the known "
                                 "ones).")
    replay: bool = setting(True, "Replay reference solutions on desktops and keep only the tasks that score 1.0.",
                           "--replay/--no-replay")
    envs: int = setting(2, "Local env servers replaying in parallel.", "--envs")  # one desktop each
    workdir: str = setting("", "Where the env servers keep their state (default: OUT/.envs).")
    model: str = setting("embedded", "Checkpoint the expert prompts are built for (its tokenizer and prompt budgets): "
                                     "'embedded' or a local folder.")
    budgets: str = setting("", "Prompt budgets: small or paper (default: chosen by the model's size).")  # policy.prompt
    holdout_templates: str = setting("", "Templates kept out of train, so eval can measure out-of-distribution "
                                         "success: a count N (drawn with --seed) or comma-separated names.")

    def __post_init__(self):
        from computerrl.envs.tasks.suites import get_template
        from computerrl.envs.tasks.suites.build import pick_holdout

        if min(self.train, self.test, self.valid, self.rl) < 0 or self.train + self.test == 0:
            raise ValueError("--train, --test, --valid and --rl must be >= 0, and --train and --test not both 0")
        if self.envs < 1:
            raise ValueError("--envs must be at least 1")
        for name in self.template_names:
            get_template(name)  # unknown name: KeyError listing the known ones
        self.holdout = pick_holdout(self.holdout_templates, self.seed, self.template_names or None)
        if self.budgets:
            from computerrl.policy.prompt import BUDGETS

            BUDGETS[self.budgets]

    @property
    def template_names(self) -> list[str]:
        return [t.strip() for t in self.templates.split(",") if t.strip()]


def run(cfg: BuildConfig, console=None) -> dict:
    """Generate, write the cache, replay (optional), write train/test (and expert) datasets."""
    import time

    import datasets
    from rich.console import Console

    from computerrl.data.datasets_io import lineage, save_atomic
    from computerrl.data.schemas import STEP_FEATURES, TASK_FEATURES
    from computerrl.envs.tasks.suites.build import splits, task_rows, write_files

    console = console or Console(soft_wrap=True)
    out = Path(cfg.out)
    t0 = time.perf_counter()
    drawn = splits(cfg.train, cfg.test, cfg.valid, cfg.seed, cfg.template_names or None, cfg.holdout, cfg.rl)
    if cfg.holdout:
        console.print(f"held out of train: {', '.join(cfg.holdout)} "
                      f"({sum(i.template in cfg.holdout for i in drawn['test'])} out-of-distribution test tasks)")
    gen_s = time.perf_counter() - t0
    everything = [i for insts in drawn.values() for i in insts]
    write_files(everything, out / "files")
    console.print("generated " + " + ".join(f"{len(insts)} {split}" for split, insts in drawn.items()
                                            if insts or split in ("train", "test"))
                  + f" instances from {len({i.template for i in everything})} templates in {gen_s:.1f} s; "
                  f"files in {out / 'files'}")
    summary: dict = {"generated": {split: len(insts) for split, insts in drawn.items()},
                     "generate_s": round(gen_s, 2)}
    if cfg.replay and everything:
        replays = _replay(cfg, out, everything, console)
        kept = {r.task_id for r in replays if r.success}
        dropped = {r.task_id: why_dropped(r) for r in replays if not r.success}
        reasons = Counter(why.split(":")[0] for why in dropped.values())
        console.print(f"replay: kept {len(kept)}, dropped {len(dropped)}" +
                      (f" ({', '.join(f'{k}: {v}' for k, v in reasons.items())})" if dropped else ""))
        for task_id, why in dropped.items():
            console.print(f"  dropped {task_id}: {why[:300]}", markup=False, highlight=False)
        drawn = {split: [i for i in insts if i.task_id in kept] for split, insts in drawn.items()}
        # BC trains on these: a test task's solution must not leak into it
        train_ids = {i.task_id for i in drawn["train"]}
        rows = [row for r in replays if r.success and r.task_id in train_ids for row in r.rows]
        expert = datasets.Dataset.from_list(rows, features=STEP_FEATURES) if rows else \
            datasets.Dataset.from_dict({k: [] for k in STEP_FEATURES}, features=STEP_FEATURES)
        save_atomic(expert, out / "expert", lineage=lineage("tasks build", cfg))
        summary.update(kept=len(kept), dropped=dropped, expert_steps=len(rows),
                       replay_s=round(sum(r.seconds for r in replays), 1))
    written = {split: insts for split, insts in drawn.items() if split in ("train", "test") or getattr(cfg, split)}
    for split, insts in written.items():
        ds = datasets.Dataset.from_dict(task_rows(insts, cfg.holdout), features=TASK_FEATURES)
        save_atomic(ds, out / split, lineage=lineage("tasks build", cfg, {"split": split}))
    (out / JOURNAL).unlink(missing_ok=True)  # the build is whole: nothing to resume
    summary.update({split: len(insts) for split, insts in written.items()}, holdout=cfg.holdout,
                   per_domain=dict(Counter(i.domain for insts in written.values() for i in insts)))
    console.print("wrote " + ", ".join(f"{out / split} ({len(insts)} tasks)" for split, insts in written.items()))
    return summary


def why_dropped(t) -> str:
    """A replay's reason for dropping its task: "setup: …", "desktop lost …" or "score 0: <detail>"."""
    return t.error or f"score {t.score:g}: {t.detail}".strip()


def replay_all(pool, instances: list[Instance], expert_prompt, *, on_done: Callable | None = None) -> list:
    """Play every instance's reference solution on the pool's desktops, one worker per desktop.

    `expert_prompt`: (Budgets, count_tokens) the expert's chats are built with. Trajectories come
    back in the order of `instances`.
    """
    from computerrl.envs.service.client import EnvError
    from computerrl.envs.service.episode import Trajectory, play
    from computerrl.policy.agent import ExpertPolicy

    def one(inst: Instance) -> Trajectory:
        try:
            with pool.lease() as env:
                return play(env, ExpertPolicy(inst.solution, *expert_prompt), inst.task, domain=inst.domain,
                            group_id=f"{inst.task_id}:expert")
        except (EnvError, TimeoutError) as e:
            return Trajectory(inst.task_id, 0, [], error=f"env: {e}")

    results, lock = {}, threading.Lock()
    with ThreadPoolExecutor(max_workers=pool.size) as ex:
        for f in as_completed([ex.submit(one, inst) for inst in instances]):
            t = f.result()
            with lock:
                results[t.task_id] = t
            if on_done:
                on_done(t)
    return [results[i.task_id] for i in instances]


class _Journal:
    """Replays written one line at a time as they finish, so a build killed half-way resumes. The first
    line is the config: a journal of another config (seed, counts, templates) is started afresh."""

    def __init__(self, path: Path, cfg: BuildConfig):
        from computerrl.envs.service.episode import Trajectory

        self.path, self.lock, self.done = path, threading.Lock(), []
        key = json.dumps({k: v for k, v in dataclasses.asdict(cfg).items() if k not in ("envs", "workdir")},
                         sort_keys=True, default=str)
        lines = path.read_text().splitlines() if path.exists() else []
        if lines and lines[0] == key:
            for line in lines[1:]:
                try:
                    self.done.append(Trajectory(**json.loads(line)))
                except (ValueError, TypeError):  # the line a kill cut short
                    break
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(key + "\n")

    def add(self, trajectory) -> None:
        with self.lock, open(self.path, "a") as f:
            f.write(json.dumps(dataclasses.asdict(trajectory)) + "\n")


def _replay(cfg: BuildConfig, out: Path, instances: list[Instance], console) -> list:
    """Start `cfg.envs` local env servers reading out/files, replay every instance, stop them."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from computerrl.envs.fleet.backends.local import LocalBackend
    from computerrl.envs.fleet.pool import EnvPool, wait_healthy
    from computerrl.policy.checkpoint import prompt_settings, resolve

    journal = _Journal(out / JOURNAL, cfg)
    results = [r for r in journal.done if r.task_id in {i.task_id for i in instances}]
    todo = [i for i in instances if i.task_id not in {r.task_id for r in results}]
    if results:
        console.print(f"resuming: {len(results)} replays of an interrupted build are kept, {len(todo)} to go")
    if not todo:
        return results
    expert_prompt = prompt_settings(resolve(cfg.model), cfg.budgets)
    backend = LocalBackend(cfg.workdir or out / ".envs", server_args=("--cache", str((out / "files").resolve())))
    handles = []
    try:
        handles = [backend.start(f"build-{k}") for k in range(min(cfg.envs, len(todo)))]
        pool = EnvPool(handles, backend, max_steps=max(len(i.solution) for i in todo) + 2)
        for h in handles:
            problem = wait_healthy(pool.clients[h.env_id], pool.start_timeout_s)
            if problem:
                raise RuntimeError(f"env server {h.env_id} did not become healthy: {problem}")
        with Progress(TextColumn("replay"), BarColumn(), MofNCompleteColumn(), TextColumn("kept {task.fields[kept]}"),
                      TimeElapsedColumn(), console=console) as bar:
            job = bar.add_task("replay", total=len(todo), kept=0)
            kept = [0]

            def done(t):
                journal.add(t)
                kept[0] += t.success
                bar.update(job, advance=1, kept=kept[0])

            results += replay_all(pool, todo, expert_prompt, on_done=done)
        pool.close()
        return results
    finally:
        for h in handles:
            backend.stop(h)
