"""`computerrl entropulse`: the paper's training schedule, chained from the stages, on one machine.

    tasks build → spawn-envs → [eval of the base model] → sft on expert replays (BC) → eval
      → RL phase 1: N × (rollout → grpo) → eval
      → Entropulse: filter-success over phase 1's rollouts → sft → eval
      → RL phase 2: N × (rollout → grpo), the Entropulse checkpoint as KL reference → eval
      → one table (success in- and out-of-distribution with 95% intervals, entropy, per phase)
        and RUN/schedule.png (reward and entropy across the whole schedule)

Each step is a stage's `run(cfg)` writing into RUN/<step>; a step whose output is already there is
skipped, so an interrupted schedule resumes by running the same command again. Presets:
`demo` (CPU, the embedded model, ≤ 60 min on 2 cores) and `quick` (the same schedule at the
smallest size that still runs every phase, ≤ 10 min; CI runs it). Options given explicitly override
the preset's values. The GPU recipe is the Justfile's `reproduce-osworld`, stage by stage.

    computerrl entropulse --preset quick --out runs/quick
    computerrl entropulse --preset demo --seed 1 --out runs/demo-s1
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Annotated, Optional

import typer

from computerrl.cli.options import Model, OutDir, Seed

HELP = ("The Entropulse schedule end to end on local desktops: BC on expert replays, RL phase 1 (rollout + grpo), "
        "SFT on the policy's own successes, RL phase 2, with eval after every phase; prints the table and writes "
        "RUN/schedule.png. Rerun the same command to resume.")

CALC = "calc_column_stat,calc_rename_sheet,calc_add_sheet,calc_clear_cell,calc_bold_header,calc_freeze_header"


@dataclasses.dataclass
class Schedule:
    templates: str = CALC  # task templates of the suite
    holdout: str = "calc_freeze_header"  # templates only the test split draws from (out-of-distribution)
    train_tasks: int = 24  # generated train tasks
    test_tasks: int = 18  # generated test tasks (held out: eval only)
    envs: int = 4  # desktops; the model answers all of them in one batch
    bc_epochs: int = 3  # sft epochs on the expert replays
    rl_iterations: int = 2  # rollout + grpo iterations per RL phase
    rl_tasks: int = 6  # train tasks played per iteration (drawn afresh each iteration)
    samples: int = 4  # G
    max_steps: int = 4  # steps per trajectory (rollout and eval); the reference solutions take 3
    max_new_tokens: int = 48  # answer cap
    budgets: str = "tiny"  # prompt budgets (policy.prompt.BUDGETS): short prompts keep CPU training affordable
    grpo_epochs: int = 2
    entropulse_epochs: int = 2
    k: int = 4  # successful trajectories per task kept for Entropulse
    beta: float = 0.0  # KL weight in RL (phase 2's reference is the Entropulse checkpoint)
    lr_bc: float = 3e-4
    lr_rl: float = 5e-5
    lr_entropulse: float = 5e-5
    train_layers: int = 8  # top decoder layers trained (0 = all)
    eval_tasks: int = 12  # test tasks evaluated, the first N (0 = all; the suite interleaves templates)
    eval_base: bool = False  # evaluate the starting model too (the paper's table starts at BC)


PRESETS = {
    "demo": Schedule(),
    "quick": Schedule(templates="calc_column_stat,calc_rename_sheet,calc_add_sheet", holdout="calc_add_sheet",
                      train_tasks=4, test_tasks=3, envs=2, bc_epochs=2, rl_iterations=1, rl_tasks=2, samples=2,
                      max_steps=3, max_new_tokens=40, grpo_epochs=1, entropulse_epochs=1, k=2, train_layers=2,
                      eval_tasks=0),
}


def command(
    preset: Annotated[str, typer.Option(help="demo (≤ 60 min on a 2-core CPU) or quick (≤ 10 min, CI).")] = "demo",
    quick: Annotated[bool, typer.Option("--quick", help="Same as --preset quick.")] = False,
    out: OutDir = Path("runs/demo"),
    model: Model = "embedded",
    seed: Seed = 0,
    envs: Annotated[Optional[int], typer.Option(help="Desktops (default: the preset's).")] = None,
    rl_iterations: Annotated[Optional[int], typer.Option(help="Rollout + grpo iterations per RL phase.")] = None,
    samples: Annotated[Optional[int], typer.Option(help="G: trajectories per task in RL.")] = None,
    eval_base: Annotated[bool, typer.Option("--eval-base", help="Evaluate the starting model too.")] = False,
):
    preset = "quick" if quick else preset
    if preset not in PRESETS:
        raise typer.BadParameter(f"unknown preset {preset!r}; known: {', '.join(PRESETS)}")
    chosen = {k: v for k, v in {"envs": envs, "rl_iterations": rl_iterations, "samples": samples,
                                "eval_base": eval_base}.items() if v}
    run(dataclasses.replace(PRESETS[preset], **chosen), Path(out), model, seed)


def run(s: Schedule, out: Path, model: str, seed: int, console=None) -> list[dict]:
    from rich.console import Console

    from computerrl.data.report import phase_row, schedule_plot, schedule_table
    from computerrl.stages import eval as eval_stage
    from computerrl.stages import spawn_envs, tasks_build

    console = console or Console(soft_wrap=True)
    out.mkdir(parents=True, exist_ok=True)
    tasks = out / "tasks"
    if not (tasks / "train").exists():
        console.rule("tasks build")
        tasks_build.run(tasks_build.BuildConfig(out=tasks, train=s.train_tasks, test=s.test_tasks, seed=seed,
                                                templates=s.templates, holdout_templates=s.holdout, envs=s.envs,
                                                model=model, budgets=s.budgets), console)
    envs = out / "envs"
    spawn_envs.run(spawn_envs.SpawnEnvsConfig(out=envs, stop=True))  # desktops an interrupted run left behind
    if spawn_envs.run(spawn_envs.SpawnEnvsConfig(out=envs, count=s.envs, cache=tasks / "files", detach=True)):
        raise RuntimeError(f"the desktops did not start; see {envs}")
    phases: list[dict] = []
    try:
        def evaluate(phase: str, checkpoint: str) -> None:
            console.rule(f"eval: {phase}")
            summary = eval_stage.run(eval_stage.EvalConfig(
                tasks=tasks / "test", envs=envs, model=checkpoint, max_steps=s.max_steps, limit=s.eval_tasks,
                max_new_tokens=s.max_new_tokens, budgets=s.budgets, seed=seed, screenshots=False,
                out=out / f"eval-{phase}"), console)
            phases.append(phase_row(phase, summary, out / f"eval-{phase}"))

        if s.eval_base:
            evaluate("base", model)
        bc = _sft(s, console, out / "bc", model, [tasks / "expert"], s.bc_epochs, s.lr_bc, seed)
        evaluate("bc", bc)
        rl1, rollouts1 = _rl_phase(s, console, out / "rl1", bc, bc, tasks, envs, seed, first_iteration=1)
        evaluate("rl1", rl1)
        pulse = _entropulse(s, console, out, rl1, rollouts1, seed)
        evaluate("entropulse", pulse)
        rl2, _ = _rl_phase(s, console, out / "rl2", pulse, pulse, tasks, envs, seed,
                           first_iteration=1 + s.rl_iterations)
        evaluate("rl2", rl2)
    finally:
        spawn_envs.run(spawn_envs.SpawnEnvsConfig(out=envs, stop=True))
    console.print(schedule_table(phases))
    schedule_plot(out, [p["phase"] for p in phases])
    console.print(f"training curves: {out / 'schedule.png'}")
    return phases


def _sft(s: Schedule, console, out: Path, model: str, data: list[Path], epochs: int, lr: float, seed: int) -> str:
    from computerrl.stages import sft

    console.rule(f"sft → {out.name}")
    sft.run(sft.SFTConfig(model=model, out=out, data=data, epochs=epochs, lr=lr, train_layers=s.train_layers,
                          batch_rows=8, seed=seed), console)
    return str(out)


def _rl_phase(s: Schedule, console, folder: Path, start: str, ref: str, tasks: Path, envs: Path, seed: int, *,
              first_iteration: int) -> tuple[str, list[Path]]:
    """N iterations of rollout (on rl_tasks train tasks drawn for the iteration) then grpo; `ref` is the
    KL reference (the phase's start), used when beta > 0."""
    from computerrl.stages import grpo, rollout

    policy, rollouts = start, []
    for i in range(first_iteration, first_iteration + s.rl_iterations):
        console.rule(f"RL {folder.name}: iteration {i}")
        batch = folder / f"rollout-{i}"
        rollout.run(rollout.RolloutConfig(tasks=_task_draw(tasks / "train", folder / f"tasks-{i}", s.rl_tasks, seed + i),
                                          envs=envs, model=policy, samples=s.samples, max_steps=s.max_steps,
                                          out=batch, max_new_tokens=s.max_new_tokens, budgets=s.budgets, iteration=i,
                                          seed=seed + i),
                    console)
        rollouts.append(batch)
        grpo.run(grpo.GRPOConfig(model=policy, out=folder / f"policy-{i}", rollouts=[batch], ref=ref, beta=s.beta,
                                 epochs=s.grpo_epochs, lr=s.lr_rl, train_layers=s.train_layers, seed=seed + i), console)
        policy = str(folder / f"policy-{i}")
    return policy, rollouts


def _entropulse(s: Schedule, console, out: Path, policy: str, rollouts: list[Path], seed: int) -> str:
    """SFT of the last RL checkpoint on phase 1's successes; with none, the schedule goes on from it."""
    from computerrl.stages import filter_success

    console.rule("Entropulse")
    summary = filter_success.run(filter_success.FilterSuccessConfig(rollouts=rollouts, out=out / "successes", k=s.k,
                                                                    seed=seed), console)
    if not summary["rows"]:
        console.print("[yellow]RL phase 1 had no successful trajectory: nothing to learn from, so Entropulse "
                      "keeps the RL checkpoint as it is[/]")
        return policy
    return _sft(s, console, out / "entropulse", policy, [out / "successes"], s.entropulse_epochs, s.lr_entropulse,
                seed)


def _task_draw(train: Path, out: Path, n: int, seed: int) -> Path:
    """n train tasks drawn with the seed (one RL iteration's batch), as a task dataset."""
    from computerrl.data.datasets_io import load, save_atomic

    if not out.exists():
        ds = load(train)
        save_atomic(ds.shuffle(seed=seed).select(range(min(n, len(ds)))), out)
    return out
