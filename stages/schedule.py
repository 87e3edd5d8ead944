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

Settings: `Schedule`'s defaults are the CPU demo's; a preset (stages/presets/NAME.yaml) or a file of the
user's (`--config FILE.yaml`, any of Schedule's fields) changes some of them, and `--set KEY=VALUE`
changes one more (`--show-config` prints the whole result as a file to copy and edit).

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
from typing import Any, Callable

from computerrl.data.config import cli_args

# The CPU demo's suite: six trained templates and three held out of train. Two are "far": each asks for a
# function seen in training, used in a way no train task shows (chosen before any run on them): clear_cell is
# set_cell_value (column_stat's) with None on a cell the instruction names; font_color is format_range
# (bold_header's, fill_header's) on one cell with the font_color keyword and a colour written out in the
# instruction, as fill_header writes its background's. One is "near" (issue 42, chosen before any arm ran):
# bold_column is bold_header's very call, format_range(..., bold=True), on column A's names instead of row 1.
CALC = ("calc_column_stat,calc_rename_sheet,calc_add_sheet,calc_bold_header,calc_fill_header,calc_freeze_header,"
        "calc_clear_cell,calc_font_color,calc_bold_column")
CALC_HELD_OUT = "calc_clear_cell,calc_font_color,calc_bold_column"
PHASES = ("base", "bc", "rl1", "entropulse", "rl2")  # the phases evaluated, in order
# The demo's RL updates where they differ from grpo's defaults: 4 optimizer steps a pass over the batch (the
# rows split evenly; chosen on valid), at 5e-5.
DEMO_GRPO = {"lr": 5e-5, "updates_per_epoch": 4}
RL_DRAWS = ("uniform", "stratified", "signal", "gain")


