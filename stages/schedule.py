"""The Entropulse schedule, defined once: the stages it chains, in order, with presets for the CPU
demo and the paper's GPU recipe (`computerrl entropulse`; the Justfile's `demo` and
`reproduce-osworld` call it). It is the one stage that runs other stages.

    spawn-envs → tasks build on its desktops → [eval of the base model] → sft on expert replays (BC) → eval
      → RL phase 1: N × (rollout → grpo), or with rl_loop=async N versions of `async-rl` → eval
      → Entropulse: filter-success over phase 1's rollouts → sft → eval
      → RL phase 2: N × (rollout → grpo), the Entropulse checkpoint as KL reference → eval
      → two tables (success per phase with intervals and paired tests; exploration) and RUN/schedule.png

Every "eval" is a greedy one on the eval tasks (success) and, with `explore_tasks`, K plays at
temperature 1 of the first of them (pass@K, distinct actions: how much the phase explores).

Settings: `Schedule`'s defaults are the CPU demo's (stages/presets/__init__.py); a preset
(stages/presets/NAME.yaml) or a file of the user's (`--config FILE.yaml`, any of Schedule's fields) changes
some of them, and `--set KEY=VALUE` changes one more (`--show-config` prints the whole result as a file to
copy and edit).

Each step is a stage with its options; it runs in this process (`stage.run(config)`), or, for the
training stages when `launcher` is set (`accelerate launch --config_file …`), as that command on
`computerrl`'s CLI. A step whose output is already there is skipped by its stage, so an interrupted
schedule resumes by running the same command again; the desktops start before the first step that still
has to play (a rerun that finds every step done starts none). `dry_run` prints the steps as commands.
"""

from __future__ import annotations

import dataclasses
import shlex
import subprocess
from pathlib import Path
from typing import Any

from computerrl.data.config import cli_args
from computerrl.stages.presets import Schedule


class Steps:
    """Runs (or, dry, prints) the schedule's steps; a step returns its stage's result (None when dry
    or launched). The desktops start once, before the first step that plays and is not already done."""

    TRAINING = ("sft", "grpo")
    PLAYING = ("tasks-build", "eval", "rollout", "async-rl")  # on the desktops

    def __init__(self, s: Schedule, console, dry_run: bool, envs: Path, cache: Path):
        self.s, self.console, self.dry_run, self.envs, self.cache = s, console, dry_run, envs, cache
        self.desktops_started = False

    def __call__(self, stage: str, **options) -> Any:
        launched = bool(self.s.launcher) and stage in self.TRAINING
        if self.dry_run or launched:
            if stage in self.PLAYING:
                self._desktops()
            command = (shlex.split(self.s.launcher) + ["-m", "computerrl.cli.main"] if launched else ["computerrl"]) \
                + stage.replace("tasks-build", "tasks build").split() + cli_args(options)
            self.console.print(("" if self.dry_run else "$ ") + shlex.join(command), markup=False, highlight=False)
            if not self.dry_run:
                subprocess.run(command, check=True)
            return None
        config, run_stage = stages()[stage]
        cfg = config(**options)
        if stage in self.PLAYING and not getattr(cfg, "finished", False):  # a finished one only reads its output
            self._desktops()
        return run_stage(cfg) if stage == "spawn-envs" else run_stage(cfg, self.console)

    def _desktops(self) -> None:
        """The desktops read the suite's files (written by tasks build, before its replays need them)."""
        if not self.desktops_started:
            self.desktops_started = True
            if self("spawn-envs", out=self.envs, count=self.s.envs, backend=self.s.backend, cache=self.cache,
                    detach=True):
                raise RuntimeError(f"the desktops did not start; see {self.envs}")

    def stop_desktops(self) -> None:
        if self.desktops_started:
            self("spawn-envs", out=self.envs, stop=True)


def stages() -> dict[str, tuple[type, Any]]:
    """The schedule's steps: each stage's config class and run function (imported when a step runs)."""
    from computerrl.stages import eval as eval_stage
    from computerrl.stages import async_rl, filter_success, grpo, rollout, sft, spawn_envs, tasks_build

    return {"tasks-build": (tasks_build.BuildConfig, tasks_build.run),
            "async-rl": (async_rl.AsyncRLConfig, async_rl.run),
            "spawn-envs": (spawn_envs.SpawnEnvsConfig, spawn_envs.run),
            "eval": (eval_stage.EvalConfig, eval_stage.run), "rollout": (rollout.RolloutConfig, rollout.run),
            "grpo": (grpo.GRPOConfig, grpo.run), "sft": (sft.SFTConfig, sft.run),
            "filter-success": (filter_success.FilterSuccessConfig, filter_success.run)}


