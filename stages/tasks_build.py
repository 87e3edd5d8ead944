"""`computerrl tasks build`: generate a task suite and prove every task solvable on real desktops.

Instances come from templates × parameters (`tasks/suites`), split so that train, test, valid
(`--valid`, drawn from train's templates, for choosing settings without looking at test) and rl
(`--rl`, from train's templates too: tasks for RL that behaviour cloning never imitated) never
share an instance; their files go to a cache folder (`files/`, read by env servers with
`--cache`). With `--replay` (the default) every reference solution is played on the desktops of a
`spawn-envs` run (`--envs`, started with `--cache OUT/files`) through the same episode loop, parser
and prompt a model gets (`play.episode`, `policy.agent.ExpertPolicy`), and so is its untouched
start (the agent's first answer is "done"): a task is kept only if its solution scores 1.0 and its
start 0 (a task that starts solved rewards doing nothing, and RL learns exactly that). The replays
become the expert step dataset for behaviour cloning, whose `messages` are the prompts the model will
see (built for `--model`'s tokenizer and prompt budgets).

Reads:  nothing (templates are code), `--model`'s tokenizer, and `--envs`'s manifest (with --replay).
Writes: OUT/train, OUT/test, OUT/valid, OUT/rl (task datasets: task_id, domain, template, instruction,
        task_json, solution, gui_solution; valid and rl only when asked for), OUT/expert (step dataset of
        the train tasks' replays: the BC data),
        OUT/files (cache + index.json).
        A build killed half-way resumes from its journal, OUT/.replays/.

    computerrl spawn-envs --out runs/envs --count 2 --cache runs/tasks/files --detach
    computerrl tasks build --out runs/tasks --train 20 --test 10 --envs runs/envs
    computerrl tasks build --out runs/tasks --envs runs/envs     # 2000 train + 300 test
"""

from __future__ import annotations

import dataclasses
import shutil
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING

from computerrl.data.config import OUT, SEED, setting

if TYPE_CHECKING:  # the templates load when a suite is built: `computerrl --help` builds this config
    from computerrl.tasks.suites import Instance

JOURNAL = ".replays"  # replays of a build in progress (data/journal.py): a rerun resumes from them
UNTOUCHED = ":untouched"  # the journal key of an instance's untouched play: its task id and this


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
    replay: bool = setting(True, "Replay reference solutions on desktops and keep only the tasks that score 1.0, "
                                 "and 0 untouched.",
                           "--replay/--no-replay")
    envs: Path = setting(Path("runs/envs"), "A spawn-envs run whose desktops replay (started with --cache "
                                            "OUT/files).", "--envs")
    model: str = setting("embedded", "Checkpoint the expert prompts are built for (its tokenizer and prompt budgets): "
                                     "'embedded' or a local folder.")
    budgets: str = setting("", "Prompt budgets: tiny, quick, small or paper (default: chosen by the model's size).")  # policy.prompt
    holdout_templates: str = setting("", "Templates kept out of train, so eval can measure out-of-distribution "
                                         "success: a count N (drawn with --seed) or comma-separated names.")

    def __post_init__(self):
        from computerrl.tasks.suites import get_template
        from computerrl.tasks.suites.build import pick_holdout

        if min(self.train, self.test, self.valid, self.rl) < 0 or self.train + self.test == 0:
            raise ValueError("--train, --test, --valid and --rl must be >= 0, and --train and --test not both 0")
        self.out, self.envs = Path(self.out), Path(self.envs)
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
    from computerrl.tasks.suites.build import splits, task_rows, write_files

    console = console or Console(soft_wrap=True)
    out = Path(cfg.out)
    if cfg.replay:
        _check_fleet(cfg)  # before anything is written
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
        replays, untouched = replay_solutions_and_starts(cfg, out, everything, console)
        dropped = {r.task_id: why for r, u in zip(replays, untouched) if (why := why_dropped(r, u))}
        kept = {i.task_id for i in everything} - set(dropped)
        reasons = Counter(why.split(":")[0] for why in dropped.values())
        console.print(f"replay: kept {len(kept)}, dropped {len(dropped)}" +
                      (f" ({', '.join(f'{k}: {v}' for k, v in reasons.items())})" if dropped else ""))
        for task_id, why in dropped.items():
            console.print(f"  dropped {task_id}: {why[:300]}", markup=False, highlight=False)
        drawn = {split: [i for i in insts if i.task_id in kept] for split, insts in drawn.items()}
        # BC trains on these: a test task's solution must not leak into it
        train_ids = {i.task_id for i in drawn["train"]}
        rows = [row for r in replays if r.task_id in train_ids for row in r.rows]
        expert = datasets.Dataset.from_list(rows, features=STEP_FEATURES) if rows else \
            datasets.Dataset.from_dict({k: [] for k in STEP_FEATURES}, features=STEP_FEATURES)
        save_atomic(expert, out / "expert", lineage=lineage("tasks build", cfg))
        summary.update(kept=len(kept), dropped=dropped, dropped_by_reason=dict(reasons), expert_steps=len(rows),
                       replay_s=round(sum(r.seconds for r in replays + untouched), 1))
    written = {split: insts for split, insts in drawn.items() if split in ("train", "test") or getattr(cfg, split)}
    for split, insts in written.items():
        ds = datasets.Dataset.from_dict(task_rows(insts, cfg.holdout), features=TASK_FEATURES)
        save_atomic(ds, out / split, lineage=lineage("tasks build", cfg, {"split": split}))
    shutil.rmtree(out / JOURNAL, ignore_errors=True)  # the build is whole: nothing to resume
    summary.update({split: len(insts) for split, insts in written.items()}, holdout=cfg.holdout,
                   per_domain=dict(Counter(i.domain for insts in written.values() for i in insts)))
    console.print("wrote " + ", ".join(f"{out / split} ({len(insts)} tasks)" for split, insts in written.items()))
    return summary