@dataclasses.dataclass
class Schedule:
    # the tasks (a generated suite; eval_tasks may name OSWorld's files instead of its test split)
    templates: str = CALC  # task templates of the suite ("" = all)
    holdout: str = CALC_HELD_OUT  # templates only the test split draws from (out-of-distribution)
    train_tasks: int = 24  # generated train tasks
    test_tasks: int = 96  # generated test tasks (held out: eval only; templates take equal shares)
    valid_tasks: int = 0  # generated validation tasks, from train's templates (SUITE/valid: tune settings on them)
    suite: str = ""  # where the suite is built, or found built ("" = RUN/tasks; runs that compare settings share one)
    eval_tasks: str = ""  # tasks every phase is evaluated on ("" = the suite's test split)
    eval_limit: int = 0  # the first N of them (0 = all; the suite interleaves templates)
    eval_base: bool = False  # evaluate the starting model too (the paper's table starts at BC)
    stop_after: str = ""  # end the schedule once this phase is evaluated (base, bc, rl1, entropulse; "" = run all)
    explore_tasks: int = 16  # the first N eval tasks each phase also plays explore_samples times at T = 1 (0 = none)
    explore_samples: int = 4  # K: pass@K and the distinct actions of K plays measure exploration
    # the desktops and the policy's engine
    envs: int = 4  # desktops; the model answers all of them in one batch
    backend: str = "local"  # spawn-envs backend: local or docker
    engine: str = "transformers"  # rollout and eval engine
    max_steps: int = 4  # steps per trajectory (rollout and eval)
    max_new_tokens: int = 48  # answer cap
    budgets: str = "tiny"  # prompt budgets (policy.prompt.BUDGETS; "" = by the model's size)
    screens: int = 2  # a vision-language model: screenshots a prompt holds (this step's and those before it)
    coordinates: str = "grid"  # a vision-language model's points: grid (0-1000 over the screenshot) or screen
    # training
    launcher: str = ""  # "" = training in this process; else the command that launches it (accelerate launch …)
    dtype: str = "float32"  # training dtype
    gradient_checkpointing: bool = False
    train_layers: int = 8  # top decoder layers trained (0 = all)
    batch_rows: int = 8  # sft rows per optimizer step
    bc_epochs: int = 5  # sft epochs on the expert replays (the demo's 5 at 3e-4: the best pass@4 on valid of 1-5)
    lr_bc: float = 3e-4
    rl_iterations: int = 2  # rollout + grpo iterations per RL phase
    rl_tasks: int = 6  # tasks played per iteration, drawn afresh each iteration (0 = all)
    rl_split: int = 0  # > 0: RL plays tasks of a split of this many (SUITE/rl), fresh instances of train's
    # templates that BC never imitated; 0: RL plays train's, on which BC ends near-perfect
    dynamic_sampling: int = 0  # DAPO: up to N more draws of rl_tasks tasks while fewer than rl_tasks groups have signal
    rl_draw: str = "uniform"  # uniform: rl_tasks drawn at random; stratified: the templates in turns (every template
    # in each update, as far as rl_tasks allows); signal: towards templates whose groups can teach
    # (stages/curriculum.py: each template weighted by its chance of a group neither all wins nor all losses,
    # from this run's earlier plays); gain: that, times the share of its plays still lost
    rl_loop: str = "sync"  # sync: N × (rollout → grpo); async: `async-rl`, rl_tasks groups an update, desktops never idle
    max_lag: int = 1  # the async loop's bound on the versions a trained group may lag behind
    track: int = 0  # N > 0: every RL iteration's policy is evaluated greedily on the first N eval tasks, and its
    # chance of BC's first answers taken per template: the iterations table's success, retention and drift
    samples: int = 4  # G
    # every RL update's settings, by `computerrl grpo`'s names (declared there, with their help); each phase's
    # start is its KL reference. `--set grpo.lr=1e-5` changes one, a file's `grpo:` mapping some.
    grpo: dict = dataclasses.field(default_factory=lambda: dict(DEMO_GRPO))
    k: int = 4  # successful trajectories per task kept for Entropulse
    entropulse_epochs: int = 2
    lr_entropulse: float = 1e-5  # the demo's: the best pass@4 on valid of 5e-5, 1e-5, hotter plays, expert rows
    entropulse_expert: bool = False  # Entropulse also trains on the expert replays (BC's data)
    entropulse_temperature: float = 0.0  # > 0: Entropulse also keeps the successes of G plays of rl_tasks train
    # tasks at this temperature by phase 1's policy (more varied successes than its T = 1 rollouts)

    def __post_init__(self):
        if self.rl_loop not in ("sync", "async"):
            raise ValueError(f"rl_loop={self.rl_loop!r}: expected sync or async")
        if self.rl_draw not in RL_DRAWS:
            raise ValueError(f"rl_draw={self.rl_draw!r}: expected one of {', '.join(RL_DRAWS)}")
        if self.rl_draw != "uniform" and self.rl_loop == "async":
            raise ValueError(f"rl_draw={self.rl_draw}: with rl_loop=sync only (async-rl draws its own tasks)")
        from computerrl.stages.grpo import update_settings

        self.grpo = update_settings(self.grpo, "grpo: ")
        if self.stop_after not in ("", *PHASES) or (self.stop_after == "base" and not self.eval_base):
            raise ValueError(f"stop_after={self.stop_after!r}: expected one of {', '.join(PHASES[1:])} "
                             "(or base, with eval_base)")


FIELDS = [f.name for f in dataclasses.fields(Schedule)]
PRESETS = Path(__file__).with_name("presets")  # NAME.yaml: the settings a preset changes


def preset_names() -> list[str]:
    return sorted(p.stem for p in PRESETS.glob("*.yaml"))


