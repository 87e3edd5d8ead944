"""Can training reach the near held-out template? BC's pass@K at T = 1 on it, before any RL arm runs.

    python -m computerrl.bench.near_reach --out runs/near --seed 0 --tasks 4 --samples 16

Runs the demo's schedule up to BC (its suite, with calc_bold_column held out, its test split cut to 4 tasks a
template: only the near ones are played; BC evaluated on one test task only: the phase's figures are not what
is measured here), then plays the first --tasks near tasks of the suite's test split --samples times each at
temperature 1 with the BC checkpoint. pass@K is the unbiased
estimator over those plays. A near template whose pass@K is 0 would need more than RL to reach.
Resumes (every stage does). Prints its figures, then one JSON line of results.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def main(argv: list[str] | None = None) -> dict:
    from rich.console import Console

    from computerrl.data.datasets_io import load, save_atomic
    from computerrl.stages import eval as eval_stage
    from computerrl.stages.presets import schedule
    from computerrl.stages.schedule import run
    from computerrl.stages.spawn_envs import SpawnEnvsConfig
    from computerrl.stages.spawn_envs import run as spawn
    from computerrl.tasks.suites import all_templates

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, default=Path("runs/near"))
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--tasks", type=int, default=4, help="near test tasks played")
    p.add_argument("--samples", type=int, default=16, help="K: plays of each at T = 1")
    p.add_argument("--model", default="embedded", help="the model BC starts from")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="a setting of the demo's schedule (its smoke test: fewer tasks, one epoch)")
    args = p.parse_args(argv)
    console = Console(soft_wrap=True)
    s = schedule("demo", assignments=["stop_after=bc", "eval_limit=1", "explore_tasks=0", "test_tasks=36", *args.set])
    near = {t.name for t in all_templates() if t.near and t.name in s.holdout.split(",")}
    run_dir = args.out / f"seed-{args.seed}"
    run(s, run_dir, args.model, args.seed, console)
    test = load(run_dir / "tasks" / "test")
    picked = [i for i, t in enumerate(test["template"]) if t in near][:args.tasks]
    save_atomic(test.select(picked), run_dir / "near-tasks")
    envs = run_dir / "near-envs"
    spawn(SpawnEnvsConfig(out=envs, count=s.envs, cache=run_dir / "tasks" / "files", detach=True))
    try:
        summary = eval_stage.run(eval_stage.EvalConfig(
            tasks=run_dir / "near-tasks", envs=envs, model=str(run_dir / "bc"), samples=args.samples, temperature=1.0,
            seed=args.seed, screenshots=False, out=run_dir / f"near-pass-at-{args.samples}", **s.play), console)
    finally:
        spawn(SpawnEnvsConfig(out=envs, stop=True))
    overall = summary["overall"]
    results = {"seed": args.seed, "templates": sorted(near), "tasks": len(picked), "samples": args.samples,
               "pass_at_1": overall["success_rate"], f"pass_at_{args.samples}": overall["pass_at_k"]}
    console.print(f"BC on {len(picked)} near tasks ({', '.join(sorted(near))}), {args.samples} plays each at T = 1: "
                  f"pass@1 {overall['success_rate']:.1%}, pass@{args.samples} {overall['pass_at_k']:.1%}")
    print(json.dumps(results))
    return results


if __name__ == "__main__":
    main()