@dataclasses.dataclass
class Run:
    """One seed's schedule as it runs: what its phases read (settings, folders, the step runner), and the RL
    plays so far (`history`, one list of rollouts an iteration: what rl_draw signal and gain weigh)."""
    s: Schedule
    out: Path
    model: str
    seed: int
    console: Any
    dry_run: bool
    history: list[list[Path]] = dataclasses.field(default_factory=list)

    def __post_init__(self):
        s = self.s
        self.tasks = Path(s.suite) if s.suite else self.out / "tasks"
        self.envs = self.out / "envs"
        self.rl_pool = self.tasks / ("rl" if s.rl_split else "train")
        self.eval_tasks = Path(s.eval_tasks) if s.eval_tasks else self.tasks / "test"
        self.step = Steps(s, self.console, self.dry_run, self.envs, self.tasks / "files")
        self.playing = dict(s.play, envs=self.envs, seed=self.seed)


def run(s: Schedule, out: Path, model: str, seed: int, console=None, *, dry_run: bool = False) -> list[dict]:
    """The schedule for one seed into `out`; prints its table and returns its phase rows."""
    from rich.console import Console

    from computerrl.data.report import drift_table, iteration_table, schedule_plot, schedule_report

    r = Run(s, Path(out), model, seed, console or Console(soft_wrap=True), dry_run)
    built = (r.tasks / "train").exists()
    if s.rl_split and not dry_run and built and not r.rl_pool.exists():  # said before any desktop starts
        raise ValueError(f"rl_split={s.rl_split}: the suite {r.tasks} has no rl split (build a new one, or set "
                         "suite to another folder)")
    if r.envs.exists():
        r.step("spawn-envs", out=r.envs, stop=True)  # desktops an interrupted run left behind
    try:
        if not built:
            build_suite(r)
        phases = play_phases(r)
    finally:
        r.step.stop_desktops()
    if not dry_run:
        r.console.print(schedule_report({seed: phases}))
        if (iterations := iteration_table(r.out)).row_count:
            r.console.print(iterations)
        if drift := drift_table(r.out):
            r.console.print(drift)
        schedule_plot(r.out, [p["phase"] for p in phases])
        r.console.print(f"training curves: {r.out / 'schedule.png'}")
    return phases


def play_phases(r: Run) -> list[dict]:
    """BC → RL 1 → Entropulse → RL 2, each evaluated; their rows (none when dry), up to `stop_after`'s."""
    rows: list[dict] = []

    def done(phase: str, row: dict | None) -> bool:
        rows.extend([row] if row else [])
        if phase == r.s.stop_after:
            r.console.print(f"stopped after {phase}, as asked (stop_after)")
        return phase == r.s.stop_after

    if r.s.eval_base and done("base", evaluate(r, "base", r.model)):
        return rows
    bc = sft(r, "bc", r.model, [r.tasks / "expert"], r.s.bc_epochs, r.s.lr_bc)
    if done("bc", evaluate(r, "bc", bc)):
        return rows
    rl1, rollouts1 = rl_phase(r, "rl1", bc, 1)
    if done("rl1", evaluate_trained(r, "rl1", rl1, "bc")):
        return rows
    pulse = entropulse(r, rl1, rollouts1)
    if done("entropulse", evaluate_trained(r, "entropulse", pulse, "rl1")):
        return rows
    rl2, _ = rl_phase(r, "rl2", pulse, 1 + r.s.rl_iterations)
    done("rl2", evaluate_trained(r, "rl2", rl2, "entropulse"))
    return rows


def build_suite(r: Run) -> None:
    s = r.s
    r.console.rule("tasks build")
    r.step("tasks-build", out=r.tasks, train=s.train_tasks, test=s.test_tasks, valid=s.valid_tasks, rl=s.rl_split,
           seed=r.seed, templates=s.templates, holdout_templates=s.holdout, envs=r.envs, model=r.model,
           budgets=s.play.get("budgets", ""))


def evaluate(r: Run, phase: str, checkpoint: str) -> dict | None:
    """The phase's greedy eval (and its exploration plays, with explore_tasks); its row (None when dry)."""
    from computerrl.data.report import phase_figures

    s = r.s
    r.console.rule(f"eval: {phase}")
    summary = r.step("eval", tasks=r.eval_tasks, model=checkpoint, limit=s.eval_limit, screenshots=False,
                     out=r.out / f"eval-{phase}", **r.playing)
    sampled = {}
    if s.explore_tasks and s.explore_samples:
        r.console.rule(f"eval: {phase}, {s.explore_samples} plays a task at T = 1")
        sampled = r.step("eval", tasks=r.eval_tasks, model=checkpoint, limit=s.explore_tasks, screenshots=False,
                         samples=s.explore_samples, temperature=1.0, out=r.out / f"explore-{phase}", **r.playing)
    return None if r.dry_run else phase_figures(r.out, phase, summary, sampled)