def load_config(path: Path) -> dict[str, Any]:
    """A settings file (YAML: KEY: VALUE for any of Schedule's fields; `extends: PRESET` starts from a
    preset's), checked against the fields' types; ValueError names the file and the key."""
    import yaml

    try:
        data = yaml.safe_load(Path(path).read_text()) or {}
    except (OSError, yaml.YAMLError) as e:
        raise ValueError(f"{path}: {e}") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected KEY: VALUE lines, got {type(data).__name__}")
    base = data.pop("extends", None)
    if base is not None and (base not in preset_names() or PRESETS / f"{base}.yaml" == Path(path)):
        raise ValueError(f"{path}: extends {base!r}: expected another preset, one of {', '.join(preset_names())}")
    for key, value in data.items():
        if key not in FIELDS:
            raise ValueError(f"{path}: unknown setting {key!r}; known: {', '.join(FIELDS)}")
        data[key] = typed(key, value, f"{path}: ")
    return merged(load_config(PRESETS / f"{base}.yaml") if base else {}, data)


def merged(settings: dict[str, Any], more: dict[str, Any]) -> dict[str, Any]:
    """`settings` changed by `more`; their `grpo` mappings merge (a file sets the GRPO settings it names)."""
    return settings | more | {"grpo": settings.get("grpo", {}) | more.get("grpo", {})}


def schedule(preset: str = "demo", config: Path | None = None, assignments: list[str] = ()) -> Schedule:
    """The preset's settings, then the config file's, then the KEY=VALUE assignments'."""
    if preset not in preset_names():
        raise ValueError(f"unknown preset {preset!r}; known: {', '.join(preset_names())}")
    settings = merged({"grpo": DEMO_GRPO}, load_config(PRESETS / f"{preset}.yaml"))
    settings = merged(settings, load_config(config) if config else {})
    return override(Schedule(**settings), list(assignments))


def show_config(s: Schedule) -> str:
    """The whole settings as a file --config takes."""
    import yaml

    return yaml.safe_dump(dataclasses.asdict(s), sort_keys=False)


def override(s: Schedule, assignments: list[str]) -> Schedule:
    """`s` with KEY=VALUE assignments applied (each value read as its field's type; grpo.KEY=VALUE sets one
    of the RL updates' settings)."""
    changes: dict[str, Any] = {"grpo": dict(s.grpo)}
    for item in assignments:
        key, eq, value = item.partition("=")
        if eq and key.startswith("grpo."):
            changes["grpo"][key.removeprefix("grpo.")] = value  # typed by Schedule's check
            continue
        if not eq or key not in FIELDS or key == "grpo":
            raise ValueError(f"--set {item!r}: expected KEY=VALUE with KEY one of {', '.join(FIELDS)} "
                             "(grpo.KEY for an RL update's setting)")
        changes[key] = typed(key, value, f"--set {item!r}: ")
    return dataclasses.replace(s, **changes)


def typed(key: str, value: Any, where: str) -> Any:
    """`value` (a --set string, or as YAML read it: 1e-5 without a dot is a string there) as the type of
    Schedule's field `key`; ValueError, prefixed by `where`, when it is none."""
    from computerrl.data.config import coerce
    from computerrl.stages.grpo import update_settings

    if key == "grpo":
        if not isinstance(value, dict):
            raise ValueError(f"{where}grpo takes a mapping of `computerrl grpo`'s settings, not {value!r}")
        return update_settings(value, f"{where}grpo: ")
    return coerce(key, value, getattr(Schedule(), key), where)


class Steps:
    """Runs (or, dry, prints) the schedule's steps; a step returns its stage's result (None when dry
    or launched)."""

    TRAINING = ("sft", "grpo")
    PLAYING = ("tasks-build", "eval", "rollout", "async-rl")  # on the desktops

    def __init__(self, s: Schedule, console, dry_run: bool, start_desktops: Callable[[], None] = lambda: None):
        self.s, self.console, self.dry_run = s, console, dry_run
        self.start_desktops = start_desktops  # called once, before the first step that plays
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
        if not self.desktops_started:
            self.desktops_started = True
            self.start_desktops()


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


