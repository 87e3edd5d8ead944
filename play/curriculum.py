"""Which tasks an RL iteration plays: drawn towards the templates whose GRPO groups can teach.

A group of G plays teaches only when its plays neither all win nor all lose. For a template whose
plays win with probability p, that happens with probability 1 - p^G - (1 - p)^G: near 0 for a template
the policy has solved or cannot do, at most 1 - 2^(1-G) at p = 1/2. Each template's p is estimated from
the plays of this run's earlier rollouts, each iteration back counting DECAY times less (the policy has
moved since), under a uniform prior, so a template never played weighs as much as one at p = 1/2 and a
flat one keeps a small weight (the policy may yet change there). Tasks are then drawn one at a time:
a template by these weights, then one of its tasks not drawn yet.

`stratified` draws the templates in turns instead (each once per round, in a random order), so an update
holds groups of every template it can, not the two or three a small uniform draw happens to pick: what
GRPO holds still, it holds only where it sees plays.

`gain` weighs each template further by 1 - p, the share of its plays still lost. A mixed group on a
template the policy nearly always wins mends slips of sampling that its greedy answer never makes; one
on a template it mostly loses can turn that answer. Under `signal` alone the first kind is drawn most
(a group at p = 0.85 is mixed half the time, one at p = 0.06 a fifth), though the second is where
the greedy eval can gain.
"""

from __future__ import annotations

import json
import random
from collections import Counter, defaultdict
from pathlib import Path

DECAY = 0.5  # weight of an iteration's plays relative to the iteration after it


def win_estimates(history: list[list[Path]], template_of: dict[str, str]) -> dict[str, dict[str, float]]:
    """Per template: the decayed plays and wins of `history` (rollout datasets, one list per
    iteration, oldest first; an iteration not played yet is no age) and p, their posterior mean win
    rate. Aborted plays count for nothing."""
    from computerrl.data.datasets_io import step_rows

    plays: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
    for age, batches in enumerate(reversed([b for b in history if b])):
        rows = step_rows(batches, ["task_id", "group_id", "sample", "success", "error"])
        played = {(r["group_id"], r["sample"]): r for r in rows if not r["error"]}
        for r in played.values():
            counts = plays[template_of.get(r["task_id"], "")]
            counts[0] += DECAY ** age
            counts[1] += DECAY ** age * bool(r["success"])
    return {t: {"plays": round(n, 3), "wins": round(w, 3), "p": (w + 1) / (n + 2)} for t, (n, w) in plays.items()}


def signal_weight(p: float, samples: int) -> float:
    """The chance that a group of `samples` plays, each winning with probability p, is not flat."""
    return 1 - p ** samples - (1 - p) ** samples


def draw_weight(p: float, samples: int, by: str) -> float:
    """A template's weight in a draw `by` signal (its chance of a group that is not flat) or gain (that,
    times the share of its plays still lost)."""
    return signal_weight(p, samples) * ((1 - p) if by == "gain" else 1)


def weighted_draw(pool: Path, out: Path, n: int, seed: int, history: list[list[Path]], samples: int,
                  exclude: set[str] = frozenset(), by: str = "signal") -> Path | None:
    """n tasks of the task dataset `pool` (none of `exclude`) drawn by their templates' weights (draw_weight
    `by` signal or gain), saved at `out` as a task dataset with `out`.weights.json beside it (the estimates
    and weights it drew with, and what it drew); None when no task is left. Drawn again only when `out` is
    not there yet."""
    from computerrl.data.datasets_io import load, save_atomic
    from computerrl.data.files import write_atomic

    if out.exists():
        return out
    ds = load(pool)
    ids, templates = ds["task_id"], ds["template"]
    left: dict[str, list[int]] = defaultdict(list)
    for index, (task, template) in enumerate(zip(ids, templates)):
        if task not in exclude:
            left[template].append(index)
    if not left:
        return None
    estimates = win_estimates(history, dict(zip(ids, templates)))
    weights = {t: draw_weight(estimates.get(t, {"p": 0.5})["p"], samples, by) for t in sorted(left)}
    rng, chosen = random.Random(seed), []
    while len(chosen) < n and left:
        names = sorted(left)
        template = rng.choices(names, [weights[t] for t in names])[0]
        chosen.append(left[template].pop(rng.randrange(len(left[template]))))
        if not left[template]:
            del left[template]
    save_atomic(ds.select(chosen), out)
    drawn = Counter(templates[index] for index in chosen)
    write_atomic(weights_file(out), json.dumps({"estimates": estimates, "weights": weights, "drawn": drawn},
                                               indent=1))
    return out


def stratified_draw(pool: Path, out: Path, n: int, seed: int, exclude: set[str] = frozenset()) -> Path | None:
    """n tasks of the task dataset `pool` (none of `exclude`), the templates taking turns: every round draws one
    task of each template that has one left, the templates in a new random order each round. Saved at `out`
    as a task dataset; None when no task is left. Drawn again only when `out` is not there yet."""
    from computerrl.data.datasets_io import load, save_atomic

    if out.exists():
        return out
    ds = load(pool)
    rng, left = random.Random(seed), defaultdict(list)
    for index, (task, template) in enumerate(zip(ds["task_id"], ds["template"])):
        if task not in exclude:
            left[template].append(index)
    chosen = []
    while len(chosen) < n and left:
        for template in rng.sample(sorted(left), len(left)):
            if len(chosen) < n:
                chosen.append(left[template].pop(rng.randrange(len(left[template]))))
            if not left[template]:
                del left[template]
    if not chosen:
        return None
    save_atomic(ds.select(chosen), out)
    return out


def weights_file(draw: Path) -> Path:
    return draw.with_name(draw.name + ".weights.json")


def uniform_draw(train: Path, out: Path, n: int, seed: int, part: int = 0) -> Path | None:
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


def drawn_ids(draws: list[Path]) -> set[str]:
    """The task ids of these task datasets."""
    from computerrl.data.datasets_io import load

    return {task for d in draws for task in load(d)["task_id"]}


def groups_with_signal(batches: list[Path]) -> int:
    """GRPO groups of these rollouts whose rewards differ (a flat group teaches nothing)."""
    from computerrl.data.datasets_io import step_rows
    from computerrl.policy.grpo_loss import group_advantages

    rows = [r for r in step_rows(batches, ["group_id", "reward", "error"]) if not r["error"]]
    _, flat = group_advantages([r["reward"] for r in rows], [r["group_id"] for r in rows])
    return len({r["group_id"] for r in rows} - flat)
