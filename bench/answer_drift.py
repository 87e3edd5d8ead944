"""How far each checkpoint moved from a reference's answers, template by template.

    python -m computerrl.bench.answer_drift runs/demo/seed-2/eval-bc/steps \\
        runs/demo/seed-2/bc runs/demo/seed-2/rl1/policy-1 runs/demo/seed-2/rl1/policy-2

The chance each checkpoint samples exactly the reference eval's first answers, per template
(`policy/drift.py`). Prints a table, then one JSON line of results.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

from rich.console import Console
from rich.table import Table


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("steps", type=Path, help="an eval's steps dataset: the reference's answers")
    ap.add_argument("checkpoints", type=Path, nargs="+", help="checkpoint folders, in the order to compare")
    ap.add_argument("--per-template", type=int, default=4, help="tasks per template (each a forward pass)")
    args = ap.parse_args()
    from computerrl.policy.drift import first_answers, template_chances

    picked = first_answers(args.steps, args.per_template)
    common = Path(os.path.commonpath([c.resolve() for c in args.checkpoints]))  # the columns name what differs
    labels = [str(c.resolve().relative_to(common)) if len(args.checkpoints) > 1 else c.name for c in args.checkpoints]
    table = Table("template", *labels, title=f"chance of {args.steps}'s first answers")
    chances = {}
    for checkpoint in args.checkpoints:
        chances[str(checkpoint)] = template_chances(picked, checkpoint)
    for template in picked:
        table.add_row(template, *(f"{chances[str(c)][template]:.3f}" for c in args.checkpoints))
    Console().print(table)
    print(json.dumps({"tasks_per_template": args.per_template, "chance": chances}))


if __name__ == "__main__":
    main()