def evaluate_trained(r: Run, phase: str, checkpoint: str, previous: str) -> dict | None:
    """`evaluate`, unless the phase had nothing to train on: its policy is then `previous`'s, and so are
    its evaluations (the same policy played again would measure only the noise)."""
    from computerrl.data.report import untrained

    why = "" if r.dry_run else untrained(r.out, phase)
    if why:
        r.console.print(f"[yellow]{phase}: nothing to train on ({why}); its policy is {previous}'s, and so are its "
                        "evaluations[/]")  # the report's line says so too
        for kind in ("eval", "explore"):
            copy_done(r.out / f"{kind}-{previous}", r.out / f"{kind}-{phase}")
    return evaluate(r, phase, checkpoint)


def sft(r: Run, folder: str, start: str, data: list[Path], epochs: int, lr: float) -> str:
    r.console.rule(f"sft → {folder}")
    r.step("sft", model=start, out=r.out / folder, data=data, epochs=epochs, lr=lr, seed=r.seed,
           **(r.s.train | r.s.sft))
    return str(r.out / folder)


def train_draw(r: Run, to: Path, shuffle: int, part: int = 0, drawn: list[Path] = ()) -> Path | None:
    """rl_tasks tasks of RL's pool (all of it when rl_tasks is 0): with rl_draw=uniform part `part` of
    the `shuffle` seed's order; stratified, the templates in turns; with signal or gain, weighted by the
    earlier plays (`history`); none of those in the draws `drawn` before it."""
    from computerrl.play.curriculum import drawn_ids, stratified_draw, uniform_draw, weighted_draw

    s = r.s
    if not s.rl_tasks or r.dry_run:
        return r.rl_pool
    if s.rl_draw == "stratified":
        return stratified_draw(r.rl_pool, to, s.rl_tasks, shuffle, drawn_ids(drawn))
    if s.rl_draw != "uniform":
        return weighted_draw(r.rl_pool, to, s.rl_tasks, shuffle, r.history, s.samples, drawn_ids(drawn), s.rl_draw)
    return uniform_draw(r.rl_pool, to, s.rl_tasks, shuffle, part=part)


def rl_phase(r: Run, folder: str, start: str, first: int) -> tuple[str, list[Path]]:
    """The phase's RL iterations from `start`: its last policy and its rollouts (also appended to
    `r.history`, one list an iteration)."""
    if r.s.rl_loop == "async":
        return async_phase(r, folder, start, first)
    policy, rollouts = start, []
    for i in range(first, first + r.s.rl_iterations):
        r.console.rule(f"RL {folder}: iteration {i}")
        batches = rl_batches(r, folder, i, policy)
        rollouts += batches
        r.step("grpo", rollouts=batches, model=policy, ref=start, out=r.out / folder / f"policy-{i}", seed=r.seed + i,
               **(r.s.train | r.s.grpo))
        policy = str(r.out / folder / f"policy-{i}")
        track(r, folder, i, policy)
    return policy, rollouts


def rl_batches(r: Run, folder: str, i: int, policy: str) -> list[Path]:
    """Iteration i's rollouts: rl_tasks tasks played G times, then, with dynamic_sampling, up to that many
    further draws while fewer than rl_tasks groups have signal."""
    from computerrl.play.curriculum import groups_with_signal

    s = r.s
    batches: list[Path] = []
    draws: list[Path] = []
    r.history.append(batches)  # dynamic sampling's further draws see the groups just played
    for extra in range(1 + (s.dynamic_sampling if s.rl_tasks and not r.dry_run else 0)):
        if extra and groups_with_signal(batches) >= s.rl_tasks:
            break  # the batch holds enough groups that can teach something
        suffix = f"-{extra}" if extra else ""
        draw = train_draw(r, r.out / folder / f"tasks-{i}{suffix}", r.seed + i, extra, draws)
        if draw is None:
            break  # every train task was drawn
        draws.append(draw)
        batches.append(r.out / folder / f"rollout-{i}{suffix}")
        r.step("rollout", tasks=draw, model=policy, samples=s.samples, temperature=1.0, iteration=i, out=batches[-1],
               **(r.playing | {"seed": r.seed + i + 1000 * extra}))
    return batches