def run(s: Schedule, out: Path, model: str, seed: int, console=None, *, dry_run: bool = False) -> list[dict]:
    """The schedule for one seed into `out`; prints its table and returns its phase rows."""
    from rich.console import Console

    from computerrl.data.report import (drift_table, iteration_table, phase_figures, schedule_plot, schedule_report,
                                        untrained)
    from computerrl.stages.curriculum import stratified_draw, weighted_draw

    console = console or Console(soft_wrap=True)
    out = Path(out)
    tasks, envs = Path(s.suite) if s.suite else out / "tasks", out / "envs"
    built, rl_pool = (tasks / "train").exists(), tasks / ("rl" if s.rl_split else "train")
    if s.rl_split and not dry_run and built and not rl_pool.exists():  # said before any desktop starts
        raise ValueError(f"rl_split={s.rl_split}: the suite {tasks} has no rl split (build a new one, or set "
                         "suite to another folder)")

    def start_desktops() -> None:
        """Before the first step that plays (none, when a rerun finds every step done): the desktops read the
        suite's files (written by tasks build, before its replays need them)."""
        if step("spawn-envs", out=envs, count=s.envs, backend=s.backend, cache=tasks / "files", detach=True):
            raise RuntimeError(f"the desktops did not start; see {envs}")

    step = Steps(s, console, dry_run, start_desktops)
    if envs.exists():
        step("spawn-envs", out=envs, stop=True)  # desktops an interrupted run left behind
    playing = dict(envs=envs, max_steps=s.max_steps, max_new_tokens=s.max_new_tokens, budgets=s.budgets,
                   engine=s.engine, seed=seed, screens=s.screens, coordinates=s.coordinates)
    training = dict(train_layers=s.train_layers, dtype=s.dtype, gradient_checkpointing=s.gradient_checkpointing)
    phases: list[dict] = []
    history: list[list[Path]] = []  # the RL phases' rollouts so far, one list an iteration (rl_draw signal, gain)
    eval_tasks = Path(s.eval_tasks) if s.eval_tasks else tasks / "test"

    def evaluate(phase: str, checkpoint: str) -> None:
        console.rule(f"eval: {phase}")
        summary = step("eval", tasks=eval_tasks, model=checkpoint, limit=s.eval_limit, screenshots=False,
                       out=out / f"eval-{phase}", **playing)
        sampled = {}
        if s.explore_tasks and s.explore_samples:
            console.rule(f"eval: {phase}, {s.explore_samples} plays a task at T = 1")
            sampled = step("eval", tasks=eval_tasks, model=checkpoint, limit=s.explore_tasks, screenshots=False,
                           samples=s.explore_samples, temperature=1.0, out=out / f"explore-{phase}", **playing)
        if not dry_run:
            phases.append(phase_figures(out, phase, summary, sampled))
        if phase == s.stop_after:
            raise _Stopped

    def evaluate_trained(phase: str, checkpoint: str, previous: str) -> None:
        """`evaluate`, unless the phase had nothing to train on: its policy is then `previous`'s, and so are
        its evaluations (the same policy played again would measure only the noise)."""
        why = "" if dry_run else untrained(out, phase)
        if why:
            console.print(f"[yellow]{phase}: nothing to train on ({why}); its policy is {previous}'s, and so are its "
                          "evaluations[/]")  # the report's line says so too
            for kind in ("eval", "explore"):
                copy_done(out / f"{kind}-{previous}", out / f"{kind}-{phase}")
        evaluate(phase, checkpoint)

    def sft(folder: str, start: str, data: list[Path], epochs: int, lr: float) -> str:
        console.rule(f"sft → {folder}")
        step("sft", model=start, out=out / folder, data=data, epochs=epochs, lr=lr, batch_rows=s.batch_rows, seed=seed,
             **training)
        return str(out / folder)

    def train_draw(to: Path, shuffle: int, part: int = 0, drawn: list[Path] = ()) -> Path | None:
        """rl_tasks tasks of RL's pool (all of it when rl_tasks is 0): with rl_draw=uniform part `part` of
        the `shuffle` seed's order; stratified, the templates in turns; with signal or gain, weighted by the
        earlier plays (`history`); none of those in the draws `drawn` before it."""
        if not s.rl_tasks or dry_run:
            return rl_pool
        if s.rl_draw == "stratified":
            return stratified_draw(rl_pool, to, s.rl_tasks, shuffle, drawn_ids(drawn))
        if s.rl_draw != "uniform":
            return weighted_draw(rl_pool, to, s.rl_tasks, shuffle, history, s.samples, drawn_ids(drawn), s.rl_draw)
        return _task_draw(rl_pool, to, s.rl_tasks, shuffle, part=part)

    def rl_phase(folder: str, start: str, first: int) -> tuple[str, list[Path]]:
        """The phase's RL iterations from `start`: its last policy and its rollouts (also appended to
        `history`, one list an iteration)."""
        if s.rl_loop == "async":
            return async_phase(folder, start, first)
        policy, rollouts = start, []
        for i in range(first, first + s.rl_iterations):
            console.rule(f"RL {folder}: iteration {i}")
            batches: list[Path] = []
            draws: list[Path] = []
            history.append(batches)  # dynamic sampling's further draws see the groups just played
            for extra in range(1 + (s.dynamic_sampling if s.rl_tasks and not dry_run else 0)):
                if extra and groups_with_signal(batches) >= s.rl_tasks:
                    break  # the batch holds enough groups that can teach something
                suffix = f"-{extra}" if extra else ""
                draw = train_draw(out / folder / f"tasks-{i}{suffix}", seed + i, extra, draws)
                if draw is None:
                    break  # every train task was drawn
                draws.append(draw)
                batches.append(out / folder / f"rollout-{i}{suffix}")
                step("rollout", tasks=draw, model=policy, samples=s.samples, temperature=1.0, iteration=i,
                     out=batches[-1], **(playing | {"seed": seed + i + 1000 * extra}))
            rollouts += batches
            step("grpo", rollouts=batches, model=policy, ref=start, out=out / folder / f"policy-{i}", seed=seed + i,
                 **(training | s.grpo))
            policy = str(out / folder / f"policy-{i}")
            track(folder, i, policy)
        return policy, rollouts

    def async_phase(folder: str, start: str, first: int) -> tuple[str, list[Path]]:
        console.rule(f"RL {folder}: asynchronous, {s.rl_iterations} versions")
        run_dir = out / folder / "async"
        step("async-rl", tasks=rl_pool, model=start, samples=s.samples, groups=s.rl_tasks or s.samples,
             updates=s.rl_iterations, max_lag=s.max_lag, temperature=1.0, launcher=s.launcher, out=run_dir,
             grpo=[f"{k}={v}" for k, v in (training | s.grpo).items()],
             **(playing | {"seed": seed + first}))
        for v in range(1, s.rl_iterations + 1):
            track(folder, v, str(run_dir / f"policy-{v}"))
        return str(run_dir / f"policy-{s.rl_iterations}"), [run_dir / f"rollout-{v}" for v in
                                                            range(1, s.rl_iterations + 1)]

    def track(folder: str, i: int, policy: str) -> None:
        """With `track`: the iteration's policy on the first eval tasks (RUN/<phase>/eval-i) and its chance of
        BC's first answers per template (RUN/<phase>/drift-i.json; BC's own in RUN/drift-bc.json)."""
        if not s.track:
            return
        step("eval", tasks=eval_tasks, model=policy, limit=s.track, screenshots=False, out=out / folder / f"eval-{i}",
             **playing)
        if not dry_run:
            write_drift(out / "drift-bc.json", out / "eval-bc" / "steps", out / "bc")
            write_drift(out / folder / f"drift-{i}.json", out / "eval-bc" / "steps", policy)

    def entropulse_plays(policy: str) -> Path:
        step("rollout", tasks=train_draw(out / "entropulse-tasks", seed + 500), model=policy, samples=s.samples,
             temperature=s.entropulse_temperature, out=out / "entropulse-plays", **(playing | {"seed": seed + 500}))
        return out / "entropulse-plays"

    try:
        if not built:
            console.rule("tasks build")
            step("tasks-build", out=tasks, train=s.train_tasks, test=s.test_tasks, valid=s.valid_tasks,
                 rl=s.rl_split, seed=seed, templates=s.templates, holdout_templates=s.holdout, envs=envs, model=model,
                 budgets=s.budgets)
        if s.eval_base:
            evaluate("base", model)
        bc = sft("bc", model, [tasks / "expert"], s.bc_epochs, s.lr_bc)
        evaluate("bc", bc)
        rl1, rollouts1 = rl_phase("rl1", bc, 1)
        evaluate_trained("rl1", rl1, "bc")
        console.rule("Entropulse")
        if s.entropulse_temperature:
            rollouts1.append(entropulse_plays(rl1))
        kept = step("filter-success", rollouts=rollouts1, out=out / "successes", k=s.k, seed=seed)
        pulse = rl1  # RL 1 with no success: Entropulse keeps its checkpoint as it is
        if dry_run or kept["rows"]:
            pulse = sft("entropulse", rl1, [out / "successes"] + ([tasks / "expert"] if s.entropulse_expert else []),
                        s.entropulse_epochs, s.lr_entropulse)
        evaluate_trained("entropulse", pulse, "rl1")
        rl2, _ = rl_phase("rl2", pulse, 1 + s.rl_iterations)
        evaluate_trained("rl2", rl2, "entropulse")
    except _Stopped:
        console.print(f"stopped after {s.stop_after}, as asked (stop_after)")
    finally:
        if step.desktops_started:
            step("spawn-envs", out=envs, stop=True)
    if not dry_run:
        console.print(schedule_report({seed: phases}))
        if (iterations := iteration_table(out)).row_count:
            console.print(iterations)
        if drift := drift_table(out):
            console.print(drift)
        schedule_plot(out, [p["phase"] for p in phases])
        console.print(f"training curves: {out / 'schedule.png'}")
    return phases


