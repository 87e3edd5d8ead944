"""docs/rl-arms.md's rule, applied as written: which RL setting the demo takes, from the arms' valid evaluations.

    python -m computerrl.bench.arms_rule --runs runs/arms          # `just rl-arms-rule`

Reads RUNS/NAME/seed-S/eval-bc/results and eval-rl1/results (greedy, one play a valid task) of every arm. For
each arm with every seed of --seeds done:
1. its paired success over BC: the mean over the seeds of (RL 1 − BC) on the same tasks, in points, with a
   seed-clustered 90% interval (tasks resampled within each seed, the seeds kept; --draws bootstrap draws);
2. it qualifies when that interval's lower end is above 0 and no train template loses more than 10 points
   from BC to RL 1, pooled over the seeds;
3. the chosen setting is the qualifying arm with the highest mean; arms within 1 point of it go to the one
   with fewer changes from plain. No arm qualifying: the demo keeps plain (today's setting).
Prints a table, then one JSON line.
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

# settings each arm changes from plain (docs/rl-arms.md's table): the rule's tie-break
CHANGES = {"plain": 0, "anchor-nll": 2, "anchor-kl": 2, "small": 2, "broad": 3}
WORST_TEMPLATE_LOSS = 10.0  # points
TIE = 1.0  # points


def outcomes(folder: Path) -> dict[str, tuple[str, float]]:
    """task id -> (template, success) of an eval folder's results."""
    from computerrl.data.datasets_io import load

    return {r["task_id"]: (r["template"], r["success_rate"]) for r in load(folder / "results")}


def seed_pairs(run: Path) -> list[tuple[str, float, float]] | None:
    """(template, BC's success, RL 1's) per valid task of one arm's seed; None while RL 1 is not evaluated."""
    if not (run / "eval-rl1" / "results").exists() or not (run / "eval-bc" / "results").exists():
        return None
    bc, rl = outcomes(run / "eval-bc"), outcomes(run / "eval-rl1")
    return [(template, won, rl[task][1]) for task, (template, won) in sorted(bc.items()) if task in rl]


def paired_gain(seeds: list[list[tuple[str, float, float]]], draws: int, rng: random.Random) -> dict:
    """Mean over seeds of RL 1 − BC (points) and its seed-clustered 90% bootstrap interval."""
    def gain(pairs):
        return 100 * sum(rl - bc for _, bc, rl in pairs) / len(pairs)

    mean = sum(gain(p) for p in seeds) / len(seeds)
    boot = sorted(sum(gain(rng.choices(p, k=len(p))) for p in seeds) / len(seeds) for _ in range(draws))
    return {"mean": mean, "low": boot[int(0.05 * draws)], "high": boot[int(0.95 * draws) - 1]}


def template_losses(seeds: list[list[tuple[str, float, float]]]) -> dict[str, float]:
    """Per template, BC − RL 1 pooled over the seeds, in points (positive: RL 1 lost)."""
    totals: dict[str, list[float]] = {}
    for pairs in seeds:
        for template, bc, rl in pairs:
            t = totals.setdefault(template, [0.0, 0.0, 0])
            t[0], t[1], t[2] = t[0] + bc, t[1] + rl, t[2] + 1
    return {template: 100 * (bc - rl) / n for template, (bc, rl, n) in sorted(totals.items())}


def decide(runs: Path, seeds: list[int], draws: int = 10_000) -> dict:
    """Every arm's figures, and the chosen one (the rule above). Valid tasks are of train templates only."""
    rng = random.Random(0)
    arms = {}
    for folder in sorted(p for p in runs.iterdir() if p.is_dir() and not p.name.startswith("seed-")):
        pairs = [seed_pairs(folder / f"seed-{s}") for s in seeds]
        if any(p is None for p in pairs):
            arms[folder.name] = {"done": [s for s, p in zip(seeds, pairs) if p is not None]}
            continue
        losses = template_losses(pairs)
        figures = paired_gain(pairs, draws, rng)
        worst = max(losses, key=losses.get)
        arms[folder.name] = {**figures, "worst_template": worst, "worst_loss": losses[worst],
                             "qualifies": figures["low"] > 0 and losses[worst] <= WORST_TEMPLATE_LOSS}
    qualifying = {name: a for name, a in arms.items() if a.get("qualifies")}
    chosen = "plain"
    if qualifying:
        best = max(a["mean"] for a in qualifying.values())
        near = [name for name, a in qualifying.items() if a["mean"] >= best - TIE]
        chosen = min(near, key=lambda name: (CHANGES.get(name, 99), -qualifying[name]["mean"]))
    return {"seeds": seeds, "arms": arms, "chosen": chosen, "any_qualifies": bool(qualifying)}


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=Path, default=Path("runs/arms"))
    p.add_argument("--seeds", default="0,1", help="the BC seeds every arm must have done")
    p.add_argument("--draws", type=int, default=10_000)
    args = p.parse_args(argv)
    result = decide(args.runs, [int(s) for s in args.seeds.split(",")], args.draws)
    print(f"{'arm':12s} {'RL 1 − BC':>10s} {'90% interval':>16s}  {'worst train template':28s} qualifies")
    for name, a in result["arms"].items():
        if "mean" not in a:
            print(f"{name:12s} not done: seeds {a['done'] or 'none'} of {args.seeds}")
            continue
        print(f"{name:12s} {a['mean']:+9.1f}  [{a['low']:+6.1f}, {a['high']:+6.1f}]  "
              f"{a['worst_template']:20s} {-a['worst_loss']:+6.1f}  {'yes' if a['qualifies'] else 'no'}")
    print(f"chosen: {result['chosen']}" + ("" if result["any_qualifies"] else " (no arm qualifies: today's setting)"))
    print(json.dumps(result))
    return result


if __name__ == "__main__":
    main()