def why_dropped(solved, untouched) -> str:
    """Why a task is dropped ("" = kept), from its reference solution's replay and its untouched play:
    "setup: …", "desktop lost …", "score 0: <detail>" (the solution fails), "starts solved: …" (its
    untouched start already scores: RL would learn to do nothing) or "untouched: …" (that play failed)."""
    if not solved.success:
        return solved.error or f"score {solved.score:g}: {solved.detail}".strip()
    if untouched.error:
        return f"untouched: {untouched.error}"
    if untouched.score > 0:
        return f"starts solved: scores {untouched.score:g} with no action ({untouched.detail})"
    return ""


def _check_fleet(cfg: BuildConfig) -> None:
    """The desktops of `cfg.envs` must read this build's files (OUT/files): ValueError naming both."""
    from computerrl.envs.fleet.manifest import fleet_cache, manifest_path

    files = (Path(cfg.out) / "files").resolve()
    if not manifest_path(cfg.envs).exists():
        raise ValueError(f"--envs {cfg.envs}: no spawn-envs run there (start one: `computerrl spawn-envs --out "
                         f"{cfg.envs} --cache {files} --detach`, or build with --no-replay)")
    if fleet_cache(cfg.envs) != files:
        raise ValueError(f"the desktops of {cfg.envs} read task files from {fleet_cache(cfg.envs) or 'no cache'}, "
                         f"not from this build's {files}: start them with `computerrl spawn-envs --out {cfg.envs} "
                         f"--cache {files} …`")


def replay_solutions_and_starts(cfg: BuildConfig, out: Path, instances: list[Instance],
                                console) -> tuple[list, list]:
    """Each instance's reference solution and its untouched start (`NO_ACTION`), played on the desktops
    of `cfg.envs` (which `_check_fleet` checked): two lists of trajectories in the order of `instances`."""
    from computerrl.data.journal import Journal
    from computerrl.envs.fleet.pool import EnvPool
    from computerrl.play.scripted import NO_ACTION, ScriptedPlay, play_scripted
    from computerrl.policy.checkpoint import prompt_settings, resolve

    settings = {k: v for k, v in dataclasses.asdict(cfg).items() if k != "envs"}
    journal = Journal(out / JOURNAL, settings, restart=True)  # another build's replays are of other tasks
    plays = [ScriptedPlay(i.task_id, i.task, i.domain, tuple(i.solution)) for i in instances] + \
            [ScriptedPlay(f"{i.task_id}{UNTOUCHED}", i.task, i.domain, NO_ACTION) for i in instances]
    pool = EnvPool.from_manifest(cfg.envs, max_steps=max(len(i.solution) for i in instances) + 2)
    try:
        played = play_scripted(pool, plays, prompt_settings(resolve(cfg.model), cfg.budgets), journal,
                               label="replays", console=console)
    finally:
        pool.close()
    return played[:len(instances)], played[len(instances):]