class _Stopped(Exception):
    """The phase `stop_after` names is evaluated: the schedule ends there."""


def _task_draw(train: Path, out: Path, n: int, seed: int, part: int = 0) -> Path | None:
    """Part `part` of n train tasks of the seed's shuffle (one RL iteration's batch, and its dynamic
    sampling's further draws, none drawn twice), as a task dataset; None when the tasks ran out."""
    from computerrl.data.datasets_io import load, save_atomic

    if not out.exists():
        ds = load(train)
        chosen = range(part * n, min((part + 1) * n, len(ds)))
        if not chosen:
            return None
        save_atomic(ds.shuffle(seed=seed).select(chosen), out)
    return out


def copy_done(done: Path, to: Path) -> None:
    """A finished stage's folder copied whole to `to`, which then holds it done (unless `to` exists)."""
    import shutil

    if done.exists() and not to.exists():
        partial = to.with_name(f".{to.name}.copy")
        shutil.rmtree(partial, ignore_errors=True)
        shutil.copytree(done, partial)
        partial.rename(to)


def drawn_ids(draws: list[Path]) -> set[str]:
    """The task ids of these task datasets."""
    from computerrl.data.datasets_io import load

    return {task for d in draws for task in load(d)["task_id"]}


def write_drift(to: Path, reference: Path, checkpoint: str, per_template: int = 4) -> None:
    """`checkpoint`'s chance of the reference eval's first answers, per template (policy/drift.py), as JSON at
    `to` (kept: a resumed run does not compute it again)."""
    import json

    from computerrl.data.files import write_atomic
    from computerrl.policy.drift import first_answers, template_chances

    if not to.exists():
        write_atomic(to, json.dumps(template_chances(first_answers(reference, per_template), checkpoint)))


def groups_with_signal(batches: list[Path]) -> int:
    """GRPO groups of these rollouts whose rewards differ (a flat group teaches nothing)."""
    from computerrl.data.datasets_io import step_rows
    from computerrl.policy.grpo_loss import group_advantages

    rows = [r for r in step_rows(batches, ["group_id", "reward", "error"]) if not r["error"]]
    _, flat = group_advantages([r["reward"] for r in rows], [r["group_id"] for r in rows])
    return len({r["group_id"] for r in rows} - flat)
