"""`computerrl filter-success`: the successful trajectories of any number of step datasets, as
chat rows for `sft` (the Entropulse phase: supervised training on the policy's own successes).

A trajectory is kept when it succeeded and was not aborted; each of its steps becomes one row
whose `messages` are the chat the model saw followed by its answer. At most k trajectories are
kept per task, drawn with the seed, so tasks the policy already solves every time do not crowd
out the rest; identical trajectories (the same answers step for step) count once. Steps whose
action was invalid are dropped from a kept trajectory (they earned reward 0 in GRPO too).

Reads:  --rollouts, one or more step datasets (rollout output, or `tasks build`'s expert replays).
Writes: --out, an SFT dataset (schemas.SFT_FEATURES) with lineage.json and summary.json.

    computerrl filter-success --rollouts runs/rollout-1 --rollouts runs/rollout-2 --out runs/successes
    computerrl filter-success --rollouts runs/rl1/rollout-* --k 8 --seed 1 --out runs/successes
"""

from __future__ import annotations

import dataclasses
import json
import random
from collections import defaultdict
from pathlib import Path

from computerrl.data.config import OUT, SEED, require_datasets, setting
from computerrl.data.folders import STEPS


@dataclasses.dataclass
class FilterSuccessConfig:
    rollouts: list[Path] = setting([], "Step dataset (a rollout); repeat to pool several.")
    out: Path = setting(Path("runs/successes"), OUT, "--out", "-o")  # the SFT dataset
    k: int = setting(4, "Trajectories kept per task at most (-1 = all).")
    seed: int = setting(0, SEED)  # which k are drawn
    # a rerun replaces the output: filtering is cheap and deterministic
    overwrite: bool = setting(True, "Replace an existing output (filtering is cheap).")

    def __post_init__(self):
        self.rollouts, self.out = [Path(p) for p in self.rollouts], Path(self.out)
        if not self.rollouts:
            raise ValueError("give at least one step dataset with --rollouts")
        require_datasets(self.rollouts, "--rollouts", STEPS)
        if self.k == 0 or self.k < -1:
            raise ValueError("--k must be >= 1, or -1 for all")


def run(cfg: FilterSuccessConfig, console=None) -> dict:
    import datasets
    from rich.console import Console

    from computerrl.data.datasets_io import lineage, load, save_atomic
    from computerrl.data.schemas import SCREENS, SCREENSHOT, SCREENSHOTS, SFT_FEATURES, SFT_WITH_SCREENSHOTS_FEATURES, \
        check_columns

    console = console or Console(soft_wrap=True)
    needed = ["task_id", "domain", "group_id", "sample", "step", "messages", "response", "action_valid", "success",
              "error", "policy_version"]
    trajectories: dict[tuple, list[dict]] = defaultdict(list)
    n_rows, vision = 0, False
    for k, path in enumerate(cfg.rollouts):
        ds = load(path)
        check_columns(ds, needed, f"step dataset {path}")
        seen_screens = SCREENS in ds.column_names and any(ds[SCREENS])  # a vision policy's rows
        vision = vision or seen_screens
        ds = ds.select_columns(needed + ([SCREENS, SCREENSHOT] if seen_screens else []))
        n_rows += len(ds)
        for row in ds:
            trajectories[(k, row["group_id"], row["sample"])].append(row)
    kept_by_task: dict[str, list[list[dict]]] = defaultdict(list)
    seen: set[tuple] = set()
    for key in sorted(trajectories, key=str):
        steps = sorted(trajectories[key], key=lambda r: r["step"])
        if not steps[0]["success"] or steps[0]["error"]:
            continue
        answers = (steps[0]["task_id"], tuple(r["response"] for r in steps))
        if answers in seen:  # the same answers again teach nothing new
            continue
        seen.add(answers)
        kept_by_task[steps[0]["task_id"]].append(steps)
    rng = random.Random(cfg.seed)
    rows, n_kept = [], 0
    for task_id in sorted(kept_by_task):
        chosen = kept_by_task[task_id]
        if cfg.k != -1 and len(chosen) > cfg.k:
            chosen = rng.sample(chosen, cfg.k)
        n_kept += len(chosen)
        for steps in chosen:
            rows += [{"task_id": r["task_id"], "domain": r["domain"], "trajectory": f"{r['group_id']}/{r['sample']}",
                      "step": r["step"], "policy_version": r["policy_version"],
                      "messages": [*r["messages"], {"role": "assistant", "content": r["response"]}],
                      **({SCREENSHOTS: [s[SCREENSHOT] for s in steps[r["step"] + 1 - (r.get(SCREENS) or 0):r["step"] + 1]]}
                         if vision else {})}
                     for r in steps if r["action_valid"]]
    features = SFT_WITH_SCREENSHOTS_FEATURES if vision else SFT_FEATURES
    out = datasets.Dataset.from_list(rows, features=features) if rows else \
        datasets.Dataset.from_dict({c: [] for c in features}, features=features)
    n_successes = sum(1 for t in trajectories.values() if t[0]["success"] and not t[0]["error"])
    summary = {"step_rows_read": n_rows, "trajectories_read": len(trajectories), "successful": n_successes,
               "tasks_with_success": len(kept_by_task), "trajectories_kept": n_kept,
               "rows": len(rows)}
    path = save_atomic(out, cfg.out, lineage=lineage("filter-success", cfg, {"rollouts": [str(p) for p in cfg.rollouts]}))
    (path / "summary.json").write_text(json.dumps(summary, indent=2))
    console.print(f"wrote {cfg.out}: {summary['rows']} rows from {summary['trajectories_kept']} successful trajectories "
                  f"of {summary['tasks_with_success']} tasks ({summary['successful']} of "
                  f"{summary['trajectories_read']} trajectories succeeded)")
    return summary
