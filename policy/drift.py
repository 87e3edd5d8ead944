"""How far a checkpoint moved from a reference's answers, template by template (`bench/answer_drift.py`,
and the schedule's iterations table with `track`).

For the first step of the first `per_template` tasks of each template in an eval's steps dataset (the
reference's own greedy answers, with their prompt and response token ids), the chance a checkpoint samples
exactly that answer at temperature 1, averaged per template. An RL update trained on a few templates' rows
shows here what it did to all the others: an answer that falls where no row of that template was trained is
the update spilling over.
"""

from __future__ import annotations

import math
from collections import defaultdict
from pathlib import Path


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


def template_chances(picked: dict[str, list[dict]], checkpoint) -> dict[str, float]:
    """`answer_chance` of each template's picked answers under `checkpoint`."""
    from computerrl.policy.checkpoint import load_model

    model = load_model(checkpoint)
    return {template: answer_chance(model, rows) for template, rows in picked.items()}


def greedy_share(checkpoint, picked: dict[str, list[dict]]) -> float:
    """The share of the picked answers' tokens that are `checkpoint`'s most likely next token, given the prompt
    and the answer so far: 1.0 when they are its own greedy answers (up to float ties)."""
    import torch

    from computerrl.policy.checkpoint import load_model

    model, agree, total = load_model(checkpoint), 0, 0
    with torch.no_grad():
        for row in (row for rows in picked.values() for row in rows):
            ids = torch.tensor([row["prompt_ids"] + row["response_ids"]])
            predicted = model(ids).logits[0, len(row["prompt_ids"]) - 1:-1].argmax(-1)
            agree += int((predicted == torch.tensor(row["response_ids"])).sum())
            total += len(row["response_ids"])
    return agree / total
