"""`computerrl entropulse`: the paper's training schedule (`stages/schedule.py`) from a preset.

Presets (stages/presets/*.yaml): `demo` (CPU, the embedded model, ≤ 60 min on 2 cores), `quick` (the
same schedule at the smallest size that shows BC learning, ~10 min on 2 cores; its test runs it) and
`osworld` (the paper's recipe on GPUs: vLLM rollouts over a Docker fleet, accelerate/DeepSpeed training;
the Justfile's `reproduce-osworld`). `--config FILE.yaml` changes any of the schedule's settings on top of the preset
(`--show-config` prints them all, as such a file), `--set KEY=VALUE` one more; `--dry-run` prints the
steps as the commands they amount to.

    computerrl entropulse --preset quick --out runs/quick
    computerrl entropulse --preset demo --seeds 0,1,2 --out runs/demo
    computerrl entropulse --preset osworld --show-config > mine.yaml   # edit, then: --config mine.yaml
    computerrl entropulse --preset osworld --model checkpoints/GLM-4-9B-0414 --set eval_tasks=osworld/ --dry-run
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from computerrl.data.config import MODEL, OUT, SEED

HELP = ("The Entropulse schedule end to end: BC on expert replays, RL phase 1 (rollout + grpo), SFT on the policy's "
        "own successes, RL phase 2, with eval after every phase; prints the table (pooled over --seeds, with paired "
        "tests between phases) and writes RUN/schedule.png. Rerun the same command to resume.")


def command(
    preset: Annotated[str, typer.Option(help="demo (≤ 60 min on a 2-core CPU), quick (the smallest run that shows "
                                             "BC learning, ~10 min) or osworld (the paper's GPU recipe): "
                                             "stages/presets/.")] = "demo",
    config: Annotated[Optional[Path], typer.Option(help="A YAML file of the schedule's settings (KEY: VALUE), "
                                                   "applied on top of the preset; --show-config writes one.")] = None,
    show_config: Annotated[bool, typer.Option("--show-config", help="Print every setting (preset, --config and "
                                              "--set applied) as a --config file; run nothing.")] = False,
    quick: Annotated[bool, typer.Option("--quick", help="Same as --preset quick.")] = False,
    out: Annotated[Path, typer.Option("--out", "-o", help=OUT)] = Path("runs/demo"),
    model: Annotated[str, typer.Option(help=MODEL)] = "embedded",
    seed: Annotated[int, typer.Option(help=SEED)] = 0,
    seeds: Annotated[str, typer.Option(help="Comma-separated seeds: the schedule runs once per seed (OUT/seed-N) "
                                            "and one table pools them (overrides --seed).")] = "",
    set_: Annotated[Optional[list[str]], typer.Option("--set", help="KEY=VALUE: change one of the schedule's "
                                                      "settings (stages/presets: Schedule), e.g. rl_iterations=4, "
                                                      "or a stage's by its own name: play.max_steps=8 (every eval "
                                                      "and rollout), train.train_layers=0 (sft and grpo), "
                                                      "sft.batch_rows=16, grpo.lr=1e-5; repeat for more.")] = None,
    envs: Annotated[Optional[int], typer.Option(help="Desktops (default: the preset's).")] = None,
    rl_iterations: Annotated[Optional[int], typer.Option(help="Rollout + grpo iterations per RL phase.")] = None,
    samples: Annotated[Optional[int], typer.Option(help="G: trajectories per task in RL.")] = None,
    eval_base: Annotated[bool, typer.Option("--eval-base", help="Evaluate the starting model too.")] = False,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print the steps as commands; run nothing.")] = False,
    report: Annotated[bool, typer.Option("--report", help="Print the table of the phases OUT holds evaluated "
                                         "(OUT/seed-N with --seeds) and run nothing: seeds run in different "
                                         "sessions or on different machines pool into one table once their "
                                         "folders are copied in (only eval-*, explore-* and the policies' "
                                         "summary files are read, a few hundred KB a seed).")] = False,
):
    from rich.console import Console

    from computerrl.data.report import schedule_report
    from computerrl.stages.presets import schedule, show_config as settings_file
    from computerrl.stages.schedule import run

    try:
        chosen_seeds = [int(x) for x in seeds.split(",")] if seeds else [seed]
    except ValueError:
        raise typer.BadParameter(f"--seeds {seeds!r}: expected integers separated by commas, e.g. 0,1,2") from None
    shortcuts = [f"{k}={v}" for k, v in {"envs": envs, "rl_iterations": rl_iterations, "samples": samples,
                                         "eval_base": eval_base}.items() if v]
    try:
        chosen = schedule("quick" if quick else preset, config, shortcuts + (set_ or []))
    except ValueError as e:
        raise typer.BadParameter(str(e)) from None
    if show_config:
        typer.echo(settings_file(chosen), nl=False)
        return
    console = Console(soft_wrap=True)
    if report:
        from computerrl.data.report import drift_table, iteration_table, phases_done
        from computerrl.stages.presets import PHASES

        runs = {s: Path(out) / f"seed-{s}" if seeds else Path(out) for s in chosen_seeds}
        done = {s: phases_done(run_dir, list(PHASES)) for s, run_dir in runs.items()}
        if empty := [s for s, rows in done.items() if not rows]:
            raise typer.BadParameter(f"no evaluated phase under {out} for seed(s) {', '.join(map(str, empty))}",
                                     param_hint="--out")
        console.print(schedule_report(done))
        for s, run_dir in runs.items():  # each seed's flat shares and draws: its own curriculum
            if (iterations := iteration_table(run_dir, f"RL iterations, seed {s}")).row_count:
                console.print(iterations)
            if drift := drift_table(run_dir):
                console.print(drift)
        return
    by_seed = {}
    for s in chosen_seeds:
        by_seed[s] = run(chosen, Path(out) / f"seed-{s}" if seeds else Path(out), model, s, console,
                         dry_run=dry_run)
    if len(by_seed) > 1 and not dry_run:
        console.print(schedule_report(by_seed))
