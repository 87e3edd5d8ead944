"""The Entropulse schedule's settings: `Schedule`, whose defaults are the CPU demo's, and the presets, one
YAML file here per preset of the settings it changes (`computerrl entropulse --preset NAME`); a user's file
(`--config`) and `--set KEY=VALUE` change them further. The schedule itself: stages/schedule.py."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

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
# The demo's settings of the stages, by the stages' own names, where they differ from their defaults: every
# playing step's (rollout, eval, async-rl): 4 steps, answers of 48 tokens, the smallest prompts; every training
# step's (sft, grpo): the top 8 layers; every sft step's: 8 rows an optimizer step; every RL update's: 4 optimizer
# steps a pass over the batch (the rows split evenly; chosen on valid), at 5e-5.
DEMO = {"play": {"max_steps": 4, "max_new_tokens": 48, "budgets": "tiny"}, "train": {"train_layers": 8},
        "sft": {"batch_rows": 8}, "grpo": {"lr": 5e-5, "updates_per_epoch": 4}}
SET_BY_THE_SCHEDULE = {  # each stage's settings the schedule gives itself, step by step
    "play": ("tasks", "envs", "model", "out", "samples", "temperature", "limit", "seed", "screenshots", "overwrite"),
    "train": ("model", "out", "lr", "seed", "overwrite"),
    "sft": ("data", "model", "out", "epochs", "lr", "seed", "overwrite")}
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
    # the desktops, and every playing step's settings by `computerrl rollout`'s names (engine, max_steps,
    # max_new_tokens, budgets, screens, …; declared there, with their help): `--set play.max_steps=8`
    envs: int = 4  # desktops; the model answers all of them in one batch
    backend: str = "local"  # spawn-envs backend: local or docker
    play: dict = dataclasses.field(default_factory=lambda: dict(DEMO["play"]))
    # training: every training step's settings by `computerrl sft`'s and `grpo`'s shared names (dtype,
    # train_layers, gradient_checkpointing, …), every sft step's by sft's (batch_rows, …)
    launcher: str = ""  # "" = training in this process; else the command that launches it (accelerate launch …)
    train: dict = dataclasses.field(default_factory=lambda: dict(DEMO["train"]))
    sft: dict = dataclasses.field(default_factory=lambda: dict(DEMO["sft"]))
    bc_epochs: int = 5  # sft epochs on the expert replays (the demo's 5 at 3e-4: the best pass@4 on valid of 1-5)
    lr_bc: float = 3e-4
    rl_iterations: int = 2  # rollout + grpo iterations per RL phase
    rl_tasks: int = 6  # tasks played per iteration, drawn afresh each iteration (0 = all)
    rl_split: int = 0  # > 0: RL plays tasks of a split of this many (SUITE/rl), fresh instances of train's
    # templates that BC never imitated; 0: RL plays train's, on which BC ends near-perfect
    dynamic_sampling: int = 0  # DAPO: up to N more draws of rl_tasks tasks while fewer than rl_tasks groups have signal
    rl_draw: str = "uniform"  # uniform: rl_tasks drawn at random; stratified: the templates in turns (every template
    # in each update, as far as rl_tasks allows); signal: towards templates whose groups can teach
    # (play/curriculum.py: each template weighted by its chance of a group neither all wins nor all losses,
    # from this run's earlier plays); gain: that, times the share of its plays still lost
    rl_loop: str = "sync"  # sync: N × (rollout → grpo); async: `async-rl`, rl_tasks groups an update, desktops never idle
    max_lag: int = 1  # the async loop's bound on the versions a trained group may lag behind
    track: int = 0  # N > 0: every RL iteration's policy is evaluated greedily on the first N eval tasks, and its
    # chance of BC's first answers taken per template: the iterations table's success, retention and drift
    samples: int = 4  # G
    # every RL update's settings, by `computerrl grpo`'s names (declared there, with their help); each phase's
    # start is its KL reference. `--set grpo.lr=1e-5` changes one, a file's `grpo:` mapping some.
    grpo: dict = dataclasses.field(default_factory=lambda: dict(DEMO["grpo"]))
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
        for name in MAPPINGS:
            setattr(self, name, mapping_settings(name, getattr(self, name), f"{name}: "))
        if self.stop_after not in ("", *PHASES) or (self.stop_after == "base" and not self.eval_base):
            raise ValueError(f"stop_after={self.stop_after!r}: expected one of {', '.join(PHASES[1:])} "
                             "(or base, with eval_base)")


FIELDS = [f.name for f in dataclasses.fields(Schedule)]
MAPPINGS = tuple(DEMO)  # the fields that hold a stage's settings by its names


def mapping_settings(mapping: str, given: dict | list[str], where: str) -> dict:
    """One of the mappings of stage settings, each checked against the stage's config as the stage checks it."""
    from computerrl.data.config import stage_settings

    if mapping == "grpo":
        from computerrl.stages.grpo import update_settings

        return update_settings(given, where)
    if mapping == "play":
        from computerrl.play.config import PlayConfig as config
    elif mapping == "train":
        from computerrl.policy.trainer import TrainConfig as config
    else:
        from computerrl.stages.sft import SFTConfig as config
    return stage_settings(given, config, SET_BY_THE_SCHEDULE[mapping], where, mapping)


