"""How far each checkpoint moved from a reference's answers, template by template.

    python -m computerrl.bench.answer_drift runs/demo/seed-2/eval-bc/steps \\
        runs/demo/seed-2/bc runs/demo/seed-2/rl1/policy-1 runs/demo/seed-2/rl1/policy-2

For the first step of the first --per-template tasks of each template in an eval's steps dataset (the
reference's own greedy answers, with their prompt and response token ids), the chance each checkpoint
samples exactly that answer at temperature 1, averaged per template. An RL update trained on a few
templates' rows shows here what it did to all the others: an answer that falls where no row of that
template was trained is the update spilling over. Prints a table, then one JSON line of results.
"""

from __future__ import annotations

import argparse
import json
import math
import os
from collections import defaultdict
from pathlib import Path

from rich.console import Console
from rich.table import Table


def first_answers(steps: Path, per_template: int) -> dict[str, list[dict]]:
    """The first step of the first `per_template` tasks of each template (named before the task id's
    first '-')."""
    from computerrl.data.datasets_io import load

    rows = load(steps).select_columns(["task_id", "step", "prompt_ids", "response_ids"])
    picked: dict[str, list[dict]] = defaultdict(list)
    for row in rows:
        template = row["task_id"].split("-")[0]
        if row["step"] == 0 and len(picked[template]) < per_template:
            picked[template].append(row)
    return dict(sorted(picked.items()))


def answer_chance(model, rows: list[dict]) -> float:
    """The mean chance `model` samples each row's response whole, given its prompt."""
    import torch

    from computerrl.policy.logprobs import response_logprobs

    with torch.no_grad():
        logprobs = response_logprobs(model, [r["prompt_ids"] for r in rows], [r["response_ids"] for r in rows])
    return sum(math.exp(lp.sum().item()) for lp in logprobs) / len(rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("steps", type=Path, help="an eval's steps dataset: the reference's answers")
    ap.add_argument("checkpoints", type=Path, nargs="+", help="checkpoint folders, in the order to compare")
    ap.add_argument("--per-template", type=int, default=4, help="tasks per template (each a forward pass)")
    args = ap.parse_args()
    from computerrl.policy.checkpoint import load_model

    picked = first_answers(args.steps, args.per_template)
    common = Path(os.path.commonpath([c.resolve() for c in args.checkpoints]))  # the columns name what differs
    labels = [str(c.resolve().relative_to(common)) if len(args.checkpoints) > 1 else c.name for c in args.checkpoints]
    table = Table("template", *labels, title=f"chance of {args.steps}'s first answers")
    chances = {}
    for checkpoint in args.checkpoints:
        model = load_model(checkpoint)
        chances[str(checkpoint)] = {template: answer_chance(model, rows) for template, rows in picked.items()}
    for template in picked:
        table.add_row(template, *(f"{chances[str(c)][template]:.3f}" for c in args.checkpoints))
    Console().print(table)
    print(json.dumps({"tasks_per_template": args.per_template, "chance": chances}))


if __name__ == "__main__":
    main()