def async_phase(r: Run, folder: str, start: str, first: int) -> tuple[str, list[Path]]:
    s = r.s
    r.console.rule(f"RL {folder}: asynchronous, {s.rl_iterations} versions")
    run_dir = r.out / folder / "async"
    r.step("async-rl", tasks=r.rl_pool, model=start, samples=s.samples, groups=s.rl_tasks or s.samples,
           updates=s.rl_iterations, max_lag=s.max_lag, temperature=1.0, launcher=s.launcher, out=run_dir,
           grpo=[f"{k}={v}" for k, v in (s.train | s.grpo).items()], **(r.playing | {"seed": r.seed + first}))
    for v in range(1, s.rl_iterations + 1):
        track(r, folder, v, str(run_dir / f"policy-{v}"))
    return str(run_dir / f"policy-{s.rl_iterations}"), [run_dir / f"rollout-{v}" for v in range(1, s.rl_iterations + 1)]


def track(r: Run, folder: str, i: int, policy: str) -> None:
    """With `track`: the iteration's policy on the first eval tasks (RUN/<phase>/eval-i) and its chance of
    BC's first answers per template (RUN/<phase>/drift-i.json; BC's own in RUN/drift-bc.json)."""
    if not r.s.track:
        return
    r.step("eval", tasks=r.eval_tasks, model=policy, limit=r.s.track, screenshots=False,
           out=r.out / folder / f"eval-{i}", **r.playing)
    if not r.dry_run:
        if not (r.out / "drift-bc.json").exists():
            check_restored(r.out / "eval-bc", r.out / "bc")
        write_drift(r.out / "drift-bc.json", r.out / "eval-bc", r.out / "bc")
        write_drift(r.out / folder / f"drift-{i}.json", r.out / "eval-bc", policy)


def entropulse(r: Run, rl1: str, rollouts1: list[Path]) -> str:
    """SFT of RL 1's policy on its own successes (≤ k a task); RL 1's checkpoint as it is when none."""
    s = r.s
    r.console.rule("Entropulse")
    if s.entropulse_temperature:  # more varied successes: G plays of rl_tasks train tasks at that temperature
        plays = r.out / "entropulse-plays"
        r.step("rollout", tasks=train_draw(r, r.out / "entropulse-tasks", r.seed + 500), model=rl1, samples=s.samples,
               temperature=s.entropulse_temperature, out=plays, **(r.playing | {"seed": r.seed + 500}))
        rollouts1 = rollouts1 + [plays]
    kept = r.step("filter-success", rollouts=rollouts1, out=r.out / "successes", k=s.k, seed=r.seed)
    if not (r.dry_run or kept["rows"]):
        return rl1
    return sft(r, "entropulse", rl1, [r.out / "successes"] + ([r.tasks / "expert"] if s.entropulse_expert else []),
               s.entropulse_epochs, s.lr_entropulse)


def copy_done(done: Path, to: Path) -> None:
    """A finished stage's folder copied whole to `to`, which then holds it done (unless `to` exists)."""
    import shutil

    if done.exists() and not to.exists():
        partial = to.with_name(f".{to.name}.copy")
        shutil.rmtree(partial, ignore_errors=True)
        shutil.copytree(done, partial)
        partial.rename(to)


def write_drift(to: Path, reference: Path, checkpoint: str, per_template: int = 4) -> None:
    """`checkpoint`'s chance of the first answers of the eval in folder `reference`, per template
    (policy/drift.py), as JSON at `to` (kept: a resumed run does not compute it again). Those answers are kept
    in `reference/first-answers.json`: an eval restored from its small files and them (its steps dataset is
    too large to commit, `just rl-arm`) still serves, once `check_restored` found them the answers of the
    checkpoint that played it."""
    import json

    from computerrl.data.files import write_atomic
    from computerrl.policy.drift import first_answers, template_chances

    if to.exists():
        return
    kept = reference / "first-answers.json"
    if not kept.exists():
        write_atomic(kept, json.dumps(first_answers(reference / "steps", per_template)))
    write_atomic(to, json.dumps(template_chances(json.loads(kept.read_text()), checkpoint)))


def check_restored(reference: Path, checkpoint: Path) -> None:
    """An eval restored without its steps (another machine played it) stands for `checkpoint` only if its
    first answers are that checkpoint's greedy ones: a BC trained again elsewhere must answer as the one
    evaluated (float ties aside)."""
    import json

    from computerrl.policy.drift import greedy_share

    if (reference / "steps").exists():
        return
    share = greedy_share(checkpoint, json.loads((reference / "first-answers.json").read_text()))
    if share < 0.99:
        raise RuntimeError(f"{reference} was played by another model than {checkpoint}: only {share:.1%} of its "
                           f"first answers' tokens are this one's greedy choice; delete {reference} to evaluate it "
                           "here")