PRESETS = Path(__file__).parent  # NAME.yaml: the settings a preset changes


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
    """`settings` changed by `more`; their mappings of stage settings merge (a file sets the ones it names)."""
    return settings | more | {m: settings.get(m, {}) | more.get(m, {}) for m in MAPPINGS}


def schedule(preset: str = "demo", config: Path | None = None, assignments: list[str] = ()) -> Schedule:
    """The preset's settings, then the config file's, then the KEY=VALUE assignments'."""
    if preset not in preset_names():
        raise ValueError(f"unknown preset {preset!r}; known: {', '.join(preset_names())}")
    settings = merged(DEMO, load_config(PRESETS / f"{preset}.yaml"))
    settings = merged(settings, load_config(config) if config else {})
    return override(Schedule(**settings), list(assignments))


def show_config(s: Schedule) -> str:
    """The whole settings as a file --config takes."""
    import yaml

    return yaml.safe_dump(dataclasses.asdict(s), sort_keys=False)


def override(s: Schedule, assignments: list[str]) -> Schedule:
    """`s` with KEY=VALUE assignments applied (each value read as its field's type; play.KEY=VALUE, train.KEY,
    sft.KEY and grpo.KEY set one of those steps' settings, by the stage's name for it)."""
    changes: dict[str, Any] = {m: dict(getattr(s, m)) for m in MAPPINGS}
    for item in assignments:
        key, eq, value = item.partition("=")
        mapping, dot, name = key.partition(".")
        if eq and dot and mapping in MAPPINGS:
            changes[mapping] |= mapping_settings(mapping, [f"{name}={value}"], f"--set {item!r}: ")
            continue
        if not eq or key not in FIELDS or key in MAPPINGS:
            raise ValueError(f"--set {item!r}: expected KEY=VALUE with KEY one of {', '.join(FIELDS)} "
                             f"({', '.join(m + '.KEY' for m in MAPPINGS)} for a step's setting by its stage's name)")
        changes[key] = typed(key, value, f"--set {item!r}: ")
    return dataclasses.replace(s, **changes)


def typed(key: str, value: Any, where: str) -> Any:
    """`value` (a --set string, or as YAML read it: 1e-5 without a dot is a string there) as the type of
    Schedule's field `key`; ValueError, prefixed by `where`, when it is none."""
    from computerrl.data.config import coerce

    if key in MAPPINGS:
        if not isinstance(value, dict):
            raise ValueError(f"{where}{key} takes a mapping of its steps' settings by the stage's names, not {value!r}")
        return mapping_settings(key, value, f"{where}{key}: ")
    return coerce(key, value, getattr(Schedule(), key), where)
